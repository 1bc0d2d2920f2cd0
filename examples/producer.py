"""Send numbered messages through a failover connection; print each one the broker confirmed.

Run it against two or more brokers and kill the one in use while it runs::

    python examples/producer.py \\
        --uri 'failover:(stomp://127.0.0.1:61613,stomp://127.0.0.1:61623)?randomize=false' \\
        --destination /queue/orders --count 1000 --interval 0.01

Every ``confirmed message <n>`` line means the broker has that message: ``send`` returns only
after the broker's receipt. When the broker in use dies, ``send`` waits while the connection
moves to another broker, re-sends what was not yet confirmed, and carries on; the fail-over is
printed as it happens. A re-sent message can arrive twice; both copies carry the same
``failover-message-id`` header, so a consumer can drop the second one.

Ctrl-C stops after the current message and closes the connection.
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


# Events worth a line on the console; the rest (each reconnect attempt...) would be noise.
SHOWN_EVENTS = (Connected, Disconnected, FailedOver, PriorityRestored, GaveUp)


def show_event(event: Event) -> None:
    """A listener: runs on the connection's event thread, so it only prints."""
    if isinstance(event, SHOWN_EVENTS):
        say(f"event: {event}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="failover URI, e.g. failover:(a,b)")
    parser.add_argument("--destination", default="/queue/example", help="where to send")
    parser.add_argument("--count", type=int, default=100, help="messages to send; 0: no end")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between sends")
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
        args.uri, login=args.login, passcode=args.passcode, listeners=[show_event]
    )
    pause = threading.Event()  # never set: waiting on it is an interruptible pause
    confirmed = 0
    try:
        connection.connect()
        n = 0
        while args.count == 0 or n < args.count:
            connection.send(args.destination, f"message {n}")
            confirmed += 1
            say(f"confirmed message {n}")
            n += 1
            if args.interval:
                pause.wait(args.interval)
    except KeyboardInterrupt:
        say(f"interrupted after {confirmed} confirmed message(s)")
    except FailoverClientError as exc:
        say(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    say(f"done: {confirmed} message(s) confirmed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
