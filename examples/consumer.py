"""Receive messages through a failover connection, print each one and acknowledge it.

Run it beside ``producer.py`` and kill the broker in use while both run::

    python examples/consumer.py \\
        --uri 'failover:(stomp://127.0.0.1:61613,stomp://127.0.0.1:61623)?randomize=false' \\
        --destination /queue/orders --count 1000

The subscription belongs to the failover connection, not to one broker: after a fail-over it
is made again, with the same id, on the next broker. Each message is acknowledged after it was
printed (``client-individual`` mode), so a message the consumer never handled stays on the
broker and comes again (marked ``redelivered``). A copy of a message already seen (same
``failover-message-id``) is reported as a duplicate, acknowledged and otherwise ignored.

``--count`` stops after that many different messages; without it, Ctrl-C stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import TextIO

from failover_client import (
    Connected,
    Disconnected,
    Event,
    FailedOver,
    FailoverClientError,
    FailoverConnection,
    GaveUp,
    Message,
    PriorityRestored,
)

# The event listener runs on the library's dispatch thread and the main loop on this one: two
# unlocked print() calls can interleave inside one line, so every line goes through say().
_output = threading.Lock()


def say(*parts: object, file: TextIO | None = None) -> None:
    """Write one whole line, flushed, from any thread."""
    out = file or sys.stdout
    with _output:
        # One write per line: Ctrl-C (KeyboardInterrupt) lands between calls, never inside
        # one, and print() writes the text and its newline in two.
        out.write(" ".join(map(str, parts)) + "\n")
        out.flush()


SHOWN_EVENTS = (Connected, Disconnected, FailedOver, PriorityRestored, GaveUp)


def show_event(event: Event) -> None:
    if isinstance(event, SHOWN_EVENTS):
        say(f"event: {event}")


class Printer:
    """The message handler: print, remember the id, acknowledge; stop after ``count``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen: set[str] = set()
        self.done = threading.Event()

    def __call__(self, message: Message) -> None:
        # Handlers run one at a time on the connection's event thread: no lock needed here.
        key = message.message_id or message.body.decode(errors="replace")
        note = " redelivered" if message.redelivered else ""
        if key in self.seen:
            say(f"duplicate {message.body.decode(errors='replace')} (id {key}{note})")
        else:
            self.seen.add(key)
            say(f"received {message.body.decode(errors='replace')} (id {key}{note})")
        message.ack()
        if self.count and len(self.seen) >= self.count:
            self.done.set()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="failover URI, e.g. failover:(a,b)")
    parser.add_argument("--destination", default="/queue/example", help="where to listen")
    parser.add_argument("--count", type=int, default=0, help="stop after N messages; 0: never")
    parser.add_argument("--login", help="broker user (or put it in the URI)")
    parser.add_argument(
        "--passcode",
        default=os.environ.get("BROKER_PASSCODE"),
        help="broker password (default: $BROKER_PASSCODE; kept out of logs and errors)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    printer = Printer(args.count)
    connection = FailoverConnection(
        args.uri, login=args.login, passcode=args.passcode, listeners=[show_event]
    )
    try:
        # Subscribing before connect() means no message is missed at start-up.
        connection.subscribe(args.destination, printer, ack="client-individual")
        connection.connect()
        say(f"listening on {args.destination}")
        # A wait with a deadline, again and again: Python runs the Ctrl-C handler only
        # when this thread runs, and a wait without one may never return to let it.
        while not printer.done.wait(0.5):
            pass
    except KeyboardInterrupt:
        say("interrupted")
    except FailoverClientError as exc:
        say(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    say(f"done: {len(printer.seen)} message(s) received")
    return 0


if __name__ == "__main__":
    sys.exit(main())
