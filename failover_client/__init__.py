"""failover-client: one connection to a group of STOMP / AMQP 1.0 brokers that fails over.

The public surface is re-exported here; everything in a ``_module`` is private. URI parsing lives
in :mod:`failover_client.uri`, broker-selection policies in :mod:`failover_client.policies`, and
test doubles (fake clock, scripted connector) in :mod:`failover_client.testing`.
"""

from __future__ import annotations

import importlib as _importlib
import logging as _logging
import sys as _sys
import threading as _threading
from collections.abc import Sequence as _Sequence
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any
from typing import ClassVar as _ClassVar

from failover_client._clock import Clock, SystemClock
from failover_client._errors import (
    AllBrokersFailed,
    AuthenticationFailed,
    BrokerRefused,
    BrokerUnavailable,
    ConfigurationError,
    ConnectCancelled,
    ConnectionClosed,
    ConnectionFailure,
    DataError,
    FailoverClientError,
    NotConnected,
    OptionError,
    PolicyError,
    ProtocolViolation,
    SendFailure,
    SendRejected,
    SendTimeout,
    SubscriptionRefused,
    TLSFailure,
    TopologyError,
    URIError,
)

if _TYPE_CHECKING:
    from failover_client._events import (
        AckDropped,
        Closed,
        Connected,
        Disconnected,
        DrainFinished,
        DrainStarted,
        DuplicatesPossible,
        Event,
        FailedOver,
        GaveUp,
        HandlerError,
        Listener,
        ListenerError,
        MessagesReleased,
        PoisonQuarantined,
        PrefetchExceeded,
        PriorityRestored,
        Rebalanced,
        ReconnectAttempt,
        ReconnectWarning,
        SessionDeaf,
        StandbyConnected,
        StandbyLost,
        SubscriptionFailed,
        TopologyChanged,
        TopologySourceFailed,
        TopologyTruncated,
    )
    from failover_client.engine._acksync import SettleConfirmation, SettleQuestion
    from failover_client.engine._connection import MESSAGE_ID_HEADER, FailoverTarget
    from failover_client.engine._connection import FailoverConnection as _EngineConnection
    from failover_client.engine._dedup import Deduplicator
    from failover_client.engine._health import Health, SubscriptionHealth
    from failover_client.engine._pool import BrokerPool, BrokerState, TopologyDelta
    from failover_client.engine._schedule import ReconnectSchedule, ScheduleRun
    from failover_client.engine._subscriptions import Message, Subscription
    from failover_client.engine._topology import TopologySource as _TopologySource
    from failover_client.engine._topology import UriSourceFactory as _UriSourceFactory
    from failover_client.net._settings import ConnectorSettings
    from failover_client.uri import BrokerAddress, FailoverOptions, FailoverURI, parse
    from failover_client.uri import DiscoveryAgent as _DiscoveryAgent

__version__ = "0.1.0"
"""The package's version; setup.cfg reads it from here (``version = attr: ...``)."""

# A library adds no handler of its own but this one: without it Python's last-resort handler
# prints WARNING records to stderr of an application that never configured logging. The
# loggers and what each level means: docs/startup.md ("Logging").
_logging.getLogger("failover_client").addHandler(_logging.NullHandler())

__all__ = [
    "MESSAGE_ID_HEADER",
    "AckDropped",
    "AllBrokersFailed",
    "AuthenticationFailed",
    "BrokerAddress",
    "BrokerPool",
    "BrokerRefused",
    "BrokerState",
    "BrokerUnavailable",
    "Clock",
    "Closed",
    "ConfigurationError",
    "ConnectCancelled",
    "Connected",
    "ConnectionClosed",
    "ConnectionFailure",
    "ConnectorSettings",
    "DataError",
    "Deduplicator",
    "Disconnected",
    "DrainFinished",
    "DrainStarted",
    "DuplicatesPossible",
    "Event",
    "FailedOver",
    "FailoverClientError",
    "FailoverConnection",
    "FailoverOptions",
    "FailoverTarget",
    "FailoverURI",
    "GaveUp",
    "HandlerError",
    "Health",
    "Listener",
    "ListenerError",
    "Message",
    "MessagesReleased",
    "NotConnected",
    "OptionError",
    "PoisonQuarantined",
    "PolicyError",
    "PrefetchExceeded",
    "PriorityRestored",
    "ProtocolViolation",
    "Rebalanced",
    "ReconnectAttempt",
    "ReconnectSchedule",
    "ReconnectWarning",
    "ScheduleRun",
    "SendFailure",
    "SendRejected",
    "SendTimeout",
    "SessionDeaf",
    "SettleConfirmation",
    "SettleQuestion",
    "StandbyConnected",
    "StandbyLost",
    "Subscription",
    "SubscriptionFailed",
    "SubscriptionHealth",
    "SubscriptionRefused",
    "SystemClock",
    "TLSFailure",
    "TopologyChanged",
    "TopologyDelta",
    "TopologyError",
    "TopologySourceFailed",
    "TopologyTruncated",
    "URIError",
    "parse",
]

# Everything but the errors and the clock is imported when first used (PEP 562): the engine's
# modules define about a hundred dataclasses, and building them was most of the package's
# import time. ``import failover_client`` alone stays cheap; the first use of a name below
# (usually ``FailoverConnection``) imports what it needs, once.
_LAZY: dict[str, str] = {
    "AckDropped": "failover_client._events",
    "Closed": "failover_client._events",
    "Connected": "failover_client._events",
    "Disconnected": "failover_client._events",
    "DrainFinished": "failover_client._events",
    "DrainStarted": "failover_client._events",
    "DuplicatesPossible": "failover_client._events",
    "Event": "failover_client._events",
    "FailedOver": "failover_client._events",
    "GaveUp": "failover_client._events",
    "HandlerError": "failover_client._events",
    "Listener": "failover_client._events",
    "ListenerError": "failover_client._events",
    "MessagesReleased": "failover_client._events",
    "PoisonQuarantined": "failover_client._events",
    "PrefetchExceeded": "failover_client._events",
    "PriorityRestored": "failover_client._events",
    "Rebalanced": "failover_client._events",
    "ReconnectAttempt": "failover_client._events",
    "ReconnectWarning": "failover_client._events",
    "SessionDeaf": "failover_client._events",
    "StandbyConnected": "failover_client._events",
    "StandbyLost": "failover_client._events",
    "SubscriptionFailed": "failover_client._events",
    "TopologyChanged": "failover_client._events",
    "TopologySourceFailed": "failover_client._events",
    "TopologyTruncated": "failover_client._events",
    "FailoverTarget": "failover_client.engine._connection",
    "MESSAGE_ID_HEADER": "failover_client.engine._connection",
    "SettleConfirmation": "failover_client.engine._acksync",
    "SettleQuestion": "failover_client.engine._acksync",
    "Deduplicator": "failover_client.engine._dedup",
    "Health": "failover_client.engine._health",
    "SubscriptionHealth": "failover_client.engine._health",
    "BrokerPool": "failover_client.engine._pool",
    "BrokerState": "failover_client.engine._pool",
    "TopologyDelta": "failover_client.engine._pool",
    "ReconnectSchedule": "failover_client.engine._schedule",
    "ScheduleRun": "failover_client.engine._schedule",
    "Message": "failover_client.engine._subscriptions",
    "Subscription": "failover_client.engine._subscriptions",
    "ConnectorSettings": "failover_client.net._settings",
    "BrokerAddress": "failover_client.uri",
    "FailoverOptions": "failover_client.uri",
    "FailoverURI": "failover_client.uri",
    "parse": "failover_client.uri",
}

_SUBMODULES = frozenset(
    {"adapter", "aio", "amqp", "cli", "demo", "engine", "net", "openwire", "policies"}
    | {"spark", "stomp", "testing", "topology", "uri"}
)


def _uri_sources(
    members: _Sequence[BrokerAddress],
    options: FailoverOptions,
    agents: _Sequence[_DiscoveryAgent],
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock,
) -> _Sequence[_TopologySource]:
    # The sources (a layer above the engine) build connections of their own through this
    # package, so they are imported when a URI first asks for one, not with the package.
    from failover_client.topology import uri_sources  # noqa: PLC0415

    return uri_sources(members, options, agents, login=login, passcode=passcode, clock=clock)


if _TYPE_CHECKING:

    class FailoverConnection(_EngineConnection):
        __doc__ = _EngineConnection.__doc__

        # The package is where every layer meets: here the engine's connection is given the
        # topology layer's factory, explicitly, rather than through a hook installed at import.
        default_topology_factory: _ClassVar[_UriSourceFactory | None] = staticmethod(_uri_sources)


def _connection_class() -> type:
    """The public ``FailoverConnection``: the engine's, given the topology layer's factory."""
    from failover_client.engine._connection import (  # noqa: PLC0415 - see _LAZY
        FailoverConnection as _EngineConnection,
    )

    class FailoverConnection(_EngineConnection):
        __doc__ = _EngineConnection.__doc__

        # The package is where every layer meets: here the engine's connection is given the
        # topology layer's factory, explicitly, rather than through a hook installed at import.
        default_topology_factory: _ClassVar[_UriSourceFactory | None] = staticmethod(_uri_sources)

    FailoverConnection.__qualname__ = "FailoverConnection"
    return FailoverConnection


_CLASS_LOCK = _threading.Lock()
"""Two threads that first ask for FailoverConnection at once must get the same class."""


def __getattr__(name: str) -> _Any:
    """Import a public name (or a subpackage) on first use and keep it (see ``_LAZY``)."""
    if name == "FailoverConnection":
        with _CLASS_LOCK:
            value: _Any = globals().get(name) or _connection_class()
    elif name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


# Subpackages a user imports by name; dir() lists those already imported.
_PUBLIC_SUBPACKAGES = (
    "adapter",
    "aio",
    "amqp",
    "cli",
    "demo",
    "otel",
    "policies",
    "spark",
    "stomp",
    "testing",
    "topology",
    "uri",
)


def __dir__() -> list[str]:
    """The public names only: ``__all__``, ``__version__`` and the public subpackages loaded.

    Without this, dir() would also list the module's imports (``annotations`` from the
    ``__future__`` import, the engine's modules) as if they were part of the API.
    """
    loaded = [name for name in _PUBLIC_SUBPACKAGES if f"{__name__}.{name}" in _sys.modules]
    return sorted([*__all__, "__version__", *loaded])
