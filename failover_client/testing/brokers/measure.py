"""Print the harness's own figures: start-up, SIGKILL + restart, memory per broker.

    python -m failover_client.testing.brokers.measure        # ActiveMQ and RabbitMQ, 3 runs
    python -m failover_client.testing.brokers.measure --runs 5 --messages 20000 --only activemq

Each figure is the time from the first signal or spawn until the broker answers its protocol
handshake (STOMP CONNECTED; for RabbitMQ also an AMQP 1.0 open). Runs use fresh brokers under
a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ._backend import start_cluster
from ._cluster import Cluster
from ._local import LocalBroker
from ._model import BrokerKind, ClusterSpec

MB = 1024 * 1024


def _summary(label: str, seconds: Sequence[float]) -> str:
    return (
        f"{label:<48} median {statistics.median(seconds):6.2f} s   "
        f"min {min(seconds):5.2f} s   max {max(seconds):5.2f} s   (n={len(seconds)})"
    )


def _rss(cluster: Cluster) -> list[int]:
    return [b.rss_bytes() // MB for b in cluster if isinstance(b, LocalBroker)]


def _kill_restart(cluster: Cluster, index: int) -> float:
    broker = cluster[index]
    began = time.monotonic()
    broker.kill()
    broker.start()
    return time.monotonic() - began


def measure(kind: BrokerKind, size: int, runs: int, messages: int, root: Path) -> None:
    """Start, kill and restart ``runs`` clusters of ``kind`` and print the figures."""
    starts: list[float] = []
    restarts: list[float] = []
    loaded: list[float] = []
    rss_idle: list[int] = []
    rss_busy: list[int] = []
    for run in range(runs):
        began = time.monotonic()
        cluster = start_cluster(ClusterSpec(kind, size), root / f"{kind}-{run}")
        starts.append(time.monotonic() - began)
        try:
            rss_idle += _rss(cluster)
            restarts.append(_kill_restart(cluster, 0))
            if messages:
                cluster[0].send("/queue/measure", (f"m{i}" for i in range(messages)))
                loaded.append(_kill_restart(cluster, 0))
                rss_busy += _rss(cluster)[:1]
        finally:
            cluster.close()
    print(_summary(f"{kind}: start {size} brokers together", starts))
    print(_summary(f"{kind}: SIGKILL + restart one (empty store)", restarts))
    if loaded:
        print(_summary(f"{kind}: SIGKILL + restart with {messages} persistent msgs", loaded))
    print(f"{kind}: RSS per broker after start: {min(rss_idle)}-{max(rss_idle)} MB")
    if rss_busy:
        print(f"{kind}: RSS after recovering {messages} msgs: {min(rss_busy)}-{max(rss_busy)} MB")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry: parse ``argv`` and measure each chosen broker kind."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--messages",
        type=int,
        default=5000,
        help="persistent messages to recover in the loaded restart (0: skip)",
    )
    parser.add_argument("--only", choices=[k.value for k in BrokerKind], action="append")
    args = parser.parse_args(argv)
    kinds = (
        [BrokerKind(k) for k in args.only]
        if args.only
        else [BrokerKind.ACTIVEMQ, BrokerKind.RABBITMQ]
    )
    sizes = {BrokerKind.ACTIVEMQ: 3, BrokerKind.RABBITMQ: 2, BrokerKind.ARTEMIS: 2}
    with tempfile.TemporaryDirectory(prefix="failover-measure-") as tmp:
        for kind in kinds:
            measure(kind, sizes[kind], args.runs, args.messages, Path(tmp))


if __name__ == "__main__":
    main()
