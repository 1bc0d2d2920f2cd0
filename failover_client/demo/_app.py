"""Command line of the demo: ``python -m failover_client.demo [--quick] [--out PNG] ...``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from ._harness import PROTOCOLS
from ._run import EXIT_INTERRUPTED, DemoConfig, run_demo
from ._scenario import full_scenario, quick_scenario

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m failover_client.demo",
        description="Start local brokers (a network of ActiveMQ brokers for STOMP, "
        "independent RabbitMQ nodes for AMQP 1.0), run a producer and a consumer through "
        "failover connections, kill / hang / restart brokers on a script, and prove that no "
        "confirmed message was lost. Exit code 0: nothing lost; 1: a confirmed message was "
        "lost; 3: brokers cannot run here; 130: interrupted.",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="stomp",
        help="what the clients speak: stomp (ActiveMQ brokers, the default) or amqp "
        "(RabbitMQ's AMQP 1.0; needs the amqp extra)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="the short scenario (about 20 s of traffic)"
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
    args = build_parser().parse_args(argv)
    styled = False if args.plain else (True if args.live else None)
    config = DemoConfig(
        scenario=quick_scenario() if args.quick else full_scenario(),
        out=args.out,
        rate=args.rate,
        backend=args.backend,
        styled=styled,
        protocol=args.protocol,
    )
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
