"""Test doubles shipped with the library, so applications can test their own failover handling.

* :class:`FakeClock`: virtual time. ``wait(event, timeout)`` blocks the calling (background)
  thread until the event is set or *virtual* time reaches the deadline; the test moves time with
  :meth:`FakeClock.advance`. Nothing sleeps, so a 30-second back-off takes no real time and the
  outcome never depends on scheduling luck.
* :class:`FakeConnector` / :class:`FakeSession`: a scripted broker group. Per broker, a list of
  behaviours for successive connects (accept, refuse, auth-fail, tls-fail, protocol-error, hang,
  block); sessions record sends, confirm them automatically or on command, deliver messages to
  subscriptions and can be killed to simulate a lost broker. Connects honour the ``cancel``
  token the manager passes, as a real adapter does: a cancelled one raises ConnectCancelled.
* :class:`EventRecorder`: a listener that records events and lets a test wait for one.

Typical use::

    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave("a:61613", "refuse")            # a is down for good
    conn = FailoverConnection(uri, connector=connector, clock=clock)
    conn.connect()                                   # lands on the next broker
    connector.session("b:61613").kill()              # b dies: the manager fails over

The helpers that wait for a background thread (``wait_for_*``) use *real* timeouts only as a
safety net against a hung test; they return as soon as the condition holds.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NoReturn, TypeVar

from failover_client._clock import Clock, SystemClock
from failover_client._errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConnectCancelled,
    ProtocolViolation,
    SendRejected,
    TLSFailure,
)
from failover_client._events import Event
from failover_client.adapter import (
    Cancel,
    ConfirmCallback,
    Received,
    SessionListener,
    SubscriptionSpec,
)
from failover_client.uri import BrokerAddress

__all__ = [
    "Behaviour",
    "EventRecorder",
    "FakeClock",
    "FakeConnector",
    "FakeSession",
    "SentMessage",
]

_E = TypeVar("_E")

Behaviour = Literal["accept", "refuse", "auth-fail", "tls-fail", "protocol-error", "hang", "block"]
"""What one connect does. ``hang``: the handshake never answers, so the connect fails after
its timeout (virtual time). ``block``: the connect blocks with no timeout at all (an adapter
stuck below its deadline). Both end early as ``accept`` after :meth:`FakeConnector.release_hangs`
and with ConnectCancelled when the connect's ``cancel`` token is cancelled."""
_BEHAVIOURS: tuple[Behaviour, ...] = (
    "accept",
    "refuse",
    "auth-fail",
    "tls-fail",
    "protocol-error",
    "hang",
    "block",
)

_SAFETY_TIMEOUT = 5.0


# --- virtual time ---------------------------------------------------------------------------


@dataclass(eq=False)
class _Waiter:
    deadline: float
    event: threading.Event


def _event_condition(event: threading.Event) -> threading.Condition | None:
    # CPython's Event is a flag guarded by a Condition; waiting on that Condition (and notifying
    # it when virtual time passes a deadline) wakes the waiter exactly when either happens, with
    # no polling. Other implementations fall back to short real-time slices.
    cond = getattr(event, "_cond", None)
    return cond if isinstance(cond, threading.Condition) else None


class FakeClock:
    """A :class:`~failover_client.Clock` whose time moves only when the test says so.

    ``autojump=True`` makes every timed wait jump virtual time straight to its deadline (when the
    event is not set): handy to run a whole back-off schedule instantly when only one thread
    waits on time.
    """

    def __init__(self, start: float = 0.0, *, autojump: bool = False) -> None:
        self._now = start
        self._autojump = autojump
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters: set[_Waiter] = set()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward and wake every waiter whose deadline has passed."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance({seconds}))")
        with self._lock:
            self._now += seconds
            due = [w for w in self._waiters if w.deadline <= self._now]
            self._changed.notify_all()
        self._wake(due)

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or virtual time reaches now + ``timeout``."""
        with self._lock:
            deadline = math.inf if timeout is None else self._now + max(timeout, 0.0)
            if self._autojump and deadline != math.inf and not event.is_set():
                self._now = max(self._now, deadline)
            waiter = _Waiter(deadline, event)
            self._waiters.add(waiter)
            due = [w for w in self._waiters if w.deadline <= self._now and w is not waiter]
            self._changed.notify_all()
        self._wake(due)
        try:
            return self._block(waiter)
        finally:
            with self._lock:
                self._waiters.discard(waiter)
                self._changed.notify_all()

    def _block(self, waiter: _Waiter) -> bool:
        event = waiter.event
        cond = _event_condition(event)
        if cond is None:  # pragma: no cover - CPython always has the condition
            while not event.wait(0.001):
                if self.monotonic() >= waiter.deadline:
                    return event.is_set()
            return True
        with cond:
            while not event.is_set():
                if self.monotonic() >= waiter.deadline:
                    return False
                cond.wait()
            return True

    @staticmethod
    def _wake(waiters: list[_Waiter]) -> None:
        for waiter in waiters:
            cond = _event_condition(waiter.event)
            if cond is not None:
                with cond:
                    cond.notify_all()

    def waiters(self) -> int:
        """How many threads are blocked in :meth:`wait` right now (timed or not)."""
        with self._lock:
            return len(self._waiters)

    def deadlines(self) -> list[float]:
        """The finite deadlines of the blocked waiters, earliest first."""
        with self._lock:
            return sorted(w.deadline for w in self._waiters if w.deadline != math.inf)

    def wait_for_waiters(
        self,
        count: int = 1,
        *,
        timed: bool = False,
        timeout: float = _SAFETY_TIMEOUT,
    ) -> bool:
        """Block (real time, at most ``timeout``) until ``count`` threads wait on this clock.

        ``timed=True`` counts only waiters with a finite deadline.
        """

        def enough() -> bool:
            if timed:
                return sum(w.deadline != math.inf for w in self._waiters) >= count
            return len(self._waiters) >= count

        with self._changed:
            return self._changed.wait_for(enough, timeout)

    def __repr__(self) -> str:
        return f"FakeClock(now={self.monotonic():g}, waiters={self.waiters()})"


# --- scripted brokers -----------------------------------------------------------------------


@dataclass
class SentMessage:
    """One message a :class:`FakeSession` received from the client."""

    destination: str
    body: bytes
    headers: dict[str, str]
    on_confirm: ConfirmCallback | None
    state: Literal["unconfirmed", "confirmed", "rejected", "untracked"] = "unconfirmed"

    @property
    def message_id(self) -> str | None:
        return self.headers.get("failover-message-id")


class FakeSession:
    """A handshaken fake session. Test-side methods run the listener on the calling thread."""

    def __init__(
        self,
        connector: FakeConnector,
        address: BrokerAddress,
        listener: SessionListener,
        *,
        auto_confirm: bool,
    ) -> None:
        self._connector = connector
        self._address = address
        self.listener = listener
        self.auto_confirm = auto_confirm
        self._lock = threading.Lock()
        self.sent: list[SentMessage] = []
        self.subscriptions: dict[str, SubscriptionSpec] = {}
        self.unsubscribed: list[str] = []
        self.acks: list[Received] = []
        self.nacks: list[Received] = []
        self.alive = True
        self.closed = False
        self._tags = itertools.count(1)

    @property
    def address(self) -> BrokerAddress:
        return self._address

    # --- the Session protocol (called by the manager) ---------------------------------------

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        with self._lock:
            self._check_alive()
            message = SentMessage(
                destination,
                body,
                dict(headers),
                on_confirm,
                "unconfirmed" if on_confirm is not None else "untracked",
            )
            self.sent.append(message)
            confirm_now = self.auto_confirm and on_confirm is not None
            if confirm_now:
                message.state = "confirmed"
        self._connector._notify()
        if confirm_now and on_confirm is not None:
            on_confirm(None)

    def subscribe(self, spec: SubscriptionSpec) -> None:
        with self._lock:
            self._check_alive()
            self.subscriptions[spec.id] = spec
        self._connector._notify()

    def unsubscribe(self, subscription_id: str) -> None:
        with self._lock:
            self._check_alive()
            self.subscriptions.pop(subscription_id, None)
            self.unsubscribed.append(subscription_id)

    def ack(self, message: Received) -> None:
        with self._lock:
            self._check_alive()
            self.acks.append(message)
        self._connector._notify()

    def nack(self, message: Received) -> None:
        with self._lock:
            self._check_alive()
            self.nacks.append(message)
        self._connector._notify()

    def close(self) -> None:
        with self._lock:
            self.alive = False
            self.closed = True
        self._connector._notify()

    def _check_alive(self) -> None:
        if not self.alive:
            raise BrokerUnavailable("session is closed", broker=str(self._address))

    # --- the test's side ----------------------------------------------------------------------

    def unconfirmed(self) -> list[SentMessage]:
        with self._lock:
            return [m for m in self.sent if m.state == "unconfirmed"]

    def message_ids(self) -> list[str | None]:
        """The ``failover-message-id`` of every message received, in order."""
        with self._lock:
            return [m.message_id for m in self.sent]

    def confirm(self, count: int | None = None) -> int:
        """Confirm the ``count`` oldest unconfirmed sends (all when None); returns how many."""
        return self._settle(count, None)

    def reject(self, count: int = 1, reason: str = "rejected by broker") -> int:
        """Answer the ``count`` oldest unconfirmed sends with :class:`SendRejected`."""
        return self._settle(count, reason)

    def _settle(self, count: int | None, reason: str | None) -> int:
        with self._lock:
            pending = [m for m in self.sent if m.state == "unconfirmed"]
            chosen = pending if count is None else pending[:count]
            for message in chosen:
                message.state = "confirmed" if reason is None else "rejected"
        for message in chosen:
            if message.on_confirm is None:
                continue
            error = None if reason is None else SendRejected(reason, message_id=message.message_id)
            message.on_confirm(error)
        return len(chosen)

    def deliver(
        self,
        subscription_id: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        message_id: str | None = None,
        redelivered: bool = False,
        destination: str | None = None,
    ) -> Received:
        """Deliver a message to a subscription of this session (on the calling thread)."""
        with self._lock:
            spec = self.subscriptions.get(subscription_id)
            if spec is None:
                raise KeyError(f"no subscription {subscription_id!r} on {self._address}")
            received = Received(
                subscription_id=subscription_id,
                destination=destination or spec.destination,
                body=body,
                headers=dict(headers or {}),
                message_id=message_id,
                ack_id=f"{self._address.key}/{next(self._tags)}",
                redelivered=redelivered,
            )
        self.listener.on_message(self, received)
        return received

    def kill(self, cause: BaseException | None = None) -> None:
        """Simulate losing the broker: the session dies and the listener hears ``on_lost``."""
        with self._lock:
            if not self.alive:
                return
            self.alive = False
        self._connector._notify()
        self.listener.on_lost(
            self, cause or BrokerUnavailable("connection lost", broker=str(self._address))
        )

    def __repr__(self) -> str:
        state = "alive" if self.alive else ("closed" if self.closed else "dead")
        return f"<FakeSession {self._address} {state} sent={len(self.sent)}>"


@dataclass
class _Script:
    steps: list[Behaviour] = field(default_factory=lambda: ["accept"])


class FakeConnector:
    """A scripted group of brokers implementing the :class:`~failover_client.Connector` protocol.

    Every broker accepts unless scripted with :meth:`behave`. ``clock`` must be the connection's
    clock so a ``hang`` lasts the connect timeout in the same (virtual) time. ``cancelled``
    lists the broker keys of connects that ended because their token was cancelled.
    """

    def __init__(self, *, clock: Clock | None = None, auto_confirm: bool = True) -> None:
        self._clock: Clock = clock or SystemClock()
        self.auto_confirm = auto_confirm
        # Reentrant: wait_until predicates may call session() / attempted() under the lock.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._scripts: dict[str, _Script] = {}
        self._release = threading.Event()
        self._hanging: set[threading.Event] = set()
        self.attempts: list[tuple[str, float]] = []
        """(broker key, clock time) of every connect call, in order."""
        self.cancelled: list[str] = []
        """Broker keys of connects that ended with ConnectCancelled, in order."""
        self.sessions: list[FakeSession] = []

    def behave(self, broker: str | BrokerAddress, *steps: Behaviour) -> None:
        """Script the next connects to ``broker`` (``host:port``); the last step repeats."""
        if not steps:
            raise ValueError("behave() needs at least one behaviour")
        for step in steps:
            if step not in _BEHAVIOURS:
                raise ValueError(f"unknown behaviour {step!r}; known: {', '.join(_BEHAVIOURS)}")
        key = broker.key if isinstance(broker, BrokerAddress) else broker
        with self._lock:
            self._scripts[key] = _Script(list(steps))

    def release_hangs(self) -> None:
        """Let every hanging or blocked handshake (now and later) complete as ``accept``."""
        with self._lock:
            self._release.set()
            for woken in self._hanging:
                woken.set()

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel | None = None,
    ) -> FakeSession:
        with self._lock:
            script = self._scripts.setdefault(address.key, _Script())
            step = script.steps.pop(0) if len(script.steps) > 1 else script.steps[0]
            self.attempts.append((address.key, self._clock.monotonic()))
            self._changed.notify_all()
        broker = str(address)
        if cancel is not None and cancel.cancelled:
            self._cancelled(address, "before it started")
        if step == "refuse":
            raise BrokerUnavailable("connection refused", broker=broker)
        if step == "auth-fail":
            raise AuthenticationFailed("credentials refused", broker=broker)
        if step == "tls-fail":
            raise TLSFailure("certificate verify failed", broker=broker)
        if step == "protocol-error":
            raise ProtocolViolation("unexpected frame during handshake", broker=broker)
        if step in ("hang", "block"):
            released = self._hang(timeout if step == "hang" else None, cancel)
            if cancel is not None and cancel.cancelled:
                self._cancelled(address, "during the handshake")
            if not released:
                raise BrokerUnavailable(
                    f"handshake did not finish within {timeout:g}s", broker=broker
                )
        session = FakeSession(self, address, listener, auto_confirm=self.auto_confirm)
        with self._lock:
            self.sessions.append(session)
            self._changed.notify_all()
        return session

    def _hang(self, timeout: float | None, cancel: Cancel | None) -> bool:
        """Wait (clock time) for a release, a cancel or ``timeout``; True when released."""
        woken = threading.Event()
        with self._lock:
            self._hanging.add(woken)
            if self._release.is_set():
                woken.set()
        remove = cancel.add_callback(woken.set) if cancel is not None else None
        try:
            self._clock.wait(woken, timeout)
        finally:
            if remove is not None:
                remove()
            with self._lock:
                self._hanging.discard(woken)
        return self._release.is_set()

    def _cancelled(self, address: BrokerAddress, when: str) -> NoReturn:
        with self._lock:
            self.cancelled.append(address.key)
            self._changed.notify_all()
        raise ConnectCancelled(f"connect cancelled {when}", broker=str(address))

    # --- the test's side ----------------------------------------------------------------------

    def attempted(self) -> list[str]:
        """Broker keys of every connect call, in order."""
        with self._lock:
            return [key for key, _ in self.attempts]

    def session(self, broker: str | BrokerAddress) -> FakeSession:
        """The newest session opened to ``broker``."""
        key = broker.key if isinstance(broker, BrokerAddress) else broker
        with self._lock:
            for session in reversed(self.sessions):
                if session.address.key == key:
                    return session
        raise KeyError(f"no session was opened to {key}")

    def live_sessions(self) -> list[FakeSession]:
        with self._lock:
            return [s for s in self.sessions if s.alive]

    def wait_for_attempts(self, count: int, timeout: float = _SAFETY_TIMEOUT) -> bool:
        """Block until at least ``count`` connects were attempted."""
        return self.wait_until(lambda: len(self.attempts) >= count, timeout)

    def wait_for_sessions(self, count: int, timeout: float = _SAFETY_TIMEOUT) -> bool:
        """Block until at least ``count`` sessions were opened in total."""
        return self.wait_until(lambda: len(self.sessions) >= count, timeout)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = _SAFETY_TIMEOUT) -> bool:
        """Block until ``predicate()`` (re-checked on every session or connect change)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def __repr__(self) -> str:
        with self._lock:
            return f"<FakeConnector attempts={len(self.attempts)} sessions={len(self.sessions)}>"


# --- events ---------------------------------------------------------------------------------


class EventRecorder:
    """A listener that keeps every event; ``wait_for`` blocks until one of a type arrives."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def of_type(self, kind: type[_E]) -> list[_E]:
        with self._changed:
            return [e for e in self.events if isinstance(e, kind)]

    def wait_for(self, kind: type[_E], count: int = 1, timeout: float = _SAFETY_TIMEOUT) -> _E:
        """The ``count``-th event of type ``kind``; raises AssertionError after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: sum(isinstance(e, kind) for e in self.events) >= count, timeout
            ):
                seen = [type(e).__name__ for e in self.events]
                raise AssertionError(f"no {kind.__name__} #{count} within {timeout}s; got {seen}")
            return [e for e in self.events if isinstance(e, kind)][count - 1]
