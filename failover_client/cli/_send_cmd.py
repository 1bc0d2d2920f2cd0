"""``failover-client send URI DESTINATION``: stdin lines (or ``--body``) become messages."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TextIO

from failover_client import FailoverConnection, SendFailure

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

__all__ = ["SendTally", "add_parser", "bodies", "run"]

_SHOWN_FAILURES = 5


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "send",
        help="send stdin lines (or --body) as messages, each confirmed by a broker",
        description="Send each line of stdin (or --body) as one message through a failover "
        "connection. By default every message is confirmed by a broker (a STOMP receipt, an "
        "AMQP 1.0 accepted disposition); "
        "after a failover unconfirmed messages are re-sent, so a consumer may see one twice "
        "(same failover-message-id header). A summary goes to stderr; the exit code is 4 "
        "when any message was not confirmed.",
    )
    add_connection_arguments(parser)
    parser.add_argument("destination", metavar="DESTINATION", help=DESTINATION_HELP)
    parser.add_argument("--body", help="send this text instead of reading stdin")
    parser.add_argument(
        "--count",
        type=positive_int,
        help="with --body: how many copies (default 1); with stdin: stop after N lines",
    )
    parser.add_argument(
        "--receipt",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for each message's confirmation (default); --no-receipt writes and forgets",
    )
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="add a header to every message (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        help="seconds to wait for a broker to connect to (exit 3 after that), then for room "
        "to send each message and for the last confirmations (default 30)",
    )
    parser.set_defaults(run=run)


def bodies(body: str | None, count: int | None, stdin: TextIO) -> Iterator[str]:
    """The message bodies: ``count`` copies of ``body``, or stdin lines (without line ends)."""
    if body is not None:
        yield from (body for _ in range(count or 1))
        return
    for number, line in enumerate(stdin, start=1):
        yield line.rstrip("\r\n")
        if count is not None and number >= count:
            return


@dataclass
class SendTally:
    """What happened to the messages of one ``send`` run."""

    confirm: bool
    sent: int = 0
    confirmed: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def unconfirmed(self) -> int:
        return self.sent - self.confirmed if self.confirm else 0

    def summary(self, destination: str, broker: str | None, seconds: float, failovers: int) -> str:
        rate = f"{self.sent / seconds:.0f} msg/s" if seconds > 0 else "-"
        if self.confirm:
            head = f"{self.sent} sent, {self.confirmed} confirmed, {self.unconfirmed} not confirmed"
        else:
            head = f"{self.sent} written without confirmation"
        return (
            f"failover-client send: {head} in {seconds:.2f} s ({rate}) to {destination} "
            f"via {broker or 'no broker'} ({failovers} failovers)"
        )


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    target = parse_target(args.uri)
    headers = parse_headers(args.header)
    connection = open_connection(target, args, env)
    tally = SendTally(confirm=args.receipt)
    began = env.clock.monotonic()
    total = (args.count or 1) if args.body is not None else args.count
    progress = Progress(
        env.stderr, "sent", total=total, show=wants_progress(env.stderr, env.styled_stderr)
    )
    try:
        connection.connect(timeout=args.timeout)
        with progress:
            futures = _send_all(
                connection,
                args,
                headers,
                bodies(args.body, args.count, env.stdin),
                tally,
                progress=progress,
            )
            _settle(connection, futures, args.timeout, tally)
    finally:
        broker = connection.broker
        failovers = connection.stats().get("failovers", 0)
        connection.close()
        elapsed = env.clock.monotonic() - began
        for failure in tally.failures[:_SHOWN_FAILURES]:
            env.stderr.write(f"failover-client send: not confirmed: {failure}\n")
        if len(tally.failures) > _SHOWN_FAILURES:
            env.stderr.write(
                f"failover-client send: ... and {len(tally.failures) - _SHOWN_FAILURES} more\n"
            )
        env.stderr.write(tally.summary(args.destination, broker, elapsed, failovers) + "\n")
    return ExitCode.UNCONFIRMED if tally.unconfirmed else ExitCode.OK


def _send_all(
    connection: FailoverConnection,
    args: argparse.Namespace,
    headers: dict[str, str],
    texts: Iterable[str],
    tally: SendTally,
    *,
    progress: Progress,
) -> list[Future[None]]:
    futures: list[Future[None]] = []
    for text in texts:
        if args.receipt:
            futures.append(
                connection.send_async(args.destination, text, headers, timeout=args.timeout)
            )
        else:
            connection.send(args.destination, text, headers, confirm=False, timeout=args.timeout)
        tally.sent += 1
        progress.advance()
    return futures


def _settle(
    connection: FailoverConnection, futures: list[Future[None]], timeout: float, tally: SendTally
) -> None:
    """Wait up to ``timeout`` for outstanding confirmations, then count the outcomes."""
    if futures:
        try:
            connection.flush(timeout=timeout)
        except SendFailure as exc:
            tally.failures.append(f"{type(exc).__name__}: {exc}")
    for future in futures:
        if not future.done():
            continue  # counted as not confirmed; close() fails it
        error = future.exception()
        if error is None:
            tally.confirmed += 1
        else:
            tally.failures.append(f"{type(error).__name__}: {error}")
