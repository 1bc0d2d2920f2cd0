"""Send numbered messages over AMQP 1.0 in confirmed batches; print each confirmed one.

Run it against two or more RabbitMQ nodes (AMQP 1.0 plugin on) and kill the one in use::

    python examples/amqp_producer.py \\
        --uri 'failover:(amqp://127.0.0.1:5672,amqp://127.0.0.1:5673)?randomize=false' \\
        --login guest --destination /amq/queue/orders --count 1000

``/amq/queue/orders`` is RabbitMQ's AMQP 1.0 address of a queue that already exists: declare
``orders`` durable on every node first. (RabbitMQ's ``/queue/orders`` declares a queue that a
restart loses, and a message to ``/amq/queue/`` of a queue that does not exist is accepted and
dropped.)

Each batch goes out with ``send_async`` (nothing waits between messages) and ``flush`` waits
until the broker accepted every one: a ``confirmed message <n>`` line means the broker has it.
When the node in use dies, the connection moves to another one, re-sends what was not yet
confirmed and carries on; a re-sent message can arrive twice, both copies with the same
``failover-message-id``. Ctrl-C stops at once and closes the connection (messages of the
batch that were not confirmed yet may or may not have arrived).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from failover_client import Event, FailedOver, FailoverClientError, FailoverConnection

_output = threading.Lock()  # the listener prints from the library's event thread


def say(line: str) -> None:
    with _output:
        # One write per line: Ctrl-C (KeyboardInterrupt) lands between calls, never inside
        # one, and print() writes the text and its newline in two.
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def show_failover(event: Event) -> None:
    """A listener: runs on the connection's event thread, so it only prints."""
    if isinstance(event, FailedOver):
        say(f"event: {event}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="failover:(amqp://a:5672,amqp://b:5672)")
    parser.add_argument("--destination", default="/amq/queue/example", help="where to send")
    parser.add_argument("--count", type=int, default=100, help="messages to send; 0: no end")
    parser.add_argument("--batch", type=int, default=20, help="messages per confirmed batch")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between batches")
    parser.add_argument("--login", help="broker user (or put it in the URI)")
    parser.add_argument(
        "--passcode",
        default=os.environ.get("BROKER_PASSCODE"),
        help="broker password (default: $BROKER_PASSCODE; kept out of logs and errors)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    connection = FailoverConnection(
        args.uri, login=args.login, passcode=args.passcode, listeners=[show_failover]
    )
    pause = threading.Event()  # never set: waiting on it is an interruptible pause
    confirmed = 0
    try:
        connection.connect()
        n = 0
        while args.count == 0 or n < args.count:
            size = args.batch if args.count == 0 else min(args.batch, args.count - n)
            batch = {
                i: connection.send_async(args.destination, f"message {i}")
                for i in range(n, n + size)
            }
            connection.flush()  # returns once every message sent so far is confirmed
            for i, future in batch.items():
                future.result()  # raises if the broker refused this message
                confirmed += 1
                say(f"confirmed message {i}")
            n += size
            if args.interval:
                pause.wait(args.interval)
    except KeyboardInterrupt:
        say(f"interrupted after {confirmed} confirmed message(s)")
    except FailoverClientError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    say(f"done: {confirmed} message(s) confirmed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
