"""A scripted group of fake brokers: :class:`FakeConnector`.

Per broker, a list of behaviours for successive connects (accept, refuse, auth-fail, tls-fail,
protocol-error, hang, block); the sessions it opens (:class:`FakeSession`) record sends,
confirm them automatically or on command, deliver messages, advertise brokers and can be
killed to simulate a lost broker. Connects honour the ``cancel`` token as a real adapter
does: a cancelled one raises ConnectCancelled.

Typical use::

    clock = FakeClock(autojump=True)                 # back-offs pass by themselves
    connector = FakeConnector(clock=clock)
    connector.behave("a:61613", "refuse")            # a is down for good
    conn = FailoverConnection(uri, connector=connector, clock=clock)
    conn.connect()                                   # lands on the next broker
    connector.session("b:61613").kill()              # b dies: the manager fails over

With a plain ``FakeClock()`` the test moves time itself (``clock.advance``); a ``connect()``
that waits for a reconnect delay nobody advances raises ``ClockStalled`` instead of hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from failover_client._clock import Clock, SystemClock
from failover_client._errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConnectCancelled,
    ProtocolViolation,
    TLSFailure,
)
from failover_client.adapter import Cancel, SessionListener
from failover_client.net._settings import ConnectorSettings
from failover_client.testing._clock import SAFETY_TIMEOUT
from failover_client.testing._session import FakeSession
from failover_client.uri import BrokerAddress

__all__ = ["Behaviour", "FakeConnector"]

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


@dataclass
class _Script:
    steps: list[Behaviour] = field(default_factory=lambda: ["accept"])


class FakeConnector:
    """A scripted group of brokers implementing the :class:`~failover_client.Connector` protocol.

    Every broker accepts unless scripted with :meth:`behave`. ``clock`` must be the connection's
    clock so a ``hang`` lasts the connect timeout in the same (virtual) time. ``cancelled``
    lists the broker keys of connects that ended because their token was cancelled.

    ``settings`` are checked as every real adapter checks them (heart-beats, close timeout, TLS
    files: :class:`ConfigurationError` here, at construction), and a TLS member gets the TLS
    context a real adapter would build, so a test with the fake meets the same configuration
    errors as production does. Credentials for a member come from
    :meth:`ConnectorSettings.credentials_for`, as in the real adapters.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        auto_confirm: bool = True,
        refused_destinations: Iterable[str] = (),
        settings: ConnectorSettings | None = None,
        flow_control: bool = True,
        products: Mapping[str, str] | None = None,
    ) -> None:
        self.products: dict[str, str] = dict(products or {})
        """What each broker (``host:port``) calls itself in its handshake (``Session.product``;
        e.g. ``ActiveMQ-Artemis/2.31.2``); a broker not named here sends no name."""
        self.flow_control = flow_control
        """Sessions keep each subscription's prefetch window (False: a broker that ignores it)."""
        self.settings = settings if settings is not None else ConnectorSettings()
        self._clock: Clock = clock or SystemClock()
        self.auto_confirm = auto_confirm
        self.refused_destinations = frozenset(refused_destinations)
        """Destinations every broker refuses a subscription to, by name (a bad selector's way)."""
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
        cancel: Cancel,
    ) -> FakeSession:
        with self._lock:
            script = self._scripts.setdefault(address.key, _Script())
            step = script.steps.pop(0) if len(script.steps) > 1 else script.steps[0]
            self.attempts.append((address.key, self._clock.monotonic()))
            self._changed.notify_all()
        broker = str(address)
        if cancel.cancelled:
            self._cancelled(address, "before it started")
        if address.tls:
            self.settings.tls_context()  # what a real adapter would build (or refuse)
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
            if cancel.cancelled:
                self._cancelled(address, "during the handshake")
            if not released:
                raise BrokerUnavailable(
                    f"handshake did not finish within {timeout:g}s", broker=broker
                )
        session = FakeSession(
            address,
            listener,
            auto_confirm=self.auto_confirm,
            notify=self._notify,
            refused_destinations=self.refused_destinations,
            flow_control=self.flow_control,
            product=self.products.get(address.key),
        )
        with self._lock:
            self.sessions.append(session)
            self._changed.notify_all()
        return session

    def _hang(self, timeout: float | None, cancel: Cancel) -> bool:
        """Wait (clock time) for a release, a cancel or ``timeout``; True when released."""
        woken = threading.Event()
        with self._lock:
            self._hanging.add(woken)
            if self._release.is_set():
                woken.set()
        remove = cancel.add_callback(woken.set)
        try:
            self._clock.wait(woken, timeout)
        finally:
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

    def wait_for_attempts(self, count: int, timeout: float = SAFETY_TIMEOUT) -> bool:
        """Block until at least ``count`` connects were attempted."""
        return self.wait_until(lambda: len(self.attempts) >= count, timeout)

    def wait_for_sessions(self, count: int, timeout: float = SAFETY_TIMEOUT) -> bool:
        """Block until at least ``count`` sessions were opened in total."""
        return self.wait_until(lambda: len(self.sessions) >= count, timeout)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = SAFETY_TIMEOUT) -> bool:
        """Block until ``predicate()`` (re-checked on every session or connect change)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def __repr__(self) -> str:
        with self._lock:
            return f"<FakeConnector attempts={len(self.attempts)} sessions={len(self.sessions)}>"
