"""``failover-client receive URI DESTINATION``: messages become stdout lines."""

from __future__ import annotations

import argparse
import json
import threading
from typing import Any, Literal

from failover_client import Message

from ._common import (
    DESTINATION_HELP,
    add_connection_arguments,
    open_connection,
    parse_headers,
    parse_target,
    positive_int,
    seconds,
)
from ._env import Environment
from ._exit import ExitCode
from ._progress import Progress, wants_progress

__all__ = ["Printer", "add_parser", "format_message", "run"]


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "receive",
        help="print messages of a destination to stdout, one per line",
        description="Subscribe through a failover connection and print each message body as "
        "one line (--json: one JSON object per line). The subscription is restored on "
        "another broker after a failover. With --ack client (the default) a message is "
        "acknowledged only after it was written to stdout, so nothing is lost if the tool "
        "dies; messages beyond --count are left to the broker. With --ack auto a message "
        "is acknowledged once it was handled, printed or not: those beyond --count are dropped.",
    )
    add_connection_arguments(parser)
    parser.add_argument("destination", metavar="DESTINATION", help=DESTINATION_HELP)
    parser.add_argument("--count", type=positive_int, help="stop after N messages")
    parser.add_argument(
        "--timeout",
        type=seconds,
        help="stop after this many seconds, connecting included (exit 3 when no broker "
        "answered by then, 5 when --count was not reached)",
    )
    parser.add_argument(
        "--ack", choices=("auto", "client"), default="client", help="acknowledgement mode"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per message")
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="add a header to the SUBSCRIBE frame (e.g. a selector; repeatable)",
    )
    parser.set_defaults(run=run)


def format_message(message: Message, *, as_json: bool) -> str:
    """One output line (without the line end) for ``message``."""
    body = message.body.decode("utf-8", errors="replace")
    if not as_json:
        return body.rstrip("\r\n")
    return json.dumps(
        {
            "destination": message.destination,
            "message_id": message.message_id,
            "redelivered": message.redelivered,
            "headers": dict(message.headers),
            "body": body,
        },
        sort_keys=True,
    )


class Printer:
    """The subscription handler: prints, acknowledges, and says when ``count`` is reached."""

    def __init__(
        self,
        env: Environment,
        *,
        count: int | None,
        ack: Literal["auto", "client"],
        as_json: bool,
        progress: Progress | None = None,
    ) -> None:
        self._env = env
        self._progress = progress
        self._count = count
        self._ack = ack
        self._json = as_json
        self._lock = threading.Lock()
        self.received = 0
        self.done = threading.Event()

    def __call__(self, message: Message) -> None:
        with self._lock:
            if self._count is not None and self.received >= self._count:
                return  # left unacknowledged: the broker gives it to another consumer
            self._env.stdout.write(format_message(message, as_json=self._json) + "\n")
            self._env.stdout.flush()
            self.received += 1
            if self._progress is not None:
                self._progress.advance()
            reached = self._count is not None and self.received >= self._count
        if self._ack == "client":
            message.ack()  # after the line is out: a crash before this means a redelivery
        if reached:
            self.done.set()


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    target = parse_target(args.uri)
    headers = parse_headers(args.header)
    connection = open_connection(target, args, env)
    progress = Progress(
        env.stderr, "received", total=args.count, show=wants_progress(env.stderr, env.styled_stderr)
    )
    printer = Printer(env, count=args.count, ack=args.ack, as_json=args.json, progress=progress)
    began = env.clock.monotonic()
    connection.subscribe(args.destination, printer, ack=args.ack, headers=headers)
    try:
        connection.connect(timeout=args.timeout)
        left = None if args.timeout is None else args.timeout - (env.clock.monotonic() - began)
        with progress:
            env.clock.wait(printer.done, None if left is None else max(left, 0.0))
    finally:
        broker = connection.broker
        connection.close()
        elapsed = env.clock.monotonic() - began
        env.stderr.write(
            f"failover-client receive: {printer.received} messages from {args.destination} "
            f"in {elapsed:.2f} s via {broker or 'no broker'}\n"
        )
    if args.count is not None and printer.received < args.count:
        return ExitCode.INCOMPLETE
    return ExitCode.OK
