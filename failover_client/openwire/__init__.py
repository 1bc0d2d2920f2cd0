"""A minimal OpenWire client: the control channel that hears ActiveMQ Classic's cluster pushes.

ActiveMQ Classic tells only OpenWire (Java) clients about its network of brokers and asks only
them to rebalance (``updateClusterClients`` / ``rebalanceClusterClients``), in a
``ConnectionControl`` command. This package speaks just enough OpenWire to receive it beside a
STOMP or AMQP data connection:

* ``_wire``: big-endian primitives, Java's modified UTF-8, size-prefixed frames with a limit;
* ``_properties``: the WireFormatInfo's property map;
* ``_commands``: the commands a control channel exchanges, as values;
* ``_codec``: their loose encoding and decoding, with the protocol's version gates; every
  other command is skipped by its size;
* ``_negotiate``: the WireFormatInfo exchange;
* ``_failures``: socket, TLS and broker refusals as the project's errors;
* ``_channel``: :class:`ControlChannel`, one listening connection with keep-alives.

:class:`failover_client.topology.OpenWireSource` runs a control channel beside a connection.
Nothing here knows the engine.
"""

from __future__ import annotations

from ._channel import ControlChannel, OnControl
from ._codec import decode_command, encode_command
from ._commands import (
    MAGIC,
    PROTOCOL_VERSION,
    Command,
    ConnectionControl,
    ConnectionErrorCommand,
    ConnectionInfo,
    ExceptionResponse,
    KeepAliveInfo,
    RemoteException,
    Response,
    ShutdownInfo,
    Skipped,
    WireFormatInfo,
)
from ._negotiate import MIN_CLUSTER_VERSION, Negotiated, client_wire_format, negotiate
from ._properties import PropertyValue
from ._wire import (
    MAX_CONTROL_FRAME,
    CodecError,
    FrameReader,
    decode_modified_utf8,
    encode_modified_utf8,
    frame,
)

__all__ = [
    "MAGIC",
    "MAX_CONTROL_FRAME",
    "MIN_CLUSTER_VERSION",
    "PROTOCOL_VERSION",
    "CodecError",
    "Command",
    "ConnectionControl",
    "ConnectionErrorCommand",
    "ConnectionInfo",
    "ControlChannel",
    "ExceptionResponse",
    "FrameReader",
    "KeepAliveInfo",
    "Negotiated",
    "OnControl",
    "PropertyValue",
    "RemoteException",
    "Response",
    "ShutdownInfo",
    "Skipped",
    "WireFormatInfo",
    "client_wire_format",
    "decode_command",
    "decode_modified_utf8",
    "encode_command",
    "encode_modified_utf8",
    "frame",
    "negotiate",
]
