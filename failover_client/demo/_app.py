"""Command line of the demo: ``python -m failover_client.demo [--scenario NAME] [--out PNG]``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from ._fleet import FLEET_SIZE
from ._harness import PROTOCOLS
from ._run import EXIT_INTERRUPTED, DemoConfig, run_demo
from ._scenario import SCENARIOS
from ._sources import SOURCES, default_source

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m failover_client.demo",
        description="Start local brokers (a network of ActiveMQ brokers for STOMP, "
        "independent RabbitMQ nodes for AMQP 1.0), run a producer, a consumer and a fleet of "
        "idle rebalancing clients through failover connections, kill / hang / restart brokers "
        "on a script (a new broker joins: the clients learn of it from the brokers and about "
        "1/N of the fleet moves to it), and prove that no confirmed message was lost. Exit "
        "code 0: nothing lost; 1: a confirmed message was lost; 3: brokers cannot run here; "
        "130: interrupted.",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="stomp",
        help="what the clients speak: stomp (ActiveMQ brokers, the default) or amqp "
        "(RabbitMQ's AMQP 1.0; needs the amqp extra)",
    )
    script = parser.add_mutually_exclusive_group()
    script.add_argument(
        "--scenario",
        choices=tuple(SCENARIOS),
        default="full",
        help="full: every kind of trouble, then a fourth broker joins (about 45 s of "
        "traffic); quick: the same, shorter (about 20 s); tiers: two local and two remote "
        "brokers with priorityBackup + rebalance (about 30 s)",
    )
    script.add_argument(
        "--quick", action="store_true", help="the short scenario (same as --scenario quick)"
    )
    parser.add_argument(
        "--fleet",
        type=int,
        default=FLEET_SIZE,
        help=f"idle clients with rebalance=true shown per broker (default {FLEET_SIZE}; 0: none)",
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default=None,
        help="how clients learn of a joining broker: openwire (ActiveMQ's own cluster push), "
        "advisory (network-bridge advisories over STOMP) or file (a broker-list file the demo "
        f"edits: the fallback, and the only way over AMQP). Default: {default_source('stomp')} "
        "for STOMP, file for AMQP",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("demo-timeline.png"),
        help="where to write the timeline PNG (default: demo-timeline.png)",
    )
    parser.add_argument(
        "--rate", type=float, default=100.0, help="messages per second the producer sends"
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "local", "docker"),
        default=None,
        help="how brokers run (default: $FAILOVER_BROKER_BACKEND, else local when installed)",
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--plain", action="store_true", help="log lines instead of the live view")
    view.add_argument("--live", action="store_true", help="the live view even when not a tty")
    return parser


def _interrupt_on_term(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes the same clean-up path as Ctrl-C: every broker is killed on the way out.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    styled = False if args.plain else (True if args.live else None)
    try:
        config = DemoConfig(
            scenario=SCENARIOS["quick" if args.quick else args.scenario](),
            out=args.out,
            rate=args.rate,
            backend=args.backend,
            styled=styled,
            protocol=args.protocol,
            fleet=args.fleet,
            source=args.source,
        )
    except ValueError as exc:
        parser.error(str(exc))
    # The live view and the event lines already tell every loss; the library's own warnings
    # would only scribble over the view.
    logging.getLogger("failover_client").addHandler(logging.NullHandler())
    previous = signal.signal(signal.SIGTERM, _interrupt_on_term)
    try:
        return run_demo(config, stdout=sys.stdout, stderr=sys.stderr)
    except KeyboardInterrupt:
        sys.stderr.write("failover-client demo: interrupted; every broker was stopped\n")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
