"""Receive messages over AMQP 1.0, print each one, then acknowledge it (client acks).

Run it beside ``amqp_producer.py`` and kill the RabbitMQ node in use while both run::

    python examples/amqp_consumer.py \\
        --uri 'failover:(amqp://127.0.0.1:5672,amqp://127.0.0.1:5673)?randomize=false' \\
        --login guest --destination /amq/queue/orders

The subscription belongs to the failover connection, not to one node: after a fail-over it is
made again on the next node. A message is acknowledged (AMQP: accepted) only after it was
printed, so one the consumer never handled stays on its node and comes again. RabbitMQ nodes
that are not clustered do not pass messages on: what sits on a dead node waits there until it
is back and a consumer reads it there. A copy of a message already seen (same
``failover-message-id``) is reported as a duplicate and acknowledged.

``--count`` stops after that many different messages; without it, Ctrl-C stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from failover_client import Event, FailedOver, FailoverClientError, FailoverConnection, Message

_output = threading.Lock()  # the listener prints from the library's event thread


def say(line: str) -> None:
    with _output:
        # One write per line: Ctrl-C (KeyboardInterrupt) lands between calls, never inside
        # one, and print() writes the text and its newline in two.
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def show_failover(event: Event) -> None:
    if isinstance(event, FailedOver):
        say(f"event: {event}")


class Printer:
    """The message handler: print, remember the id, acknowledge; stop after ``count``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen: set[str] = set()
        self.done = threading.Event()

    def __call__(self, message: Message) -> None:
        # Handlers run one at a time on the connection's event thread: no lock needed here.
        body = message.body.decode(errors="replace")
        key = message.message_id or body
        if key in self.seen:
            say(f"duplicate {body} (id {key})")
        else:
            self.seen.add(key)
            say(f"received {body} (id {key})")
        message.ack()  # client mode: this one and every earlier one of the subscription
        if self.count and len(self.seen) >= self.count:
            self.done.set()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="failover:(amqp://a:5672,amqp://b:5672)")
    parser.add_argument("--destination", default="/amq/queue/example", help="where to listen")
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
        args.uri, login=args.login, passcode=args.passcode, listeners=[show_failover]
    )
    try:
        # Subscribing before connect() means no message is missed at start-up.
        connection.subscribe(args.destination, printer, ack="client")
        connection.connect()
        say(f"listening on {args.destination}")
        # A wait with a deadline, again and again: Python runs the Ctrl-C handler only
        # when this thread runs, and a wait without one may never return to let it.
        while not printer.done.wait(0.5):
            pass
    except KeyboardInterrupt:
        say("interrupted")
    except FailoverClientError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    say(f"done: {len(printer.seen)} message(s) received")
    return 0


if __name__ == "__main__":
    sys.exit(main())
