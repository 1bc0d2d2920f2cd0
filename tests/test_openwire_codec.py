"""The OpenWire codec: exact bytes against ActiveMQ 5.17.2, round trips, and hostile frames.

The ``*_HEX`` frames below were captured on the wire (a logging proxy between a client and a
real ActiveMQ 5.17.2 broker): what the broker sent, and what our control channel sent and the
broker accepted. Our Java-client reference capture (``wireFormat.tightEncodingEnabled=false``)
has the same ConnectionInfo layout, plus the cache marker it negotiated.
"""

from __future__ import annotations

import struct

import pytest

from failover_client import ProtocolViolation
from failover_client.openwire import (
    MAX_CONTROL_FRAME,
    CodecError,
    ConnectionControl,
    ConnectionErrorCommand,
    ConnectionInfo,
    ExceptionResponse,
    FrameReader,
    KeepAliveInfo,
    RemoteException,
    Response,
    ShutdownInfo,
    Skipped,
    WireFormatInfo,
    client_wire_format,
    decode_command,
    decode_modified_utf8,
    encode_command,
    encode_modified_utf8,
    frame,
    negotiate,
)

# The broker's WireFormatInfo (5.17.2 defaults), without its 4-byte size prefix (338).
BROKER_WFI_HEX = (
    "014163746976654d510000000c01000001400000000d0011537461636b5472616365456e61626c6564010100"
    "0f506c6174666f726d44657461696c730900044a617661000c4361636865456e61626c656401010011546370"
    "4e6f44656c6179456e61626c65640101001253697a6550726566697844697361626c65640100000943616368"
    "6553697a650500000400000c50726f76696465724e616d650900084163746976654d5100145469676874456e"
    "636f64696e67456e61626c65640101000c4d61784672616d6553697a65067fffffffffffffff00154d617849"
    "6e61637469766974794475726174696f6e06000000000000753000204d6178496e6163746976697479447572"
    "6174696f6e496e6974616c44656c617906000000000000271000134d61784672616d6553697a65456e61626c"
    "65640101000f50726f766964657256657273696f6e090006352e31372e32"
)
# Our WireFormatInfo with max_inactivity=3.0 (the broker accepted it and negotiated 3 s).
CLIENT_WFI_HEX = (
    "014163746976654d510000000c01000000ee0000000900145469676874456e636f64696e67456e61626c6564"
    "0100000c4361636865456e61626c65640100001253697a6550726566697844697361626c6564010000115374"
    "61636b5472616365456e61626c6564010000115463704e6f44656c6179456e61626c6564010100154d617849"
    "6e61637469766974794475726174696f6e060000000000000bb800204d6178496e6163746976697479447572"
    "6174696f6e496e6974616c44656c6179060000000000002710000c4d61784672616d6553697a650600000000"
    "00100000000c50726f76696465724e616d6509000f6661696c6f7665722d636c69656e74"
)
# Our ConnectionInfo (id ID:test-1, client test-client, no login), accepted by the broker.
CLIENT_INFO_HEX = (
    "030000000101017801000949443a746573742d3101000b746573742d636c69656e74000000000101010000"
)
# A network broker's ConnectionControl (rebalanceClusterClients, three tcp:// peers).
BROKER_CONTROL_HEX = (
    "12000000000000000000000100417463703a2f2f3132372e302e302e313a33313430332c7463703a2f2f3132"
    "372e302e302e313a33313430312c7463703a2f2f3132372e302e302e313a33313430350100000100"
)
# A lone broker's ConnectionControl (no cluster flags): empty connectedBrokers.
LONE_CONTROL_HEX = "12000000000000000000000100000100000000"
# The answer to a ConnectionInfo with a wrong password (simpleAuthenticationPlugin).
BROKER_REFUSAL_HEX = (
    "1f0000000000000000010101001b6a6176612e6c616e672e5365637572697479457863657074696f6e010027"
    "55736572206e616d65205b6170705d206f722070617373776f726420697320696e76616c69642e"
)
BROKER_RESPONSE_HEX = "1e000000000000000001"
CLIENT_KEEPALIVE_HEX = "0a0000000200"


def body(hex_text: str) -> bytes:
    return bytes.fromhex(hex_text)


# --- modified UTF-8 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("ActiveMQ", b"ActiveMQ"),
        ("", b""),
        ("a\0b", b"a\xc0\x80b"),  # NUL as Java writes it
        ("é€", "é€".encode()),  # 2- and 3-byte characters as in UTF-8
        ("\U0001f600", b"\xed\xa0\xbd\xed\xb8\x80"),  # outside the BMP: two 3-byte surrogates
    ],
)
def test_modified_utf8_is_what_java_writes(text: str, encoded: bytes) -> None:
    assert encode_modified_utf8(text) == encoded
    assert decode_modified_utf8(encoded) == text


def test_plain_four_byte_utf8_is_read_too() -> None:
    assert decode_modified_utf8("\U0001f600".encode()) == "\U0001f600"


@pytest.mark.parametrize("raw", [b"\xff", b"\xe2\x82", b"\xed\xa0\x80", b"a\x80"])
def test_bytes_that_are_not_utf8_are_refused(raw: bytes) -> None:
    with pytest.raises(UnicodeDecodeError):
        decode_modified_utf8(raw)


# --- frames ------------------------------------------------------------------------------------


def test_frames_are_cut_from_any_chunking() -> None:
    stream = frame(body(BROKER_WFI_HEX)) + frame(body(BROKER_RESPONSE_HEX))
    assert stream[:4] == struct.pack(">i", 338)
    reader = FrameReader()
    out = [f for byte in stream for f in reader.feed(bytes([byte]))]
    assert out == [body(BROKER_WFI_HEX), body(BROKER_RESPONSE_HEX)]
    assert reader.buffered == 0
    assert reader.frames == 2


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (MAX_CONTROL_FRAME + 1, f"exceeds the limit of {MAX_CONTROL_FRAME} bytes"),
        (0x7FFFFFFF, "exceeds the limit"),
        (-1, "size prefix -1 is not a frame size"),
        (0, "size prefix 0 is not a frame size"),
    ],
)
def test_a_bad_size_prefix_is_refused_before_anything_is_buffered(size: int, words: str) -> None:
    reader = FrameReader()
    assert reader.feed(frame(body(BROKER_RESPONSE_HEX))) == [body(BROKER_RESPONSE_HEX)]
    with pytest.raises(CodecError, match=words) as info:
        reader.feed(struct.pack(">i", size) + b"\x12")
    assert isinstance(info.value, ProtocolViolation)
    assert (info.value.command, info.value.field) == ("frame", "size")
    assert "frame #2" in str(info.value)
    assert reader.buffered <= 5


def test_a_frame_of_exactly_the_limit_is_taken() -> None:
    reader = FrameReader(limit=16)
    data = b"\x63" + bytes(15)
    assert reader.feed(frame(data)) == [data]


# --- WireFormatInfo ----------------------------------------------------------------------------


def test_the_brokers_wireformat_info_decodes() -> None:
    info = decode_command(body(BROKER_WFI_HEX))
    assert isinstance(info, WireFormatInfo)
    assert info.version == 12
    assert info.properties == {
        "StackTraceEnabled": True,
        "PlatformDetails": "Java",
        "CacheEnabled": True,
        "TcpNoDelayEnabled": True,
        "SizePrefixDisabled": False,
        "CacheSize": 1024,
        "ProviderName": "ActiveMQ",
        "TightEncodingEnabled": True,
        "MaxFrameSize": 0x7FFFFFFFFFFFFFFF,
        "MaxInactivityDuration": 30000,
        "MaxInactivityDurationInitalDelay": 10000,
        "MaxFrameSizeEnabled": True,
        "ProviderVersion": "5.17.2",
    }


def test_our_wireformat_info_is_the_bytes_the_broker_accepted() -> None:
    ours = client_wire_format(max_inactivity=3.0)
    assert encode_command(ours) == body(CLIENT_WFI_HEX)
    assert decode_command(body(CLIENT_WFI_HEX)) == ours
    # Every number is a Java long (type 6): the broker casts them to Long.
    assert b"\x00\x15MaxInactivityDuration\x06" in body(CLIENT_WFI_HEX)


def test_negotiation_takes_the_lower_of_each_and_keeps_loose_encoding() -> None:
    broker = decode_command(body(BROKER_WFI_HEX))
    assert isinstance(broker, WireFormatInfo)
    result = negotiate(client_wire_format(max_inactivity=3.0), broker)
    assert (result.version, result.max_inactivity, result.initial_delay) == (12, 3.0, 10.0)
    flags = (result.stack_trace, result.tight_encoding, result.cache, result.size_prefix_disabled)
    assert flags == (False, False, False, False)
    older = WireFormatInfo(9, {"MaxInactivityDuration": 60000})
    assert negotiate(client_wire_format(max_inactivity=30.0), older).version == 9
    assert negotiate(client_wire_format(max_inactivity=30.0), older).initial_delay == 0.0
    # A side that names no version defers to the other; one without an inactivity limit
    # switches the monitor off (ActiveMQ's rules).
    silent = negotiate(client_wire_format(max_inactivity=30.0), WireFormatInfo(0, {}))
    assert (silent.version, silent.max_inactivity) == (12, 0.0)


def test_negotiation_refuses_a_format_it_cannot_read() -> None:
    greedy = WireFormatInfo(12, {"TightEncodingEnabled": True})
    with pytest.raises(ProtocolViolation, match="cannot read"):
        negotiate(greedy, greedy)
    with pytest.raises(CodecError, match=r"MaxInactivityDuration.*not a number"):
        negotiate(
            client_wire_format(max_inactivity=1), WireFormatInfo(12, {"MaxInactivityDuration": "x"})
        )


# --- ConnectionInfo ----------------------------------------------------------------------------


def test_our_connection_info_is_the_bytes_the_broker_accepted() -> None:
    info = ConnectionInfo(1, "ID:test-1", "test-client")
    assert encode_command(info) == body(CLIENT_INFO_HEX)
    assert decode_command(body(CLIENT_INFO_HEX)) == info


def test_connection_info_carries_password_before_user_name() -> None:
    info = ConnectionInfo(1, "ID:x", "c", user_name="app", password="pw\0é")
    encoded = encode_command(info)
    assert b"\x01\x00\x06pw\xc0\x80\xc3\xa9\x01\x00\x03app" in encoded
    assert decode_command(encoded) == info
    assert "pw" not in repr(info)


@pytest.mark.parametrize(("version", "length"), [(1, 24), (2, 25), (6, 27), (8, 28), (12, 28)])
def test_connection_info_fields_follow_the_version(version: int, length: int) -> None:
    info = ConnectionInfo(1, "ID:x", "c", failover_reconnect=True)
    encoded = encode_command(info, version)
    assert len(encoded) == length
    decoded = decode_command(encoded, version=version)
    assert isinstance(decoded, ConnectionInfo)
    assert decoded.fault_tolerant == (version >= 6)
    assert decoded.failover_reconnect == (version >= 6)


def test_a_broker_path_round_trips() -> None:
    info = ConnectionInfo(7, "ID:x", None, broker_path=("ID:b1", "ID:b2"))
    assert decode_command(encode_command(info)) == info


# --- what the broker sends ---------------------------------------------------------------------


def test_the_brokers_connection_control_decodes() -> None:
    control = decode_command(body(BROKER_CONTROL_HEX))
    assert control == ConnectionControl(
        0,
        connected_brokers="tcp://127.0.0.1:31403,tcp://127.0.0.1:31401,tcp://127.0.0.1:31405",
        reconnect_to="",
        rebalance_connection=True,
        token=None,
    )
    lone = decode_command(body(LONE_CONTROL_HEX))
    assert isinstance(lone, ConnectionControl)
    assert (lone.connected_brokers, lone.rebalance_connection) == ("", False)


@pytest.mark.parametrize(
    ("version", "brokers", "token"),
    [(1, None, None), (5, None, None), (6, "x", None), (8, "x", b"t")],
)
def test_connection_control_fields_follow_the_version(
    version: int, brokers: str | None, token: bytes | None
) -> None:
    sent = ConnectionControl(3, suspend=True, connected_brokers="x", token=b"t")
    decoded = decode_command(encode_command(sent, version), version=version)
    assert isinstance(decoded, ConnectionControl)
    assert decoded.suspend
    assert (decoded.connected_brokers, decoded.token) == (brokers, token)


def test_the_brokers_answers_decode() -> None:
    assert decode_command(body(BROKER_RESPONSE_HEX)) == Response(0, 1)
    refusal = decode_command(body(BROKER_REFUSAL_HEX))
    assert refusal == ExceptionResponse(
        0,
        1,
        RemoteException("java.lang.SecurityException", "User name [app] or password is invalid."),
    )
    assert encode_command(refusal) == body(BROKER_REFUSAL_HEX)
    assert encode_command(KeepAliveInfo(2)) == body(CLIENT_KEEPALIVE_HEX)


@pytest.mark.parametrize(
    "command",
    [
        KeepAliveInfo(5, response_required=True),
        ShutdownInfo(9),
        Response(3, 2),
        ExceptionResponse(4, 1, None),
        ExceptionResponse(4, 1, RemoteException(None, None)),
        ConnectionErrorCommand(6, RemoteException("java.io.IOException", "boom"), "ID:c"),
        ConnectionErrorCommand(6, None, None),
        ConnectionControl(1, close=True, exit=True, resume=True, reconnect_to=None, token=b""),
        WireFormatInfo(
            11, {"a": None, "b": 1.5, "c": b"\x00\x01", "d": -(1 << 63), "e": "\U0001f600"}
        ),
    ],
)
def test_every_command_round_trips(command: object) -> None:
    assert decode_command(encode_command(command)) == command  # type: ignore[arg-type]


def _throwable(message: str, frames: int, cause: bytes | None) -> bytes:
    """A throwable as a broker with StackTraceEnabled marshals it."""
    out = b"\x01" + b"\x01" + struct.pack(">H", 19) + b"java.lang.Exception"
    out += b"\x01" + struct.pack(">H", len(message)) + message.encode()
    out += struct.pack(">h", frames)
    for _ in range(frames):
        out += b"\x01\x00\x01C" + b"\x01\x00\x01m" + b"\x00" + struct.pack(">i", 42)
    return out + (cause if cause is not None else b"\x00")


def test_stack_frames_are_read_past_and_the_cause_kept() -> None:
    error = _throwable("outer", 2, _throwable("inner", 1, None))
    data = b"\x1f" + struct.pack(">i", 0) + b"\x00" + struct.pack(">i", 1) + error
    decoded = decode_command(data, stack_trace=True)
    assert isinstance(decoded, ExceptionResponse)
    assert decoded.exception == RemoteException(
        "java.lang.Exception", "outer", RemoteException("java.lang.Exception", "inner")
    )
    # Stack frames a broker sends unasked are skipped: class and message are what matter.
    unasked = decode_command(data)
    assert isinstance(unasked, ExceptionResponse)
    assert unasked.exception == RemoteException("java.lang.Exception", "outer")


@pytest.mark.parametrize(
    "throwable",
    [
        b"\x01\x01\xff\xff",  # a class name longer than the frame
        b"\x01\x01\x00\x02\xc3\x28",  # a class name that is not UTF-8
    ],
)
def test_an_unreadable_exception_still_answers_its_command(throwable: bytes) -> None:
    header = b"\x1f" + struct.pack(">i", 0) + b"\x00" + struct.pack(">i", 1)
    decoded = decode_command(header + throwable)
    assert isinstance(decoded, ExceptionResponse)
    assert decoded.correlation_id == 1
    assert decoded.exception is not None
    assert decoded.exception.class_name is None
    assert "unreadable exception: OpenWire ExceptionResponse field 'exception class'" in str(
        decoded.exception.message
    )
    error = b"\x10" + struct.pack(">i", 0) + b"\x00" + throwable
    broken = decode_command(error)
    assert isinstance(broken, ConnectionErrorCommand)
    assert broken.connection_id is None


def test_an_endless_cause_chain_is_not_followed() -> None:
    error = None
    for _ in range(20):
        error = _throwable("x", 0, error)
    data = b"\x1f" + struct.pack(">i", 0) + b"\x00" + struct.pack(">i", 1) + (error or b"")
    decoded = decode_command(data, stack_trace=True)
    assert isinstance(decoded, ExceptionResponse)
    assert decoded.exception is not None
    assert "more than 16 causes" in str(decoded.exception.message)


# --- hostile frames ----------------------------------------------------------------------------


def test_every_truncation_of_a_control_is_refused_naming_the_field() -> None:
    whole = body(BROKER_CONTROL_HEX)
    for cut in range(1, len(whole)):
        with pytest.raises(CodecError) as info:
            decode_command(whole[:cut])
        assert info.value.command == "ConnectionControl"
        assert info.value.field is not None
        assert info.value.offset is not None
        assert info.value.offset <= cut


def test_bad_magic_is_refused() -> None:
    data = bytearray(body(BROKER_WFI_HEX))
    data[1:9] = b"ActiveMX"
    with pytest.raises(CodecError, match=r"WireFormatInfo field 'magic' at offset 1: b'ActiveMX'"):
        decode_command(bytes(data))


def test_bad_utf8_names_the_field_and_offset() -> None:
    data = bytearray(body(BROKER_CONTROL_HEX))
    data[14] = 0xFF  # inside connectedBrokers: flag at offset 11, length at 12, text from 14
    with pytest.raises(CodecError, match="'connectedBrokers' at offset 12: string is not UTF-8"):
        decode_command(bytes(data))


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        (b"\x01" + struct.pack(">i", -7), "field 'token' at offset 19: length -7 is negative"),
        (b"\x01" + struct.pack(">i", 1 << 30), "needs 1073741824 bytes, the frame has 0 left"),
    ],
)
def test_a_hostile_length_is_refused(tail: bytes, words: str) -> None:
    # A lone broker's ConnectionControl up to its token: header, five flags, two empty strings,
    # rebalanceConnection.
    data = bytes.fromhex("120000000000000000000001000001000000") + tail
    with pytest.raises(CodecError, match=words):
        decode_command(data)


def test_a_string_longer_than_the_frame_is_refused() -> None:
    data = bytes.fromhex("120000000000000000000001ffff") + b"tcp://x"
    with pytest.raises(CodecError, match="needs 65535 bytes, the frame has 7 left"):
        decode_command(data)


def _wfi(entries: bytes, count: int) -> bytes:
    props = struct.pack(">i", count) + entries
    return b"\x01ActiveMQ" + struct.pack(">i", 12) + b"\x01" + struct.pack(">i", len(props)) + props


@pytest.mark.parametrize(
    ("entries", "count", "words"),
    [
        (b"\x00\x01m\x0b" + struct.pack(">i", 0), 1, r"properties\['m'\].*a nested map is not"),
        (b"\x00\x01l\x0c" + struct.pack(">i", 0), 1, "a nested list is not allowed"),
        (b"\x00\x01u\x63", 1, "unknown value type 99"),
        (b"\x00\x01s\x0d" + struct.pack(">i", 1 << 20), 1, "exceeds the limit of 4096"),
        (b"", 65, "65 entries exceed the limit of 64"),
        (b"\x00\x01b\x01\x01junk", 1, "4 bytes left over"),
    ],
)
def test_a_hostile_property_map_is_refused(entries: bytes, count: int, words: str) -> None:
    with pytest.raises(CodecError, match=words) as info:
        decode_command(_wfi(entries, count))
    assert info.value.command == "WireFormatInfo"
    assert (info.value.field or "").startswith("properties")
    assert info.value.offset is not None
    assert info.value.offset >= 18  # counted from the frame's type byte, not the map's start


def test_a_wrongly_typed_nested_id_is_refused() -> None:
    data = encode_command(ConnectionInfo(1, "ID:c", "client"))
    patched = data[:7] + b"\x7c" + data[8:]  # BrokerId where a ConnectionId belongs
    with pytest.raises(CodecError, match="'connectionId' at offset 7: type 124 where type 120"):
        decode_command(patched)
    # In a ConnectionError it only follows the exception, and is skipped when unreadable.
    error = encode_command(ConnectionErrorCommand(1, None, "ID:c"))
    skipped = decode_command(error[:8] + b"\x7c" + error[9:])
    assert skipped == ConnectionErrorCommand(1, None, None)


def test_left_over_bytes_are_refused() -> None:
    with pytest.raises(CodecError, match="ConnectionControl at offset 19: 1 bytes left over"):
        decode_command(body(LONE_CONTROL_HEX) + b"\x00")


def test_unknown_and_unread_command_types_are_skipped_by_size() -> None:
    assert decode_command(b"\x02" + b"\xff" * 94) == Skipped(2, 95)  # BrokerInfo: not read
    assert decode_command(b"\xfe\x00") == Skipped(0xFE, 2)
    with pytest.raises(CodecError, match="empty frame"):
        decode_command(b"")


def test_values_openwire_cannot_carry_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="does not fit OpenWire's 64 KiB"):
        encode_command(ConnectionInfo(1, "ID:x", "c" * 70000))
    with pytest.raises(ValueError, match="does not fit a Java long"):
        encode_command(WireFormatInfo(12, {"n": 1 << 64}))
    with pytest.raises(ValueError, match="list has no OpenWire type"):
        encode_command(WireFormatInfo(12, {"n": []}))  # type: ignore[dict-item]
