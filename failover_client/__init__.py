"""failover-client: one connection to a group of STOMP / AMQP 1.0 brokers that fails over."""

from __future__ import annotations

from ._clock import Clock, SystemClock
from ._errors import (
    AllBrokersFailed,
    AuthenticationFailed,
    BrokerUnavailable,
    ConfigurationError,
    ConnectionClosed,
    ConnectionFailure,
    FailoverClientError,
    OptionError,
    PolicyError,
    ProtocolViolation,
    SendFailure,
    SendRejected,
    SendTimeout,
    TLSFailure,
    URIError,
)
from .uri import BrokerAddress, FailoverOptions

__all__ = [
    "AllBrokersFailed",
    "AuthenticationFailed",
    "BrokerAddress",
    "BrokerUnavailable",
    "Clock",
    "ConfigurationError",
    "ConnectionClosed",
    "ConnectionFailure",
    "FailoverClientError",
    "FailoverOptions",
    "OptionError",
    "PolicyError",
    "ProtocolViolation",
    "SendFailure",
    "SendRejected",
    "SendTimeout",
    "SystemClock",
    "TLSFailure",
    "URIError",
]
