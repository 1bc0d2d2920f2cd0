"""failover-client: one connection to a group of STOMP / AMQP 1.0 brokers that fails over.

The public surface is re-exported here; everything in a ``_module`` is private. URI parsing lives
in :mod:`failover_client.uri`, broker-selection policies in :mod:`failover_client.policies`, and
test doubles (fake clock, scripted connector) in :mod:`failover_client.testing`.
"""

from __future__ import annotations

from collections.abc import Sequence as _Sequence
from typing import Any as _Any

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
    URIError,
)
from failover_client._events import (
    AckDropped,
    Closed,
    Connected,
    Disconnected,
    Event,
    FailedOver,
    GaveUp,
    HandlerError,
    Listener,
    ListenerError,
    PoisonQuarantined,
    PriorityRestored,
    Rebalanced,
    ReconnectAttempt,
    ReconnectWarning,
    StandbyConnected,
    StandbyLost,
    SubscriptionFailed,
    TopologyChanged,
    TopologySourceFailed,
    TopologyTruncated,
)
from failover_client.engine._connection import MESSAGE_ID_HEADER, FailoverConnection, FailoverTarget
from failover_client.engine._pool import BrokerPool, BrokerState, TopologyDelta
from failover_client.engine._schedule import ReconnectSchedule, ScheduleRun
from failover_client.engine._subscriptions import Message, Subscription
from failover_client.engine._topology import TopologyFeed as _TopologyFeed
from failover_client.engine._topology import install_uri_sources as _install_uri_sources
from failover_client.uri import BrokerAddress, FailoverOptions, FailoverURI, parse

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
    "Disconnected",
    "Event",
    "FailedOver",
    "FailoverClientError",
    "FailoverConnection",
    "FailoverOptions",
    "FailoverTarget",
    "FailoverURI",
    "GaveUp",
    "HandlerError",
    "Listener",
    "ListenerError",
    "Message",
    "NotConnected",
    "OptionError",
    "PoisonQuarantined",
    "PolicyError",
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
    "StandbyConnected",
    "StandbyLost",
    "Subscription",
    "SubscriptionFailed",
    "SubscriptionRefused",
    "SystemClock",
    "TLSFailure",
    "TopologyChanged",
    "TopologyDelta",
    "TopologySourceFailed",
    "TopologyTruncated",
    "URIError",
    "parse",
]


def _uri_sources(*args: _Any, **kwargs: _Any) -> _Sequence[_TopologyFeed]:
    # The sources (a layer above the engine) build connections of their own through this
    # package, so they are imported when a URI first asks for one, not with the package.
    from failover_client.topology import uri_sources  # noqa: PLC0415

    return uri_sources(*args, **kwargs)


_install_uri_sources(_uri_sources)
