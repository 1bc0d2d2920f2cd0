"""What a STOMP session writes: callers' frames, group-committed sends and heart-beats.

:meth:`Outbound.write` is the send hot path: one phase check without the lock (a session
that dies right after it fails the write, which is mapped the same way), one encode, one
write under the write lock. Confirmed sends on a group-commit session are queued instead
(:meth:`Outbound.queue`) and encoded by the writer thread when it writes (``_batch``).

Writes are asynchronous on plain TCP (see :class:`~failover_client.stomp.StompSession`); the
writer thread reports each real write (heart-beat traffic) and a failed one (the loss of the
session) through the callbacks :meth:`Outbound.start_writer` hands it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from failover_client._errors import BrokerUnavailable
from failover_client.net._writer import Item, join_frames
from failover_client.stomp._batch import PendingSend
from failover_client.stomp._encode import encode_frame, escape_headers
from failover_client.stomp._errors import transport_error
from failover_client.stomp._state import SessionState
from failover_client.stomp._teardown import lose
from failover_client.stomp._transport import BoundTransport

__all__ = ["Outbound"]

_log = logging.getLogger("failover_client.stomp")


class Outbound:
    """The write side of one session (callers' threads, the writer and the watchdog)."""

    __slots__ = ("_count_sends", "_state", "_writer_runs")

    def __init__(self, state: SessionState) -> None:
        self._state = state
        self._count_sends = True
        """Whether :meth:`write` notes heart-beat traffic itself (no writer thread does it)."""
        self._writer_runs = False
        """Whether a writer thread writes this session's frames (plain TCP)."""

    def start_writer(self, transport: BoundTransport, name: str) -> bool:
        """Start the transport's batching writer thread; False where there is none (TLS)."""
        started = bool(
            transport.start_writer(
                on_written=self._on_written,
                on_failed=self._on_write_failed,
                name=name,
                render=self._render,
            )
        )
        self._count_sends = not started
        self._writer_runs = started
        return started

    def write(
        self, command: str, headers: dict[str, str], body: bytes | None, *, urgent: bool = False
    ) -> None:
        """Encode and write one frame; raises BrokerUnavailable when dead or the write fails.

        ``urgent``: its caller waits for the broker's answer before writing more, so the
        frame is written on this thread whenever nothing is queued ahead of it (see
        :meth:`FrameWriter.put <failover_client.net._writer.FrameWriter.put>`).
        Raises ConfigurationError, before writing, for headers STOMP cannot carry.
        """
        state = self._state
        if state.phase != "open":
            raise state.dead_error()
        transport = state.transport
        if transport is None:
            raise BrokerUnavailable("session was never opened", broker=state.broker)
        # Encoded outside the try: bad input is the caller's error, not a broken connection.
        data = encode_frame(command, escape_headers(headers, state.version), body or b"")
        try:
            with state.write_lock:
                if urgent and self._writer_runs:
                    transport.send_deferred(data, inline=True)
                else:
                    transport.write_encoded(data)
        except Exception as exc:
            # The I/O thread reports the loss (on_lost) once the socket is down.
            transport.abort()
            raise transport_error(exc, broker=state.broker, during=f"{command} write") from exc
        if self._count_sends:
            beats = state.heartbeat
            if beats is not None:
                beats.sent(state.clock.monotonic())

    def write_now(self, frames: Sequence[tuple[str, dict[str, str]]]) -> bool:
        """Write bodiless ``frames`` together from the I/O thread, never waiting; False: not now.

        The I/O thread must not wait for the writer: ActiveMQ stops reading a connection
        while its own write to it blocks (its dispatch holds the connection's lock), so a
        reader that waited for room behind our unread writes would stop both sides for good.
        So the frames are queued past the writer's bound, and skipped (False, nothing
        written) when another thread holds the write lock; the frames go all or none.
        Raises BrokerUnavailable when the write fails.
        """
        state = self._state
        transport = state.transport
        if state.phase != "open" or transport is None:
            return False
        data = b"".join(
            encode_frame(command, escape_headers(headers, state.version), b"")
            for command, headers in frames
        )
        if not state.write_lock.acquire(blocking=False):
            return False
        try:
            if self._writer_runs:
                # Written here when the writer is idle, without waiting for the socket (the
                # writer thread takes what the socket did not): handing every pair to the
                # writer thread woke it once per hundred deliveries.
                transport.send_deferred(data, force=True, inline=True, nowait=True)
            else:
                transport.write_encoded(data)  # TLS: stomp.py's I/O thread writes its queue
        except Exception as exc:
            transport.abort()
            raise transport_error(exc, broker=state.broker, during="page-in write") from exc
        finally:
            state.write_lock.release()
        return True

    def queue(self, item: PendingSend, *, force: bool = False) -> None:
        """Queue a confirmed send for group commit; the writer encodes it when it writes."""
        state = self._state
        if state.phase != "open":
            raise state.dead_error()
        transport = state.bound_transport()
        # With other sends unconfirmed this is part of a burst: leave it to the writer thread,
        # so the burst gathers into one transaction. A lone send (a blocking ``send`` loop,
        # whose caller waits for this receipt before the next) is written at once on this
        # thread whenever the writer is idle, however quickly the broker answered the last.
        alone = state.receipts.outstanding <= 1
        try:
            transport.send_deferred(item, force=force, inline=alone and not force)
        except Exception as exc:
            transport.abort()
            raise transport_error(exc, broker=state.broker, during="SEND write") from exc

    def resend_alone(self, sends: tuple[PendingSend, ...]) -> None:
        """Write each send again outside a transaction, with its own receipt (reader thread)."""
        for send in sends:
            send.alone = True
            try:
                self.queue(send, force=True)
            except BrokerUnavailable:
                return  # the session is lost: its receipt book fails every one of them

    def beat(self) -> None:
        """Write one EOL unless a frame is being written (that counts as traffic anyway)."""
        state = self._state
        transport = state.transport
        if state.current_phase() == "closed":
            # close() is waiting for DISCONNECT's receipt and reads our writes as the broker
            # taking bytes (teardown._await_bye): a beat into a hung broker's socket buffer
            # must not look like that.
            return
        if transport is None or not state.write_lock.acquire(blocking=False):
            return
        try:
            transport.write_heartbeat()
        except Exception as exc:  # noqa: BLE001 - a lost beat is harmless; the watchdog goes on
            _log.debug("%s: heart-beat not written: %r", state.broker, exc)
        finally:
            state.write_lock.release()

    def _render(self, items: Sequence[Item]) -> bytes:
        """The writer's render: transactions once CONNECTED enabled group commit, else frames."""
        state = self._state
        group = state.group
        return join_frames(items) if group is None else group.render(items, state.receipts.written)

    def _on_written(self) -> None:
        """Writer thread: bytes reached the socket, which is what the broker's watchdog sees."""
        beats = self._state.heartbeat
        if beats is not None:
            beats.sent(self._state.clock.monotonic())

    def _on_write_failed(self, exc: BaseException) -> None:
        """Writer thread: a queued write failed; the session is lost, as after any failed write."""
        lose(self._state, transport_error(exc, broker=self._state.broker, during="a queued write"))
