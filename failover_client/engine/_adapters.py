"""Which protocol adapter serves a list of brokers, imported only when it is needed.

Each adapter's library is an extra (``pip install 'failover-client[stomp]'`` brings stomp.py,
``[amqp]`` python-qpid-proton), so importing the engine never imports them. An import that fails
is told apart by what is missing: the third-party library (install the extra), the adapter itself
(this version does not ship it), or anything else (a bug, raised as it is).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client.adapter import Cancel, Connector, Session, SessionListener
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["ProtocolConnector", "connector_for"]


@dataclass(frozen=True)
class _Adapter:
    module: str
    factory: str
    library: str
    """The third-party top-level module the adapter is built on."""


_ADAPTERS = {
    "stomp": _Adapter("failover_client.stomp", "StompConnector", library="stomp"),
    "amqp": _Adapter("failover_client.amqp", "AmqpConnector", library="proton"),
}


def connector_for(
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    *,
    login: str | None = None,
    passcode: str | None = None,
    clock: Clock | None = None,
    client_id: str | None = None,
) -> Connector:
    """The protocol adapter for ``members`` (imported lazily: its library is an extra).

    All members must speak one protocol: ``stomp`` (stomp.py) or ``amqp`` (python-qpid-proton).
    Raises :class:`ConfigurationError` for mixed or unknown protocols, a missing library (naming
    the extra to install) or an adapter this version does not ship.
    """
    protocols = sorted({m.protocol for m in members})
    if not protocols:
        # failover:()?updateURIsURL=... or discovery:(...): the list says the protocol later.
        return ProtocolConnector(
            options, login=login, passcode=passcode, clock=clock, client_id=client_id
        )
    if len(protocols) != 1 or protocols[0] not in _ADAPTERS:
        raise ConfigurationError(
            f"members speak {', '.join(protocols)}; a failover connection needs all members on "
            "one of: stomp (stomp://, stomp+ssl://), amqp (amqp://, amqps://)"
            + (_openwire_hint(members) if "openwire" in protocols else "")
        )
    return _load(
        protocols[0], options, login=login, passcode=passcode, clock=clock, client_id=client_id
    )


def _openwire_hint(members: Sequence[BrokerAddress]) -> str:
    """What a Java user with a ``tcp://host:61616`` URI should write instead."""
    first = next(m for m in members if m.protocol == "openwire")
    stomp_port = 61612 if first.tls else 61613
    scheme = "stomp+ssl" if first.tls else "stomp"
    return (
        f". {first.scheme}:// is OpenWire, the Java client's protocol, which failover-client "
        f"does not speak; the same brokers listen for STOMP and AMQP 1.0 on other ports "
        f"(by default STOMP 61613, STOMP over TLS 61612, AMQP 5672, AMQPS 5671): write e.g. "
        f"{scheme}://{first.authority.rsplit(':', 1)[0]}:{stomp_port}. Broker lists that "
        f"arrive in tcp:// form (a cluster's push, updateURIsURL) are mapped with "
        f"topology.schemeMap=tcp:stomp:61613,ssl:stomp+ssl:61612"
    )


def _load(
    protocol: str,
    options: FailoverOptions,
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock | None,
    client_id: str | None,
) -> Connector:
    adapter = _ADAPTERS[protocol]
    try:
        module = importlib.import_module(adapter.module)
    except ImportError as exc:
        if exc.name == adapter.library:
            raise ConfigurationError(
                f"the {protocol} adapter needs the {adapter.library!r} library, which is not "
                f"installed: pip install 'failover-client[{protocol}]'"
            ) from exc
        if exc.name == adapter.module:
            raise ConfigurationError(
                f"this version of failover-client has no {protocol} adapter yet"
            ) from exc
        raise  # anything else missing is a bug in the adapter, not the user's set-up
    factory = getattr(module, adapter.factory)
    return cast(
        "Connector",
        factory(options, login=login, passcode=passcode, clock=clock, client_id=client_id),
    )


class ProtocolConnector:
    """The connector of a connection that starts with no brokers (they come from a source).

    The adapter is chosen by the protocol of the first broker dialled and kept: one connection
    speaks one protocol, so a broker of another protocol is refused with ConfigurationError
    (the pool already keeps such entries out; this is the last guard).
    """

    def __init__(
        self,
        options: FailoverOptions,
        *,
        login: str | None = None,
        passcode: str | None = None,
        clock: Clock | None = None,
        client_id: str | None = None,
    ) -> None:
        self._options = options
        self._login = login
        self._passcode = passcode
        self._clock = clock
        self._client_id = client_id
        self._lock = threading.Lock()
        self._chosen: tuple[str, Connector] | None = None
        self._read_loop: Callable[[], object] | None = None

    def read_on_loop(self, where: Callable[[], object]) -> None:
        """Passed on to the adapter once chosen, when it reads on an event loop (STOMP's
        ``StompConnector.read_on_loop``, used by the asyncio connection)."""
        self._read_loop = where

    def connector(self, protocol: str) -> Connector:
        """The adapter for ``protocol``, loaded on first use; ConfigurationError if another
        protocol was chosen before, or the protocol has no adapter."""
        with self._lock:
            if self._chosen is None:
                if protocol not in _ADAPTERS:
                    raise ConfigurationError(f"no adapter speaks {protocol!r}")
                self._chosen = (
                    protocol,
                    _load(
                        protocol,
                        self._options,
                        login=self._login,
                        passcode=self._passcode,
                        clock=self._clock,
                        client_id=self._client_id,
                    ),
                )
                hook = getattr(self._chosen[1], "read_on_loop", None)
                if hook is not None and self._read_loop is not None:
                    hook(self._read_loop)
            chosen, connector = self._chosen
        if chosen != protocol:
            raise ConfigurationError(
                f"this connection speaks {chosen}; a {protocol} broker cannot join it"
            )
        return connector

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel,
    ) -> Session:
        connector = self.connector(address.protocol)
        return connector.connect(address, timeout=timeout, listener=listener, cancel=cancel)

    def __repr__(self) -> str:
        chosen = "undecided" if self._chosen is None else self._chosen[0]
        return f"ProtocolConnector({chosen})"
