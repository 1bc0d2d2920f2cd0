"""The OpenWire commands a control channel exchanges, as values (:mod:`._codec` marshals them).

Names and fields are ActiveMQ's (``org.apache.activemq.command``), in Python spelling; the
type numbers are OpenWire's. ``ConnectionError`` is :class:`ConnectionErrorCommand` here, so
it does not shadow Python's own ``ConnectionError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ._properties import PropertyValue
from ._wire import CodecError

__all__ = [
    "CONNECTION_ID_TYPE",
    "MAGIC",
    "MAX_CAUSES",
    "PROTOCOL_VERSION",
    "Command",
    "ConnectionControl",
    "ConnectionErrorCommand",
    "ConnectionInfo",
    "ExceptionResponse",
    "KeepAliveInfo",
    "RemoteException",
    "Response",
    "ShutdownInfo",
    "Skipped",
    "WireFormatInfo",
]

MAGIC = b"ActiveMQ"
PROTOCOL_VERSION = 12
"""The newest OpenWire version ActiveMQ 5.15-6.x speaks; the client offers it."""
MAX_CAUSES = 16
"""Causes of a remote exception read at most (a longer chain is malformed or hostile)."""

WIREFORMAT_INFO, CONNECTION_INFO, KEEP_ALIVE_INFO, SHUTDOWN_INFO = 1, 3, 10, 11
CONNECTION_ERROR, CONNECTION_CONTROL, RESPONSE, EXCEPTION_RESPONSE = 16, 18, 30, 31
CONNECTION_ID_TYPE, BROKER_ID_TYPE = 120, 124


@dataclass(frozen=True)
class WireFormatInfo:
    """The first frame each side sends: its protocol version and wire-format preferences."""

    version: int
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)
    magic: bytes = MAGIC

    def flag(self, name: str) -> bool:
        """A boolean property, false when absent (as ActiveMQ reads them)."""
        return self.properties.get(name) is True

    def number(self, name: str) -> int | None:
        """An integer property, None when absent; CodecError when it is not a number."""
        value = self.properties.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise CodecError(
                f"is {type(value).__name__}, not a number", command="WireFormatInfo", field=name
            )
        return value


@dataclass(frozen=True)
class ConnectionInfo:
    """Opens a connection: who connects, and whether the broker may manage and update it."""

    command_id: int
    connection_id: str
    client_id: str | None
    user_name: str | None = None
    password: str | None = field(default=None, repr=False)
    manageable: bool = True
    fault_tolerant: bool = True
    failover_reconnect: bool = False
    client_master: bool = True
    client_ip: str | None = None
    broker_path: tuple[str, ...] | None = None
    broker_master_connector: bool = False
    response_required: bool = True


@dataclass(frozen=True)
class KeepAliveInfo:
    """Proof of life; answered with another when ``response_required``."""

    command_id: int = 0
    response_required: bool = False


@dataclass(frozen=True)
class ShutdownInfo:
    """The peer is going away."""

    command_id: int = 0
    response_required: bool = False


@dataclass(frozen=True)
class RemoteException:
    """A Java throwable as the broker marshalled it (stack frames dropped)."""

    class_name: str | None
    message: str | None
    cause: RemoteException | None = None

    def __str__(self) -> str:
        return f"{self.class_name}: {self.message}" if self.message else f"{self.class_name}"


@dataclass(frozen=True)
class ConnectionErrorCommand:
    """The broker failed a command that wanted no response (OpenWire's ConnectionError)."""

    command_id: int
    exception: RemoteException | None
    connection_id: str | None = None
    response_required: bool = False


@dataclass(frozen=True)
class ConnectionControl:
    """The broker's instructions to a connection; cluster updates arrive in this command.

    ``connected_brokers`` is a comma list of broker URIs (the sending broker first); an empty
    string means the broker sends no cluster information. ``rebalance_connection`` asks the
    client to rebalance across them.
    """

    command_id: int = 0
    close: bool = False
    exit: bool = False
    fault_tolerant: bool = False
    resume: bool = False
    suspend: bool = False
    connected_brokers: str | None = ""
    reconnect_to: str | None = ""
    rebalance_connection: bool = False
    token: bytes | None = None
    response_required: bool = False


@dataclass(frozen=True)
class Response:
    """Success of the command whose id is ``correlation_id``."""

    command_id: int
    correlation_id: int
    response_required: bool = False


@dataclass(frozen=True)
class ExceptionResponse:
    """Failure of the command whose id is ``correlation_id``, with the broker's exception."""

    command_id: int
    correlation_id: int
    exception: RemoteException | None
    response_required: bool = False


@dataclass(frozen=True)
class Skipped:
    """A command this codec does not read (BrokerInfo, messages, ...): its type and size."""

    type: int
    size: int


Command = (
    WireFormatInfo
    | ConnectionInfo
    | KeepAliveInfo
    | ShutdownInfo
    | ConnectionErrorCommand
    | ConnectionControl
    | Response
    | ExceptionResponse
)
