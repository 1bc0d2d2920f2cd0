"""A subscription's buffer hand-off alone: per-message take/finish against batches.

Run: ``python benchmarks/probe_inbox_handoff.py [--messages 100000] [--window 1000]``

One thread, no broker: fills an ``Inbox`` with ``--window`` messages, then drains it the way a
handler worker did before batches (``take`` + ``finish`` per message, each telling the stop
machinery that something moved) and the way it does now (``take_batch`` of 16, 64, 256, then
``next_taken`` per message and one ``finish_all``), with a no-op handler, for ``--messages`` in
all; prints the best of 7 in microseconds per message. It measures the locks and calls the
batches save, uncontended: in a consumer the I/O thread takes the same lock to put.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from failover_client._clock import SystemClock
from failover_client.engine._inbox import Inbox
from failover_client.engine._progress import Progress
from failover_client.engine._subscriptions import Message


class _Stub:
    """What the inbox reads of a message: its session."""

    __slots__ = ("session",)

    def __init__(self, session: object) -> None:
        self.session = session


def _one_by_one(inbox: Inbox) -> None:
    while not inbox.idle():
        message = inbox.take(None)
        assert message is not None
        inbox.finish(message)


def _batches(limit: int) -> Callable[[Inbox], None]:
    def drain(inbox: Inbox) -> None:
        while not inbox.idle():
            inbox.take_batch(None, limit)
            run = []
            while (message := inbox.next_taken()) is not None:
                run.append(message)
            inbox.finish_all(run)

    return drain


def measure(drain: Callable[[Inbox], None], messages: int, window: int) -> float:
    """Best of 7: microseconds per message for ``drain`` to empty full buffers."""
    clock = SystemClock()
    progress = Progress(clock, lambda slot: False)
    session = object()
    best = float("inf")
    for _ in range(7):
        inbox = Inbox(clock, window, progress.moved_on)
        stubs = [cast(Message, _Stub(session)) for _ in range(window)]
        spent = 0.0
        for _ in range(max(1, messages // window)):
            for stub in stubs:
                inbox.put(stub)
            start = time.perf_counter()
            drain(inbox)
            spent += time.perf_counter() - start
            for stub in stubs:
                inbox.settled(stub, cumulative=False)
        best = min(best, spent)
    return 1e6 * best / (max(1, messages // window) * window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=1000)
    args = parser.parse_args()
    cases: list[tuple[str, Callable[[Inbox], None]]] = [("take + finish", _one_by_one)]
    cases += [(f"batches of {limit}", _batches(limit)) for limit in (16, 64, 256)]
    for label, drain in cases:
        print(f"{label:>16}: {measure(drain, args.messages, args.window):.3f} us/msg")


if __name__ == "__main__":
    main()
