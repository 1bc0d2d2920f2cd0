"""Plain stomp.py consumers of one queue, the alternative the Spark source is measured against.

Each reads a queue that was filled beforehand and acknowledges everything it read (the same
at-least-once guarantee as the source: a message is acknowledged after it was handled), timed
from SUBSCRIBE until the acknowledgement of the last message was written to the socket.

* ``cumulative`` (``ack=client``): one ACK every ``every`` messages (and one for the last),
  each acknowledging everything before it, written either by stomp.py's reading thread from the
  listener (``writer="reader"``) or by a thread of its own (``writer="thread"``), so that the
  reader never writes. ActiveMQ Classic pages a stored backlog into memory 200 messages at a
  time and only when something wakes the queue (an ACK does; a dispatch does not; see
  ``failover_client/stomp/_pagein.py``), so a subscription that holds more than 200 messages
  unacknowledged receives 200 and then one page per 30 s: a stomp.py user who acknowledges
  cumulatively does it at most every 100 messages (half a page) or stalls;
* ``per-message`` (``ack=client-individual``): one ACK per message from the listener, the way
  stomp.py's documentation shows it. Against ActiveMQ Classic with a large prefetch it can stop
  for good (docs/receiving.md: the broker's dispatch thread holds the connection's lock while its
  write waits for room, its reader waits for that lock, and the client's reader is the thread
  that writes the ACKs); a run in which no message arrives for ``stall_s`` seconds is closed and
  reported as stalled, never waited out.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

PAGE_STEP = 100
"""Messages per cumulative ACK: half of ActiveMQ Classic's page (200), so every ACK wakes the
queue to page in more while the current page is still arriving."""


@dataclass(frozen=True)
class Anchor:
    """One way to consume: the acknowledgement mode, how often and from which thread."""

    name: str
    ack: str  # "client" (cumulative) or "client-individual"
    every: int  # messages per ACK frame
    writer: str  # "reader" (stomp.py's listener) or "thread" (a thread of its own)


def anchors() -> list[Anchor]:
    """The consumers compared: cumulative every 100 and every 50 messages, from either thread;
    then the per-message one, an extra row kept for comparison with earlier runs.

    Cumulative every batch is not among them: it stalls after ActiveMQ Classic's first page of
    200 (see the module's docstring; measured at 5,000 and 100,000 queued), and the backlog a
    stalled run leaves holds the broker's memory and so slows every run after it.
    """
    found = [
        Anchor(f"client, ACK every {n:,}, {writer}", "client", n, writer)
        for n in (PAGE_STEP, PAGE_STEP // 2)
        for writer in ("reader", "thread")
    ]
    found.append(
        Anchor("client-individual, ACK per message, reader", "client-individual", 1, "reader")
    )
    return found


def consume(
    host: str,
    port: int,
    destination: str,
    messages: int,
    prefetch: int,
    anchor: Anchor,
    stall_s: float = 15.0,
) -> dict[str, Any]:
    """Read ``messages`` from ``destination`` the way ``anchor`` says; returns the rate, or
    ``stalled`` with how many arrived when no message came for ``stall_s`` seconds."""
    import stomp  # type: ignore[import-untyped]  # noqa: PLC0415 - the alternative only

    conn = stomp.Connection12([(host, port)], heartbeats=(0, 0))
    done = threading.Event()
    seen = [0]
    finished = [0.0]
    acks: queue.SimpleQueue[tuple[str, bool] | None] = queue.SimpleQueue()

    def acknowledge(ack_id: str, last: bool) -> None:
        conn.ack(ack_id)
        if last:
            finished[0] = time.perf_counter()
            done.set()

    def writer() -> None:
        while (item := acks.get()) is not None:  # ends on the None put after the run
            acknowledge(*item)

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            seen[0] += 1
            count = seen[0]
            if count % anchor.every and count != messages:
                return
            if anchor.writer == "thread":
                acks.put((frame.headers["ack"], count == messages))
            else:
                acknowledge(frame.headers["ack"], count == messages)

    thread = threading.Thread(target=writer, name="ack-writer", daemon=True)
    if anchor.writer == "thread":
        thread.start()
    conn.set_listener("bench", Listener())
    conn.connect(wait=True)
    started = time.perf_counter()
    conn.subscribe(
        destination,
        id="plain",
        ack=anchor.ack,
        headers={"activemq.prefetchSize": str(prefetch)},
    )
    stalled = False
    last_count, last_change = 0, time.monotonic()
    while not done.wait(1.0):  # ends when the last ACK is written or on a stall
        if seen[0] != last_count:
            last_count, last_change = seen[0], time.monotonic()
        elif time.monotonic() - last_change > stall_s:
            stalled = True
            break
    if anchor.writer == "thread":
        acks.put(None)
        thread.join(10.0)  # the writer has at most one ACK left to write
    if stalled:
        # A graceful DISCONNECT would wait behind the reader's blocked write (stomp.py's
        # socket lock): shut the socket down, which fails that write and ends the reader.
        conn.transport.disconnect_socket()
        return {"anchor": anchor.name, "stalled": True, "arrived": seen[0], "messages": messages}
    conn.disconnect()
    return {
        "anchor": anchor.name,
        "stalled": False,
        "messages": messages,
        "per_s": messages / (finished[0] - started),
    }
