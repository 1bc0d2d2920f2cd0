"""Cost of one plan and of one first-choice pick per policy, at 100 brokers.

Run: python benchmarks/bench_policies.py [--brokers N] [--samples N] [--batch N]

Each sample times ``batch`` consecutive calls with perf_counter_ns and divides, so the timer's own
cost is spread out; the table reports the median and the 95th percentile over the samples, in
microseconds per call. The broker list is the same list object on every call, as the engine's is
between topology changes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from failover_client.policies import create_policy, distinct_plan, registered_policies


def measure(call: Callable[[], object], *, samples: int, batch: int) -> tuple[float, float]:
    """(median, p95) microseconds per call."""
    for _ in range(batch):  # warm caches and the interpreter's specialisations
        call()
    per_call: list[float] = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        for _ in range(batch):
            call()
        per_call.append((time.perf_counter_ns() - start) / batch / 1000.0)
    per_call.sort()
    return statistics.median(per_call), per_call[int(0.95 * (len(per_call) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()

    brokers = [f"10.0.{i // 256}.{i % 256}:61613" for i in range(args.brokers)]
    print(f"{args.brokers} brokers, {args.samples} samples x {args.batch} calls; us per call")
    print(f"{'policy':<15} {'plan med':>9} {'plan p95':>9} {'first med':>10} {'first p95':>10}")
    for name in registered_policies():
        policy = create_policy(name, rng=random.Random(1), client_id="bench-client")
        plan_med, plan_p95 = measure(
            lambda p=policy: p.plan(brokers), samples=args.samples, batch=args.batch
        )
        first_med, first_p95 = measure(
            lambda p=policy: p.first(brokers), samples=args.samples, batch=args.batch
        )
        print(f"{name:<15} {plan_med:9.2f} {plan_p95:9.2f} {first_med:10.2f} {first_p95:10.2f}")

    random_plan = create_policy("random", rng=random.Random(1)).plan(brokers)
    med, p95 = measure(
        lambda: distinct_plan(random_plan, brokers), samples=args.samples, batch=args.batch
    )
    print(f"{'distinct_plan':<15} {med:9.2f} {p95:9.2f}   (of a random plan)")


if __name__ == "__main__":
    main()
