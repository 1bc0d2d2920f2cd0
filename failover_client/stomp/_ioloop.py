"""The I/O loop of a plain TCP transport: stomp.py's, without what only TLS needs.

stomp.py's ``BaseTransport.__io_loop`` also writes for a TLS socket (its writes go through a
queue and a selector) and so keeps a :class:`collections.deque` of outgoing chunks, with its
preallocated block (760 bytes), for as long as the connection lives, on every connection. On a
plain TCP socket the loop only reads (writes are the writer's, see ``net._writer``), so this is
that loop with the write half left out: the same reads, the same end (the socket closed, the
listeners told "receiver_loop_completed" then "disconnected", the waiters of stomp.py's exit
and connect conditions woken), step for step. A TLS transport keeps stomp.py's own loop.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from stomp import exception as stomp_exception
from stomp import log as stomp_log
from stomp import utils as stomp_utils

from failover_client.stomp._decode import parse_frame
from failover_client.stomp._direct import tell_beat

__all__ = ["end_io_loop", "process_frames", "read_burst", "read_loop"]


def read_loop(transport: Any) -> None:
    """Read frames until the connection ends, then clean up and tell the listeners."""
    notify_disconnected = True
    try:
        while transport.running:
            try:
                while transport.running:
                    transport._BaseTransport__read_frames()
            except stomp_exception.ConnectionClosedException:
                if transport.running:
                    # stomp.py's own: drop a half-received frame of the lost connection.
                    transport._BaseTransport__recvbuf = b""
                    transport.running = False
                    notify_disconnected = True
                break
            except Exception as exc:  # noqa: BLE001 - stomp.py's rule: log, then read on
                stomp_log.warning(exc)
            finally:
                transport.cleanup()
    except Exception as exc:  # noqa: BLE001 - stomp.py's rule: the end below always runs
        stomp_log.warning(exc)
    finally:
        end_io_loop(transport, notify_disconnected=notify_disconnected)


def end_io_loop(transport: Any, *, notify_disconnected: bool = True) -> None:
    """The end of stomp.py's I/O loop, step for step (also the event loop's reader's end).

    The waiters of the I/O loop's exit are woken, the listeners told "receiver_loop_completed"
    and then "disconnected" (unless it was said already), and the waiters for CONNECTED woken.
    """
    exit_condition = transport._BaseTransport__io_thread_exit_condition
    with exit_condition:
        transport._BaseTransport__io_thread_exited = True
        exit_condition.notify_all()
    stomp_log.debug("io loop ended")
    transport.notify("receiver_loop_completed")
    if notify_disconnected and not transport.notified_on_disconnect:
        transport.notify("disconnected")
    connect_condition = transport._BaseTransport__connect_wait_condition
    with connect_condition:
        connect_condition.notify_all()
    transport.notified_on_disconnect = False


def read_burst(transport: Any) -> list[bytes]:
    """One burst of reads, split into whole frames (the transport's ``__read``).

    stomp.py 9's ``__read``, but for the split (``_decode.split_frames`` through the
    transport's ``split_chunks``: no copy of the rest of the buffer per frame).
    """
    # As stomp.py: read until a chunk holds a NUL (or a lone EOL, a heart-beat, to
    # an empty buffer), then split what was gathered into frames (see split_frames).
    is_eol = transport._BaseTransport__is_eol
    chunks: list[bytes] = []
    while transport.running:
        try:
            try:
                data = transport.receive()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except stomp_exception.InterruptedException:
                continue
        except Exception:  # noqa: BLE001 - stomp.py's own rule: a failed read ends the loop
            data = b""
        if not data:
            if not transport.blocking:
                break  # TLS: no record complete yet (receive ends the loop on a real EOF)
            raise stomp_exception.ConnectionClosedException()
        if is_eol(data) and not transport._BaseTransport__recvbuf and not chunks:
            return [data]
        chunks.append(data)
        if b"\x00" in data:
            break
    frames: list[bytes] = transport.split_chunks(chunks)
    return frames


def process_frames(
    transport: Any, frames: list[bytes], frames_done: Callable[[], None] | None
) -> None:
    """Parse ``frames`` (one read's) and hand them on, then call ``frames_done``.

    stomp.py 9's ``__read_frames`` line for line, but for the parser (see ``_decode``) and
    ``frames_done``, called once after the read's last frame even when a listener raised: the
    session settles once per read what it used to count per message (its watchdog's dispatch,
    page-in), which was two locks and two clock reads a message.
    """
    try:
        for frame in frames:
            if transport._BaseTransport__is_eol(frame):
                if tell_beat(transport.listeners):  # see _direct
                    transport._unframed = len(transport._BaseTransport__recvbuf)
                    continue
                parsed = stomp_utils.HEARTBEAT_FRAME
            else:
                parsed = parse_frame(frame)
            if parsed is None:
                continue
            if transport._BaseTransport__auto_decode:
                parsed.body = stomp_utils.decode(parsed.body)
            transport.process_frame(parsed, frame)
    finally:
        if frames and frames_done is not None:
            frames_done()
