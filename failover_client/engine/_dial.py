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
from collections.abc import Callable, Generator
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
from failover_client._hosts import shown_list
from failover_client._throttle import LogThrottle
from failover_client.adapter import Cancel, Connector, Session
from failover_client.engine._dedup import may_drop_duplicates
from failover_client.engine._pool import BrokerPool
from failover_client.engine._slot import Slot, SlotEvents, SlotListener
from failover_client.engine._startup import StartupNotice, expired
from failover_client.uri import AttemptUnit, BrokerAddress

__all__ = ["DialOutcome", "Dialer", "Interrupted", "ScheduleLike", "ScheduleRunLike"]

_log = logging.getLogger("failover_client")

_SHOWN = 8
"""Brokers named in one reconnect warning; the event carries every cause."""


class Interrupted(Exception):
    """``close()`` interrupted the run."""


class ScheduleRunLike(Protocol):
    """The part of :class:`failover_client.engine._schedule.ScheduleRun` the dialer uses."""

    unit: AttemptUnit
    attempts: int

    def next_delay(self, *, elsewhere: bool = False) -> float | None: ...

    def should_warn(self) -> bool: ...


class ScheduleLike(Protocol):
    """The part of :class:`failover_client.engine._schedule.ReconnectSchedule` the dialer uses."""

    def start(self, *, startup: bool, brokers: int = 1) -> ScheduleRunLike: ...


class DialOutcome:
    """A handshaken session and how long / how many attempts it took."""

    __slots__ = ("attempt", "elapsed", "slot")

    def __init__(self, slot: Slot, attempt: int, elapsed: float) -> None:
        self.slot = slot
        self.attempt = attempt
        self.elapsed = elapsed


class Dialer:
    """Runs reconnect runs for one connection (only ever on the reconnect loop's thread)."""

    __slots__ = (
        "_cancel_lock",
        "_cancelled",
        "_causes",
        "_changed",
        "_clock",
        "_connect_timeout",
        "_connector",
        "_emit",
        "_events",
        "_first_list_wait",
        "_lost",
        "_new_slot",
        "_notice",
        "_planner",
        "_pool",
        "_redirects",
        "_run",
        "_run_deadline",
        "_schedule",
        "_stop",
        "_throttle",
        "_timeout",
        "_token",
        "deadline",
        "last_causes",
    )

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
        notice: bool = False,
        first_list_wait: float = 0.0,
    ) -> None:
        self._connector = connector
        # An Artemis udp:// client waits this long for the first broadcast before it connects.
        self._first_list_wait = first_list_wait
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
        self._run: ScheduleRunLike | None = None
        self._lost: BrokerAddress | None = None
        """The broker of the session lost last (None once a run connected elsewhere)."""
        """The latest run's schedule, for a run that resumes it."""
        self.last_causes: tuple[tuple[str, BaseException], ...] = ()
        """(broker, last error) of the latest run, for the GaveUp event."""
        self._throttle = LogThrottle(_log, clock=clock.monotonic)
        self._notice = StartupNotice(
            enabled=notice, clock=clock.monotonic, emit=emit, describe=describe
        )
        self.deadline: float | None = None
        """The start-up deadline (``connect(timeout=...)``), on the clock; the start-up run
        ends once it passed and cuts every connect to the time left (see :meth:`limit`)."""
        self._timeout = 0.0
        self._run_deadline: float | None = None
        """:attr:`deadline` while the start-up run is going, else None."""
        self._causes: dict[str, BaseException] = {}
        """The current run's causes so far (the deadline's error names them)."""
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
        slot.may_drop_duplicates = may_drop_duplicates(session.product)
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
        timeout = self._connect_timeout
        if self._run_deadline is not None:
            # A hung broker must not hold the caller past connect(timeout=...).
            left = self._run_deadline - self._clock.monotonic()
            timeout = min(timeout, max(left, _MIN_CONNECT_TIMEOUT))
        return self._connector.connect(address, timeout=timeout, listener=listener, cancel=token)

    def limit(self, timeout: float) -> None:
        """Give the start-up run ``timeout`` seconds from now (``connect(timeout=...)``)."""
        self._timeout = timeout
        self.deadline = self._clock.monotonic() + timeout

    def expired(self) -> ConnectionFailure:
        """The start-up deadline passed: the error naming every broker's cause."""
        brokers = (str(state.address) for state in self._pool.states())
        return expired(self._timeout, self._causes, brokers)

    def _past_deadline(self) -> bool:
        deadline = self._run_deadline
        return deadline is not None and self._clock.monotonic() >= deadline

    def lost(self, slot: Slot) -> None:
        """A session in use died: count it as a failure, so the next plan tries it last.

        A hung broker (SIGSTOP) still accepts TCP through its backlog; trying it first again
        would spend a whole connect timeout before reaching a healthy broker. ActiveMQ Classic
        moves a failed URI to the end of its list for the same reason.
        """
        cause = slot.cause or BrokerUnavailable("connection lost", broker=str(slot.address))
        self._pool.record_failure(slot.address, cause, self._clock.monotonic())
        self._lost = slot.address

    def _elsewhere(self) -> bool:
        """Whether the next plan starts with a broker other than the one just lost.

        So it is when that broker is quarantined (its loss put it there) and another one is
        live: a plan puts every live broker before the quarantined ones.
        """
        lost = self._lost
        if lost is None:
            return False
        live = [a for tier in self._pool.by_tier(self._clock.monotonic()) for a in tier]
        return bool(live) and all(a.key != lost.key for a in live)

    def pool_changed(self) -> bool:
        """Whether the pool changed since the run's current delay began (it cuts it short)."""
        return self._changed is not None and self._changed.is_set()

    def attempts(
        self, *, startup: bool, resume: bool = False
    ) -> Generator[float, None, DialOutcome]:
        """One reconnect run, as a generator of attempts.

        Yields the clock time the next attempt is due; the driver waits until then (or until
        :meth:`pool_changed`, or ``close()``) and resumes it to make the attempt. Returns the
        first handshaken session; raises AllBrokersFailed, the fatal error, or Interrupted.
        ``resume`` goes on with the previous run's schedule (its delays and its limit) instead
        of starting over: the session it found was no real success.
        """
        self._run_deadline = self.deadline if startup else None
        try:
            return (yield from self._attempts(startup=startup, resume=resume))
        finally:
            self._run_deadline = None

    def _attempts(self, *, startup: bool, resume: bool) -> Generator[float, None, DialOutcome]:
        started = self._clock.monotonic()
        yield from self._await_brokers(self._first_list_wait if startup else 0.0)
        run = self._start(startup=startup, resume=resume)
        causes: dict[str, BaseException] = {}
        self._causes = causes
        struck: set[str] = set()
        fatal: ConnectionFailure | None = None
        remaining: list[BrokerAddress] = []  # rest of the current pass (unit "broker")
        self.last_causes = ()
        # After a loss the first attempt goes at once when it tries another broker: the
        # schedule's first delay is for retrying the broker that just failed.
        elsewhere = not startup and not resume and self._elsewhere()
        while True:
            self.last_causes = tuple(causes.items())
            delay = run.next_delay(elsewhere=elsewhere)
            elsewhere = False
            if delay is None:
                raise AllBrokersFailed(
                    f"gave up after {run.attempts} reconnect attempt(s) ({run.unit})", causes
                )
            # A change since the last plan was made (a broker that joined while the client
            # lost its own, or during the back-off) cuts the delay short.
            yield self._clock.monotonic() + delay
            if self._stop.is_set():
                raise Interrupted
            if run.unit == "pass" or not remaining:
                self._clear_changed()  # the plan made now has every change so far
                remaining = [a for a in self._planner() if a.key not in struck]
            tries = remaining if run.unit == "pass" else remaining[:1]
            remaining = [] if run.unit == "pass" else remaining[1:]
            if not tries:
                yield from self._await_brokers()  # nobody to try (yet): never a spin
            for index, address in enumerate(tries):
                if self._stop.is_set():
                    raise Interrupted
                if self._past_deadline():
                    break  # the driver's next decision ends the run (Expire)
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
            self._failed(run, causes, startup=startup, whole_pass=not remaining)

    def _failed(
        self,
        run: ScheduleRunLike,
        causes: dict[str, BaseException],
        *,
        startup: bool,
        whole_pass: bool,
    ) -> None:
        """An attempt found no broker: the schedule's warning, and the start-up notice."""
        warned = run.should_warn()
        if warned:
            self._warn(run.attempts, causes)
        if startup and whole_pass and not self._past_deadline():
            self._notice.pass_failed(run.attempts, causes, warned=warned)

    def _start(self, *, startup: bool, resume: bool) -> ScheduleRunLike:
        if resume and self._run is not None:
            # What the bouncing brokers pushed (each names the other, which releases it from
            # quarantine) must not cut the delay short: that delay is the point.
            self._clear_changed()
            return self._run
        # The pool's size, not a plan: building a plan would advance a round-robin policy.
        brokers = max(1, len(self._pool.states()))
        self._run = self._schedule.start(startup=startup, brokers=brokers)
        return self._run

    def _clear_changed(self) -> None:
        if self._changed is not None:
            self._changed.clear()

    def _await_brokers(self, longest: float = 0.0) -> Generator[float, None, None]:
        """A pool that is empty (its brokers come from a source): wait for a list, up to one
        connect timeout (or ``longest``, if longer), so the schedule does not count attempts
        against nobody at once."""
        if self._pool.states():
            return
        deadline = self._clock.monotonic() + max(self._connect_timeout, longest)
        while not self._pool.states() and not self._stop.is_set():
            if self._clock.monotonic() >= deadline:
                return
            self._clear_changed()
            if not self._pool.states():
                yield deadline

    def _warn(self, attempt: int, causes: dict[str, BaseException]) -> None:
        """Log that an attempt failed, with every broker's cause; the same line again only
        once per throttle window, with a count (a dead group must not flood the log)."""
        # Bounded: a pool of hundreds of pushed brokers must not make one line of 100 KB.
        reasons = shown_list(
            (describe(broker, error) for broker, error in causes.items()), _SHOWN, sep="; "
        )
        if not causes:  # an empty pool: its brokers come from a source that named none yet
            reasons = "no broker known yet (waiting for a topology source to name one)"
        self._throttle.log(
            logging.WARNING, reasons, "reconnect attempt %d failed: %s", attempt, reasons
        )
        self._emit(ReconnectWarning(attempt, _pairs(causes)))

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

_MIN_CONNECT_TIMEOUT = 0.05
"""A connect made just before the start-up deadline still gets this long: a zero timeout
would fail it before the first byte, and the deadline's check comes right after."""


def describe(broker: str, error: BaseException) -> str:
    """``broker: message (Type)``, then each cause the error was raised from: the line must
    say *why* ("connection refused", "cannot resolve host"), not only which class failed."""
    message = str(error) or type(error).__name__
    text = message if message.startswith(broker) else f"{broker}: {message}"
    text = f"{text} ({type(error).__name__})"
    seen = {id(error)}
    cause = _cause_of(error)
    while cause is not None and id(cause) not in seen and len(seen) <= _MAX_CAUSES:
        seen.add(id(cause))
        detail = str(cause)
        if detail and detail not in text:
            text = f"{text}, caused by {type(cause).__name__}: {detail}"
        cause = _cause_of(cause)
    return text


_MAX_CAUSES = 3
"""Causes named at most per broker: a chain is short; a longer one adds nothing to read."""


def _cause_of(error: BaseException) -> BaseException | None:
    if error.__cause__ is not None:
        return error.__cause__
    return None if error.__suppress_context__ else error.__context__


def _pairs(causes: dict[str, BaseException]) -> tuple[tuple[str, BaseException], ...]:
    return tuple(causes.items())
