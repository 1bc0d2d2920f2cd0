"""The WireFormatInfo exchange: what the client offers and what both sides then speak.

Each side sends a WireFormatInfo first and then speaks what both allow, as ActiveMQ's
``OpenWireFormat.renegotiateWireFormat`` and ``InactivityMonitor`` decide it: the lower of the
two versions (a side that names none defers to the other), a feature only when both enable it,
and the shorter of the two ``MaxInactivityDuration`` values (0 on either side switches the
inactivity monitor off on both).

The client offers loose encoding without the marshal cache, with size prefixes and without
stack traces, so whatever a broker prefers, the negotiated format is the one
:mod:`._commands` speaks; :func:`negotiate` still refuses a result it could not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from failover_client._errors import ProtocolViolation

from ._commands import PROTOCOL_VERSION, WireFormatInfo
from ._wire import MAX_CONTROL_FRAME

__all__ = ["MIN_CLUSTER_VERSION", "Negotiated", "client_wire_format", "negotiate"]

MIN_CLUSTER_VERSION = 6
"""ConnectionControl carries ``connectedBrokers`` from OpenWire 6 on, and a broker sends cluster
updates only to connections of version 6 or later."""

INITIAL_DELAY = 10.0
"""Seconds before the broker starts checking this connection for inactivity (its default)."""


@dataclass(frozen=True)
class Negotiated:
    """The wire format both sides speak after the exchange."""

    version: int
    max_inactivity: float
    """Seconds of silence after which either side may close; 0 means no inactivity checks."""
    stack_trace: bool
    initial_delay: float = 0.0
    """Seconds after the exchange before either side checks for inactivity (and so before the
    broker sends its first keep-alive)."""
    tight_encoding: bool = False
    cache: bool = False
    size_prefix_disabled: bool = False


def client_wire_format(
    *,
    max_inactivity: float,
    max_frame: int = MAX_CONTROL_FRAME,
    version: int = PROTOCOL_VERSION,
) -> WireFormatInfo:
    """The WireFormatInfo a control channel sends: loose, uncached, prefixed, no stack traces.

    ``MaxFrameSize`` tells the broker not to send larger frames; every number is a Java long,
    as the broker casts them.
    """
    return WireFormatInfo(
        version,
        {
            "TightEncodingEnabled": False,
            "CacheEnabled": False,
            "SizePrefixDisabled": False,
            "StackTraceEnabled": False,
            "TcpNoDelayEnabled": True,
            "MaxInactivityDuration": round(max_inactivity * 1000),
            "MaxInactivityDurationInitalDelay": round(INITIAL_DELAY * 1000),
            "MaxFrameSize": max_frame,
            "ProviderName": "failover-client",
        },
    )


def _lower(ours: int, theirs: int) -> int:
    """ActiveMQ's ``min``: the lower positive value; a value <= 0 defers to the other."""
    if (ours < theirs and ours > 0) or theirs <= 0:
        return ours
    return theirs


def negotiate(ours: WireFormatInfo, theirs: WireFormatInfo) -> Negotiated:
    """What both sides speak; ProtocolViolation when it is not loose, uncached and prefixed."""
    version = _lower(ours.version, theirs.version)
    both = {
        name: ours.flag(name) and theirs.flag(name)
        for name in (
            "StackTraceEnabled",
            "TightEncodingEnabled",
            "CacheEnabled",
            "SizePrefixDisabled",
        )
    }
    mine, peer = ours.number("MaxInactivityDuration"), theirs.number("MaxInactivityDuration")
    inactivity = min(mine or 0, peer or 0)
    delays = (
        ours.number("MaxInactivityDurationInitalDelay"),
        theirs.number("MaxInactivityDurationInitalDelay"),
    )
    result = Negotiated(
        version=version,
        max_inactivity=max(inactivity, 0) / 1000.0,
        stack_trace=both["StackTraceEnabled"],
        initial_delay=max(min(d or 0 for d in delays), 0) / 1000.0,
        tight_encoding=both["TightEncodingEnabled"],
        cache=both["CacheEnabled"],
        size_prefix_disabled=both["SizePrefixDisabled"],
    )
    if result.tight_encoding or result.cache or result.size_prefix_disabled:
        raise ProtocolViolation(f"negotiated a wire format this client cannot read: {result}")
    return result
