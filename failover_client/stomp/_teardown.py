"""The end of a STOMP session: closed by the engine, or lost.

* :func:`close` (the engine's ``close()``): DISCONNECT with a receipt when the broker is
  healthy, then :func:`release`; confirmations still outstanding fail; ``on_lost`` is not called.
  The wait for the receipt ends once the broker has been silent for ``BYE_SILENCE`` (a hung
  broker never answers; a busy one keeps sending receipts and messages and is waited for up
  to ``close_timeout``).
* :func:`lose` (any thread that notices the connection is dead): exactly once per session,
  fail every outstanding confirmation, then call ``on_lost``, then end the threads. During the
  handshake it only records the first cause, which ``open()`` raises.
* :func:`release`: stop the watchdog, abort the transport and join the threads, never the
  caller's own.
"""

from __future__ import annotations

import logging
import threading

from stomp.utils import Frame

from failover_client._errors import BrokerRefused, BrokerUnavailable, ConnectionFailure
from failover_client.stomp._loopread import LoopReader, reads_here
from failover_client.stomp._state import SessionState

__all__ = ["close", "lose", "release"]

_log = logging.getLogger("failover_client.stomp")

_BYE = "bye"
"""The DISCONNECT frame's receipt id."""

BYE_SILENCE = 0.25
"""Seconds without a byte from the broker, or a write to it, after which close() stops
waiting for the receipt.

A broker that works answers DISCONNECT within milliseconds, or keeps sending (receipts for
earlier sends, messages) while it works through a backlog; one that is hung (SIGSTOP, a full
disk) sends nothing, and waiting the whole ``close_timeout`` for it only delays the
application's close. What the DISCONNECT receipt adds is that fire-and-forget frames written
before were handled; frames already handed to the socket still reach a broker that wakes up,
and no send with a confirmation depends on it (those fail with BrokerUnavailable on close).
ACKs written just before ``close()`` are such frames: the socket ends with a FIN behind them,
so the broker reads them before the end of the connection, and what they acknowledge is not
redelivered (``integration/test_stomp_close_acks.py`` holds every byte for twice this silence
each way, so close() leaves before the receipt, and finds none of them lost).
"""


def close(state: SessionState) -> None:
    """Say DISCONNECT (when the session is open), release everything, fail what is unconfirmed.

    Never raises; idempotent.
    """
    with state.lock:
        if state.phase == "closed":
            return
        polite = state.phase == "open"
        state.phase = "closed"
    try:
        if polite:
            _say_goodbye(state)
    except Exception as exc:  # noqa: BLE001 - close never raises; the socket goes anyway
        _log.debug("%s: DISCONNECT failed: %r", state.broker, exc)
    release(state)
    state.complete(
        state.receipts.fail_all(
            BrokerUnavailable("session closed before the broker confirmed", broker=state.broker)
        )
    )
    if state.group is not None:
        state.group.clear()


def _say_goodbye(state: SessionState) -> None:
    transport = state.transport
    # Another thread may hold the lock for a moment, queueing an ACK: DISCONNECT goes after
    # it (skipping DISCONNECT would abort the writer and drop that ACK). One that holds it
    # longer is stuck on a full socket: the broker is not listening anyway.
    if transport is None or not state.write_lock.acquire(timeout=BYE_SILENCE):
        return
    try:
        state.bye_receipt = _BYE
        # stomp.py's full path for this one frame: it notes the receipt, which its I/O loop
        # then takes as the end of the connection (see BoundTransport.transmit).
        transport.transmit(Frame("DISCONNECT", {"receipt": _BYE}, b""))
    finally:
        state.write_lock.release()
    if not reads_here(transport.io_thread):
        # The receipt also means every frame queued before DISCONNECT was written.
        _await_bye(state)
    else:
        # From the I/O thread itself the receipt could never be read: only let the writer put
        # what is queued on the socket before the abort.
        transport.flush(state.close_timeout)


def _await_bye(state: SessionState) -> None:
    """Wait for the DISCONNECT receipt while the broker shows life, up to ``close_timeout``."""
    clock = state.clock
    now = clock.monotonic()
    deadline = now + state.close_timeout
    asked = now
    while True:
        beats = state.heartbeat
        # A broker that still takes our bytes is alive too: one working through thousands of
        # ACKs written just before close() answers nothing until it reaches DISCONNECT, and
        # leaving then would abort the writer with the rest of them.
        heard = asked if beats is None else max(asked, beats.last_received, beats.last_sent)
        # Each wake-up (the receipt, or the silence limit) re-reads when the broker last sent
        # a byte: bytes that arrived meanwhile push the limit on, never past the deadline.
        until = min(deadline, heard + BYE_SILENCE)
        remaining = until - clock.monotonic()
        if remaining <= 0 or clock.wait(state.bye, remaining):
            return


def release(state: SessionState) -> None:
    """Stop the watchdog, abort the transport and join the threads (never the caller's)."""
    timeout = state.close_timeout
    monitor = state.monitor
    if monitor is not None:
        monitor.stop(join_timeout=timeout)
    state.page_in.close()
    transport = state.transport
    if transport is None:
        return
    io_thread = transport.io_thread
    transport.abort()
    if not transport.join_writer(timeout):
        _log.warning("%s: writer thread still busy after %g s", state.broker, timeout)
    if io_thread is None:
        transport.close_unstarted()
    elif isinstance(io_thread, LoopReader):
        io_thread.join(timeout)  # never waits on the loop's thread (see _loopread)
        if io_thread.is_alive() and not io_thread.on_loop_thread():
            _log.warning("%s: the event loop did not end the session's reading", state.broker)
    elif io_thread is not threading.current_thread():
        io_thread.join(timeout)
        if io_thread.is_alive():
            _log.warning(
                "%s: I/O thread still busy after %g s (a listener callback is blocking it)",
                state.broker,
                timeout,
            )


def lose(state: SessionState, cause: ConnectionFailure) -> None:
    """The connection is dead: fail confirmations, then tell the listener, exactly once."""
    with state.lock:
        if state.phase in ("lost", "closed"):
            return
        if state.phase == "connecting":
            # open() is waiting: it raises the first cause and cleans up.
            if state.handshake_error is None:
                state.handshake_error = cause
            state.handshake_done.set()
            return
        state.phase = "lost"
        state.lost_cause = cause
    lost = f"session lost before the broker confirmed: {cause}"
    if isinstance(cause, BrokerRefused):
        # The broker refused a frame it did not name: the sends it may have read fail with a
        # refusal (the engine looks among them for the culprit), the runs written after the
        # one in doubt with a plain loss (it never read them: they are innocent).
        group = state.group
        spared = group.after_the_doubt() if group is not None else frozenset()
        failed = state.receipts.fail_all(
            BrokerRefused(lost, broker=state.broker),
            spared=spared,
            spared_cause=BrokerUnavailable(f"{lost} (never read by the broker)"),
        )
    else:
        failed = state.receipts.fail_all(BrokerUnavailable(lost))
    state.complete(failed)
    if state.group is not None:
        state.group.clear()
    try:
        state.listener.on_lost(state.session, cause)
    except Exception as exc:  # noqa: BLE001 - the engine's bug must not kill our thread
        _log.exception("%s: on_lost listener failed: %r", state.broker, exc)
    # Only now wake the watchdog and the writer to end: woken earlier, their threads would
    # queue for the GIL ahead of the reconnect loop that on_lost just woke. Nothing is written
    # meanwhile: every write checks the phase, which is "lost" already.
    monitor = state.monitor
    if monitor is not None:
        monitor.stop()
    state.page_in.close()
    if state.transport is not None:
        # A reset, not a FIN: a broker that stopped reading would never see the FIN, and
        # would keep the connection and refuse our client id (see BoundTransport.abort).
        state.transport.abort(reset=True)
