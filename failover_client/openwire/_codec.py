"""Loose encoding of the control channel's commands (:mod:`._commands`), as ActiveMQ marshals them.

Field order and version gates follow ActiveMQ's generated marshallers (``openwire.v12`` and
the legacy ``v1``-``v8``), confirmed against the bytes a 5.17 broker and its Java client put on
the wire. Every command below can be encoded and decoded (a test peer needs the other side);
:func:`decode_command` turns every other command type into :class:`Skipped` without reading
it, so the frame's size prefix is all that is trusted of it.

==================  ====  =========================================================
command             type  fields after the type byte (loose encoding)
==================  ====  =========================================================
WireFormatInfo         1  magic ``ActiveMQ`` (8 bytes), int version, nullable byte
                          sequence holding the property map (:mod:`._properties`)
ConnectionInfo         3  command header, ConnectionId (nested: flag, type 120, string),
                          clientId, password, userName (strings), brokerPath (null),
                          brokerMasterConnector, manageable; v2+ clientMaster;
                          v6+ faultTolerant, failoverReconnect; v8+ clientIp (string)
KeepAliveInfo         10  command header
ShutdownInfo          11  command header
ConnectionError       16  command header, throwable, ConnectionId (nested)
ConnectionControl     18  command header, close, exit, faultTolerant, resume, suspend;
                          v6+ connectedBrokers, reconnectTo (strings), rebalanceConnection;
                          v8+ token (nullable byte array)
Response              30  command header, int correlationId
ExceptionResponse     31  Response's fields, then a throwable
==================  ====  =========================================================

The command header is an int commandId and a responseRequired flag. A string is a presence
flag then modified UTF-8 with a 2-byte length. A throwable is a presence flag, its class name
and message (strings) and, only when both sides enabled stack traces, a short count of stack
frames (three strings and an int each) and the cause, recursively; the frames are read past
and dropped, the cause chain is kept (to :data:`MAX_CAUSES` deep). An answer's exception is
read leniently: what cannot be read of it is skipped to the end of the frame (see
:func:`_read_exception`); every other field is read strictly.
"""

from __future__ import annotations

from ._commands import (
    BROKER_ID_TYPE,
    CONNECTION_CONTROL,
    CONNECTION_ERROR,
    CONNECTION_ID_TYPE,
    CONNECTION_INFO,
    EXCEPTION_RESPONSE,
    KEEP_ALIVE_INFO,
    MAGIC,
    MAX_CAUSES,
    PROTOCOL_VERSION,
    RESPONSE,
    SHUTDOWN_INFO,
    WIREFORMAT_INFO,
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
from ._properties import PropertyValue, read_map, write_map
from ._wire import CodecError, Reader, Writer

__all__ = ["decode_command", "encode_command"]


# --- encoding ----------------------------------------------------------------------------------


def _header(out: Writer, kind: int, command_id: int, response_required: bool) -> None:
    out.byte(kind)
    out.int32(command_id)
    out.boolean(response_required)


def _write_throwable(out: Writer, error: RemoteException | None) -> None:
    # Written as a side with stack traces disabled writes it: class and message only.
    out.boolean(error is not None)
    if error is not None:
        out.string(error.class_name)
        out.string(error.message)


def _write_connection_id(out: Writer, value: str | None) -> None:
    out.boolean(value is not None)
    if value is not None:
        out.byte(CONNECTION_ID_TYPE)
        out.string(value)


def _encode_connection_info(out: Writer, info: ConnectionInfo, version: int) -> None:
    _header(out, CONNECTION_INFO, info.command_id, info.response_required)
    _write_connection_id(out, info.connection_id)  # a "cached" object, and the cache is off
    out.string(info.client_id)
    out.string(info.password)
    out.string(info.user_name)
    out.boolean(info.broker_path is not None)
    if info.broker_path is not None:
        out.short(len(info.broker_path))
        for broker in info.broker_path:
            out.boolean(True)
            out.byte(BROKER_ID_TYPE)
            out.string(broker)
    out.boolean(info.broker_master_connector)
    out.boolean(info.manageable)
    if version >= 2:
        out.boolean(info.client_master)
    if version >= 6:
        out.boolean(info.fault_tolerant)
        out.boolean(info.failover_reconnect)
    if version >= 8:
        out.string(info.client_ip)


def _encode_control(out: Writer, control: ConnectionControl, version: int) -> None:
    _header(out, CONNECTION_CONTROL, control.command_id, control.response_required)
    for flag in (control.close, control.exit, control.fault_tolerant):
        out.boolean(flag)
    out.boolean(control.resume)
    out.boolean(control.suspend)
    if version >= 6:
        out.string(control.connected_brokers)
        out.string(control.reconnect_to)
        out.boolean(control.rebalance_connection)
    if version >= 8:
        out.byte_array(control.token)


def encode_command(command: Command, version: int = PROTOCOL_VERSION) -> bytes:
    """The frame body (type byte and fields) of ``command`` for protocol ``version``.

    Raises ValueError for a value OpenWire cannot carry (a string over 64 KiB encoded, a
    property without an OpenWire type).
    """
    out = Writer()
    if isinstance(command, WireFormatInfo):
        out.byte(WIREFORMAT_INFO)
        if len(command.magic) != len(MAGIC):
            raise ValueError(f"magic must be {len(MAGIC)} bytes")
        out.raw(command.magic)
        out.int32(command.version)
        props = Writer()
        write_map(props, command.properties)
        out.byte_array(props.getvalue())
    elif isinstance(command, ConnectionInfo):
        _encode_connection_info(out, command, version)
    elif isinstance(command, KeepAliveInfo | ShutdownInfo):
        kind = KEEP_ALIVE_INFO if isinstance(command, KeepAliveInfo) else SHUTDOWN_INFO
        _header(out, kind, command.command_id, command.response_required)
    elif isinstance(command, ConnectionErrorCommand):
        _header(out, CONNECTION_ERROR, command.command_id, command.response_required)
        _write_throwable(out, command.exception)
        _write_connection_id(out, command.connection_id)
    elif isinstance(command, ConnectionControl):
        _encode_control(out, command, version)
    elif isinstance(command, ExceptionResponse):
        _header(out, EXCEPTION_RESPONSE, command.command_id, command.response_required)
        out.int32(command.correlation_id)
        _write_throwable(out, command.exception)
    else:
        _header(out, RESPONSE, command.command_id, command.response_required)
        out.int32(command.correlation_id)
    return out.getvalue()


# --- decoding ----------------------------------------------------------------------------------

_NAMES = {
    WIREFORMAT_INFO: "WireFormatInfo",
    CONNECTION_INFO: "ConnectionInfo",
    KEEP_ALIVE_INFO: "KeepAliveInfo",
    SHUTDOWN_INFO: "ShutdownInfo",
    CONNECTION_ERROR: "ConnectionError",
    CONNECTION_CONTROL: "ConnectionControl",
    RESPONSE: "Response",
    EXCEPTION_RESPONSE: "ExceptionResponse",
}


def _read_throwable(data: Reader, stack_trace: bool, depth: int = 0) -> RemoteException | None:
    if not data.boolean("exception"):
        return None
    class_name = data.string("exception class")
    message = data.string("exception message")
    cause = None
    if stack_trace:
        start = data.offset
        frames = data.short("stack trace length")
        if frames < 0:
            raise data.error(f"{frames} stack frames", "stack trace length", start)
        for _ in range(frames):
            for part in ("class", "method", "file"):
                data.string(f"stack frame {part}")
            data.int32("stack frame line")
        if depth >= MAX_CAUSES:
            raise data.error(f"more than {MAX_CAUSES} causes", "exception cause")
        cause = _read_throwable(data, stack_trace, depth + 1)
    return RemoteException(class_name, message, cause)


def _read_nested_id(data: Reader, field: str, expected: int) -> str | None:
    if not data.boolean(field):
        return None
    start = data.offset
    kind = data.byte(field) & 0xFF
    if kind != expected:
        raise data.error(f"type {kind} where type {expected} belongs", field, start)
    return data.string(field)


def _decode_wireformat(data: Reader) -> WireFormatInfo:
    magic = data.take(len(MAGIC), "magic")
    if magic != MAGIC:
        raise data.error(f"{magic!r} is not {MAGIC!r}", "magic", data.offset - len(MAGIC))
    version = data.int32("version")
    properties: dict[str, PropertyValue] = {}
    if data.boolean("properties"):
        start = data.offset
        length = data.int32("properties")
        inner = Reader(data.take(length, "properties", start), "WireFormatInfo properties")
        try:
            properties = read_map(inner, "properties") or {}
            inner.finish()
        except CodecError as exc:
            # Offsets inside the map, reported from the frame's type byte like every other.
            base = start + 4
            where = base + (exc.offset or 0)
            raise data.error(exc.problem, exc.field or "properties", where) from None
    return WireFormatInfo(version, properties, magic)


def _decode_connection_info(data: Reader, version: int) -> ConnectionInfo:
    command_id, required = data.int32("commandId"), data.boolean("responseRequired")
    connection_id = _read_nested_id(data, "connectionId", CONNECTION_ID_TYPE)
    client_id = data.string("clientId")
    password = data.string("password")
    user_name = data.string("userName")
    path: tuple[str, ...] | None = None
    if data.boolean("brokerPath"):
        count = data.short("brokerPath")
        if count < 0:
            raise data.error(f"{count} entries", "brokerPath", data.offset - 2)
        path = tuple(
            _read_nested_id(data, "brokerPath", BROKER_ID_TYPE) or "" for _ in range(count)
        )
    master_connector, manageable = data.boolean("brokerMasterConnector"), data.boolean("manageable")
    client_master = data.boolean("clientMaster") if version >= 2 else True
    fault_tolerant = data.boolean("faultTolerant") if version >= 6 else False
    failover_reconnect = data.boolean("failoverReconnect") if version >= 6 else False
    client_ip = data.string("clientIp") if version >= 8 else None
    return ConnectionInfo(
        command_id,
        connection_id or "",
        client_id,
        user_name,
        password,
        manageable=manageable,
        fault_tolerant=fault_tolerant,
        failover_reconnect=failover_reconnect,
        client_master=client_master,
        client_ip=client_ip,
        broker_path=path,
        broker_master_connector=master_connector,
        response_required=required,
    )


def _decode_control(data: Reader, version: int) -> ConnectionControl:
    command_id, required = data.int32("commandId"), data.boolean("responseRequired")
    close, exit_, fault_tolerant = (
        data.boolean("close"),
        data.boolean("exit"),
        data.boolean("faultTolerant"),
    )
    resume, suspend = data.boolean("resume"), data.boolean("suspend")
    brokers, reconnect_to, rebalance = None, None, False
    if version >= 6:
        brokers = data.string("connectedBrokers")
        reconnect_to = data.string("reconnectTo")
        rebalance = data.boolean("rebalanceConnection")
    token = data.byte_array("token") if version >= 8 else None
    return ConnectionControl(
        command_id,
        close=close,
        exit=exit_,
        fault_tolerant=fault_tolerant,
        resume=resume,
        suspend=suspend,
        connected_brokers=brokers,
        reconnect_to=reconnect_to,
        rebalance_connection=rebalance,
        token=token,
        response_required=required,
    )


def _decode_simple(kind: int, data: Reader, stack_trace: bool) -> Command:
    """The commands that start with the plain command header."""
    command_id, required = data.int32("commandId"), data.boolean("responseRequired")
    if kind == KEEP_ALIVE_INFO:
        return KeepAliveInfo(command_id, required)
    if kind == SHUTDOWN_INFO:
        return ShutdownInfo(command_id, required)
    if kind == CONNECTION_ERROR:
        error, whole = _read_exception(data, stack_trace)
        connection_id = None
        if whole:
            try:
                connection_id = _read_nested_id(data, "connectionId", CONNECTION_ID_TYPE)
            except CodecError:
                data.take(data.remaining, "connectionId")  # bounded by the frame: skipped
        return ConnectionErrorCommand(command_id, error, connection_id, required)
    correlation = data.int32("correlationId")
    if kind == RESPONSE:
        return Response(command_id, correlation, required)
    error, _ = _read_exception(data, stack_trace)
    data.take(data.remaining, "exception")  # stack frames a broker sent unasked: skipped
    return ExceptionResponse(command_id, correlation, error, required)


def _read_exception(data: Reader, stack_trace: bool) -> tuple[RemoteException | None, bool]:
    """The exception of an answer, and whether it was read whole.

    An answer matters for its correlation id and its exception's class and message; what
    cannot be read of the rest is skipped (the frame's size bounds it, so the stream stays in
    step), and an exception that cannot be read at all says so in its message.
    """
    try:
        return _read_throwable(data, stack_trace), True
    except CodecError as exc:
        data.take(data.remaining, "exception")
        return RemoteException(None, f"(unreadable exception: {exc})"), False


def _decode_known(kind: int, data: Reader, version: int, stack_trace: bool) -> Command:
    if kind == WIREFORMAT_INFO:
        return _decode_wireformat(data)
    if kind == CONNECTION_INFO:
        return _decode_connection_info(data, version)
    if kind == CONNECTION_CONTROL:
        return _decode_control(data, version)
    return _decode_simple(kind, data, stack_trace)


def decode_command(
    body: bytes, *, version: int = PROTOCOL_VERSION, stack_trace: bool = False
) -> Command | Skipped:
    """The command in one frame ``body`` (type byte and fields, no size prefix).

    ``version`` is the negotiated protocol version (fields newer than it are absent) and
    ``stack_trace`` the negotiated StackTraceEnabled. Raises :class:`CodecError` naming the
    command, field and offset when the bytes are not that command.
    """
    if not body:
        raise CodecError("empty frame", command="frame", offset=0)
    kind = body[0]
    name = _NAMES.get(kind)
    if name is None:
        return Skipped(kind, len(body))
    data = Reader(body, name)
    data.take(1, "type")
    command = _decode_known(kind, data, version, stack_trace)
    data.finish()
    return command
