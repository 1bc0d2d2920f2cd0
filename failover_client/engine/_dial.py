"""One reconnect run: try brokers in plan order, waiting on the schedule, until one handshakes.

The run asks the schedule for a delay before every attempt (a pass over the whole plan, or one
broker try, per ``attempt_unit``), waits it on the clock (interruptible by ``close()``), and tries
the brokers of the attempt. It returns the first handshaken session, or raises one error:

* :class:`AllBrokersFailed` when the schedule gives up, with every broker's last cause;
* :class:`AuthenticationFailed` / :class:`TLSFailure` when a broker refused the credentials or
  the certificate. Such a broker is struck from the rest of the run at once (the same credentials
  cannot succeed later), but the brokers not yet tried in the current pass are still tried, so
  one misconfigured broker does not stop a client another broker accepts. At the end of a pass
  that found no broker, the run stops with that error instead of looping: users who share one
  set of credentials across the group want "wrong password", not an endless back-off.
* :class:`ConfigurationError` when a connector refused its settings (an adapter chosen at the
  first dial checks them there): the user's mistake, never retried.

Every connect gets its own :class:`Cancel` token; :meth:`Dialer.cancel` (called by ``close()``)
cancels the one in progress and every later one, so closing does not wait for a handshake with
a hung broker to time out. A cancelled connect is not the broker's fault: it raises
:class:`Interrupted` and leaves the pool untouched.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from failover_client._clock import Clock
from failover_client._errors import (
    AllBrokersFailed,
    AuthenticationFailed,
    BrokerUnavailable,
    ConfigurationError,
    ConnectionFailure,
    TLSFailure,
)
from failover_client._events import Event, ReconnectAttempt, ReconnectWarning
from failover_client.adapter import Cancel, Connector, Session
from failover_client.engine._pool import BrokerPool
from failover_client.engine._slot import Slot, SlotEvents, SlotListener
from failover_client.uri import AttemptUnit, BrokerAddress

__all__ = ["DialOutcome", "Dialer", "Interrupted", "ScheduleLike", "ScheduleRunLike"]

_log = logging.getLogger("failover_client")


class Interrupted(Exception):
    """``close()`` interrupted the run."""


class ScheduleRunLike(Protocol):
    """The part of :class:`failover_client.engine._schedule.ScheduleRun` the dialer uses."""

    unit: AttemptUnit
    attempts: int

    def next_delay(self) -> float | None: ...

    def should_warn(self) -> bool: ...


class ScheduleLike(Protocol):
    """The part of :class:`failover_client.engine._schedule.ReconnectSchedule` the dialer uses."""

    def start(self, *, startup: bool, brokers: int = 1) -> ScheduleRunLike: ...


class DialOutcome:
    """A handshaken session and how long / how many attempts it took."""

    def __init__(self, slot: Slot, attempt: int, elapsed: float) -> None:
        self.slot = slot
        self.attempt = attempt
        self.elapsed = elapsed


class Dialer:
    """Runs reconnect runs for one connection (only ever on the reconnect loop's thread)."""

    def __init__(
        self,
        *,
        connector: Connector,
        pool: BrokerPool,
        planner: Callable[[], list[BrokerAddress]],
        schedule: ScheduleLike,
        clock: Clock,
        connect_timeout: float,
        stop: threading.Event,
        emit: Callable[[Event], None],
        new_slot: Callable[[BrokerAddress], Slot],
        events: SlotEvents,
        redirects: Callable[[], BrokerAddress | None] = lambda: None,
        changed: threading.Event | None = None,
    ) -> None:
        self._connector = connector
        self._pool = pool
        self._planner = planner
        self._schedule = schedule
        self._clock = clock
        self._connect_timeout = connect_timeout
        self._stop = stop
        self._emit = emit
        self._new_slot = new_slot
        self._events = events
        self._redirects = redirects
        # Set when the pool changes (and on close): a delay waits on it, so a broker that
        # joined during a back-off is tried at once. Without it the delay waits on ``stop``.
        self._changed = changed
        self.last_causes: tuple[tuple[str, BaseException], ...] = ()
        """(broker, last error) of the latest run, for the GaveUp event."""
        self._cancel_lock = threading.Lock()
        self._cancelled = False
        self._token: Cancel | None = None
        """The token of the connect in progress (any thread may cancel it)."""

    def cancel(self) -> None:
        """Cut the connect in progress short, and every later one (any thread; idempotent)."""
        with self._cancel_lock:
            self._cancelled = True
            token = self._token
        if token is not None:
            token.cancel()

    def open(self, address: BrokerAddress) -> Slot:
        """Connect and handshake ``address`` once; record the outcome in the pool.

        Raises :class:`Interrupted` when :meth:`cancel` cut the connect short.
        """
        slot = self._new_slot(address)
        token = self._begin()
        try:
            session = self._connect(address, slot, token)
        except ConnectionFailure as exc:
            slot.alive = False
            if token.cancelled:
                raise Interrupted from exc
            self._pool.record_failure(address, exc, self._clock.monotonic())
            raise
        except ConfigurationError:
            # The user's setting, not this broker: no retry can mend it, so it ends the run
            # (connect() raises it) instead of counting as a broker failure.
            slot.alive = False
            raise
        except Exception as exc:
            slot.alive = False
            if token.cancelled:
                raise Interrupted from exc
            # An adapter should map its library's errors; one that leaks through still only
            # means this broker failed, not that the reconnect loop must die.
            error = BrokerUnavailable(f"adapter error {type(exc).__name__}", broker=str(address))
            self._pool.record_failure(address, error, self._clock.monotonic())
            raise error from exc
        finally:
            with self._cancel_lock:
                if self._token is token:
                    self._token = None
        if token.cancelled:
            # The handshake won the race with close(): nobody will use this session.
            slot.alive = False
            session.close()
            raise Interrupted
        slot.session = session
        self._pool.record_success(address)
        return slot

    def _begin(self) -> Cancel:
        """A fresh token for the next connect, already cancelled once :meth:`cancel` ran."""
        token = Cancel()
        with self._cancel_lock:
            self._token = token
            cancelled = self._cancelled
        if cancelled:
            token.cancel()
        return token

    def _connect(self, address: BrokerAddress, slot: Slot, token: Cancel) -> Session:
        listener = SlotListener(self._events, slot)
        return self._connector.connect(
            address, timeout=self._connect_timeout, listener=listener, cancel=token
        )

    def lost(self, slot: Slot) -> None:
        """A session in use died: count it as a failure, so the next plan tries it last.

        A hung broker (SIGSTOP) still accepts TCP through its backlog; trying it first again
        would spend a whole connect timeout before reaching a healthy broker. ActiveMQ Classic
        moves a failed URI to the end of its list for the same reason.
        """
        cause = slot.cause or BrokerUnavailable("connection lost", broker=str(slot.address))
        self._pool.record_failure(slot.address, cause, self._clock.monotonic())

    def dial(self, *, startup: bool) -> DialOutcome:
        """Run until a broker handshakes; raises AllBrokersFailed, the fatal error, Interrupted."""
        started = self._clock.monotonic()
        self._await_brokers()
        # The pool's size, not a plan: building a plan would advance a round-robin policy.
        brokers = max(1, len(self._pool.states()))
        run = self._schedule.start(startup=startup, brokers=brokers)
        causes: dict[str, BaseException] = {}
        struck: set[str] = set()
        fatal: ConnectionFailure | None = None
        remaining: list[BrokerAddress] = []  # rest of the current pass (unit "broker")
        self.last_causes = ()
        while True:
            self.last_causes = tuple(causes.items())
            delay = run.next_delay()
            if delay is None:
                raise AllBrokersFailed(
                    f"gave up after {run.attempts} reconnect attempt(s) ({run.unit})", causes
                )
            if self._stop.is_set() or (delay > 0 and self._wait(delay)):
                raise Interrupted
            if run.unit == "pass" or not remaining:
                remaining = [a for a in self._planner() if a.key not in struck]
            tries = remaining if run.unit == "pass" else remaining[:1]
            remaining = [] if run.unit == "pass" else remaining[1:]
            if not tries:
                self._await_brokers()  # nobody to try (yet): an attempt, but never a spin
            for index, address in enumerate(tries):
                if self._stop.is_set():
                    raise Interrupted
                self._emit(
                    ReconnectAttempt(str(address), run.attempts, delay if index == 0 else 0.0)
                )
                slot = self._try(address, causes, struck)
                if slot is None and not isinstance(causes.get(str(address)), _FATAL):
                    slot = self._hop(run.attempts, causes, struck)
                if slot is not None:
                    return DialOutcome(slot, run.attempts, self._clock.monotonic() - started)
                if isinstance(error := causes.get(str(address)), _FATAL):
                    fatal = fatal or error
            if fatal is not None and not remaining:
                self.last_causes = tuple(causes.items())
                raise fatal
            if run.should_warn():
                _log.warning(
                    "reconnect attempt %d failed: %s",
                    run.attempts,
                    "; ".join(f"{b}: {type(e).__name__}" for b, e in causes.items()),
                )
                self._emit(ReconnectWarning(run.attempts, _pairs(causes)))

    def _wait(self, delay: float) -> bool:
        """Wait out a delay; True when the connection is stopping."""
        if self._changed is None:
            return self._clock.wait(self._stop, delay)
        self._changed.clear()  # the plan is made after the wait: an earlier change is in it
        if self._stop.is_set():
            return True
        self._clock.wait(self._changed, delay)
        return self._stop.is_set()

    def _await_brokers(self) -> None:
        """A pool that is empty (its brokers come from a source): wait for a list, up to one
        connect timeout, so the schedule does not count attempts against nobody at once."""
        if self._pool.states():
            return
        if self._changed is None:
            self._clock.wait(self._stop, self._connect_timeout)
            return
        deadline = self._clock.monotonic() + self._connect_timeout
        while not self._pool.states() and not self._stop.is_set():
            left = deadline - self._clock.monotonic()
            if left <= 0:
                return
            self._changed.clear()
            if not self._pool.states():
                self._clock.wait(self._changed, left)

    def _try(
        self, address: BrokerAddress, causes: dict[str, BaseException], struck: set[str]
    ) -> Slot | None:
        """Open ``address``; on failure note the cause (a fatal one strikes the broker)."""
        try:
            return self.open(address)
        except (AuthenticationFailed, TLSFailure) as exc:
            causes[str(address)] = exc
            struck.add(address.key)
        except ConnectionFailure as exc:
            causes[str(address)] = exc
        return None

    def _hop(self, attempt: int, causes: dict[str, BaseException], struck: set[str]) -> Slot | None:
        """Follow the redirects the failed broker (and each target) asked for, at once.

        A hop is part of the attempt that was redirected: no delay, not counted by the
        schedule. How many are followed in a row is bounded where they are offered.
        """
        while (target := self._redirects()) is not None and target.key not in struck:
            if self._stop.is_set():
                raise Interrupted
            self._emit(ReconnectAttempt(str(target), attempt, 0.0))
            slot = self._try(target, causes, struck)
            if slot is not None:
                return slot
        return None


_FATAL = (AuthenticationFailed, TLSFailure)


def _pairs(causes: dict[str, BaseException]) -> tuple[tuple[str, BaseException], ...]:
    return tuple(causes.items())
