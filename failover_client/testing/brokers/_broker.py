"""The interface every broker offers a test, whatever runs it (local process or container).

Lifecycle: ``launch()`` starts without waiting and ``wait_ready()`` waits for the protocol to
answer, so a cluster can launch all its brokers first and then wait for them together;
``start()`` is both. ``kill()`` is SIGKILL (connections drop with a RST), ``hang()`` is
SIGSTOP (connections stay open and go silent: no RST, no FIN), ``resume()`` is SIGCONT,
``stop()`` is a graceful shutdown, ``restart()`` a stop (if running) and a start. A broker
always comes back on the same ports with the same data directory, so persistent messages
survive a kill.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from pathlib import Path

from ._amqp_client import amqp_drain, amqp_send
from ._errors import BrokerError
from ._model import BrokerKind, Endpoint, ReceivedMessage
from ._process import log_tail
from ._stomp_client import StompClient

__all__ = ["Broker"]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


class Broker(abc.ABC):
    """One broker of a cluster."""

    kind: BrokerKind
    #: login / passcode that the broker accepts from the raw clients and from tests
    credentials: tuple[str, str] | None = None
    #: the STOMP ``host`` header (RabbitMQ's virtual host)
    vhost: str | None = None
    #: AMQP terminus capabilities that make ``/queue/...`` addresses queues on this broker
    amqp_queue_capabilities: tuple[str, ...] = ()

    def __init__(self, name: str, endpoints: Mapping[str, Endpoint]) -> None:
        self.name = name
        self.endpoints: dict[str, Endpoint] = dict(endpoints)
        self.hung = False

    # -- lifecycle -------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """Pid of the broker's process (host pid of a container's init), None when down."""

    @property
    @abc.abstractmethod
    def log_path(self) -> Path:
        """File holding the broker's log (for a container: written when asked for)."""

    @abc.abstractmethod
    def running(self) -> bool:
        """The process / container exists (it may be hung)."""

    @abc.abstractmethod
    def launch(self) -> None:
        """Start the broker without waiting for it to be ready."""

    @abc.abstractmethod
    def probe(self, timeout: float = 1.0) -> bool:
        """One protocol handshake: True when the broker answers now."""

    @abc.abstractmethod
    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Return when the broker answers its protocols; raise BrokerStartError otherwise."""

    @abc.abstractmethod
    def _signal_kill(self) -> None: ...

    @abc.abstractmethod
    def _signal_stop(self) -> None: ...

    @abc.abstractmethod
    def _signal_cont(self) -> None: ...

    @abc.abstractmethod
    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Graceful shutdown; raises BrokerStopError if it had to be killed after ``timeout``."""

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Launch and wait until the protocols answer."""
        self.launch()
        self.wait_ready(timeout)

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        """Stop gracefully if running (resuming a hung broker first), then start."""
        if self.running():
            self.stop()
        self.start(timeout)

    def kill(self) -> None:
        """SIGKILL: the broker vanishes at once; returns when its ports refuse."""
        self._signal_kill()
        self.hung = False

    def hang(self) -> None:
        """SIGSTOP: open connections stay up but get no data (no RST, no FIN)."""
        if not self.running():
            raise BrokerError(f"{self.name} is not running; cannot hang it")
        self._signal_stop()
        self.hung = True

    def resume(self) -> None:
        """SIGCONT after ``hang()``."""
        self._signal_cont()
        self.hung = False

    def is_up(self, timeout: float = 1.0) -> bool:
        """Running, not hung, and answering its protocol right now."""
        return self.running() and not self.hung and self.probe(timeout)

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)

    # -- endpoints -------------------------------------------------------------------------

    def endpoint(self, name: str = "stomp") -> Endpoint:
        try:
            return self.endpoints[name]
        except KeyError:
            raise KeyError(
                f"{self.name} has no {name!r} endpoint; it has {sorted(self.endpoints)}"
            ) from None

    def uri(self, name: str = "stomp") -> str:
        """The endpoint as a failover-URI member, e.g. ``stomp://127.0.0.1:20001``."""
        return str(self.endpoint(name))

    # -- raw clients -------------------------------------------------------------------------

    def _declare_headers(self, destination: str) -> dict[str, str]:
        """Hook: STOMP headers that make a SEND / SUBSCRIBE declare ``destination`` durable."""
        return {}

    def stomp_client(self, timeout: float = 5.0, endpoint: str = "stomp") -> StompClient:
        """A connected raw stomp.py session to this broker (close it, or use ``with``)."""
        ep = self.endpoint(endpoint)
        login, passcode = self.credentials or (None, None)
        return StompClient(ep.host, ep.port, login, passcode, vhost=self.vhost, timeout=timeout)

    def send(  # noqa: PLR0917 - tests pass headers and persistence by position
        self,
        destination: str,
        bodies: Iterable[bytes | str],
        headers: Mapping[str, str] | None = None,
        persistent: bool = True,
        protocol: str = "stomp",
        timeout: float = 10.0,
    ) -> int:
        """Send through this broker's own protocol, confirming each message; returns the count.

        ``/queue/<name>`` means a durable queue on every broker kind.
        """
        if protocol == "amqp":
            login, passcode = self.credentials or (None, None)
            return amqp_send(
                self.uri("amqp"),
                self._amqp_address(destination),
                bodies,
                durable=persistent,
                properties=headers,
                user=login,
                password=passcode,
                timeout=timeout,
                capabilities=self._amqp_capabilities(destination),
            )
        with self.stomp_client(timeout) as session:
            all_headers = {**self._declare_headers(destination), **(headers or {})}
            return session.send(destination, bodies, all_headers, persistent)

    def drain(
        self,
        destination: str,
        timeout: float = 5.0,
        idle: float = 0.5,
        expect: int | None = None,
        protocol: str = "stomp",
    ) -> list[ReceivedMessage]:
        """Consume and acknowledge what ``destination`` holds on this broker.

        Stops when ``idle`` seconds pass without a message (after ``expect`` messages, if
        given) or after ``timeout``. Drain with the protocol the messages were sent with:
        RabbitMQ hands AMQP-published messages to STOMP as AMQP-encoded bytes.
        """
        if protocol == "amqp":
            login, passcode = self.credentials or (None, None)
            return amqp_drain(
                self.uri("amqp"),
                self._amqp_address(destination),
                timeout=timeout,
                idle=idle,
                expect=expect,
                user=login,
                password=passcode,
                capabilities=self._amqp_capabilities(destination),
            )
        with self.stomp_client(timeout) as session:
            session.subscribe(destination, headers=self._declare_headers(destination))
            return session.collect(timeout, idle, expect)

    def _amqp_address(self, destination: str) -> str:
        """Hook: turn a portable destination into an AMQP 1.0 address."""
        return destination

    def _amqp_capabilities(self, destination: str) -> tuple[str, ...]:
        return self.amqp_queue_capabilities if destination.startswith("/queue/") else ()

    def queue_depth(self, queue: str) -> int | None:
        """Messages waiting in ``queue`` (a name, not ``/queue/...``); None if not cheap here."""
        return None

    def __repr__(self) -> str:
        state = "hung" if self.hung else ("running" if self.running() else "down")
        eps = ",".join(str(e) for e in self.endpoints.values())
        return f"<{type(self).__name__} {self.name} {state} pid={self.pid} {eps}>"
