"""Micro-benchmark of the failover URI parser: median and p95 microseconds per parse.

Run: ``python benchmarks/bench_uri_parse.py``. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import statistics
import time

from failover_client.uri import parse

TEN_MEMBERS = (
    "failover:("
    + ",".join(f"stomp+ssl://user:pw@broker{i}.example.com:{61612 + i}" for i in range(10))
    + ")?randomize=false&priorityBackup=true&initialReconnectDelay=100&maxReconnectDelay=5000"
    "&useExponentialBackOff=true&backOffMultiplier=1.5&maxReconnectAttempts=20"
    "&startupMaxReconnectAttempts=3&timeout=3000&heartbeat=500,500"
)
TWO_MEMBERS = "failover:(stomp://a.example.com:61613,stomp://b.example.com:61613)"


def measure(text: str, rounds: int = 2000) -> tuple[float, float]:
    """(median, p95) microseconds per parse of ``text``."""
    for _ in range(200):  # warm-up
        parse(text)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        parse(text)
        samples.append((time.perf_counter_ns() - start) / 1000.0)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def main() -> None:
    for label, text in (("10 members, 10 options", TEN_MEMBERS), ("2 members", TWO_MEMBERS)):
        median, p95 = measure(text)
        print(f"{label:24} median {median:8.1f} us   p95 {p95:8.1f} us")


if __name__ == "__main__":
    main()
