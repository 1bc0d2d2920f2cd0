"""A received AMQP 1.0 message, read straight from its bytes into what the engine sees.

:func:`decode_received` gives the same :class:`~failover_client.adapter.Received` as decoding
with proton's :class:`~proton.Message` and converting it with ``_convert.received``, at a
fraction of the cost: proton's ``Message.decode`` fills a C message and then walks every
section back into Python objects through its ``Data`` trees (annotations included, which we
never read), and every property read afterwards is another round trip into C; together about
50 µs a message here, more than the rest of a delivery's handling. Reading the few fields we
need with ``struct`` takes a few µs.

Only the shapes brokers send are read here: sections with a small-ulong descriptor, a header,
delivery and message annotations (skipped), properties whose message-id and correlation-id
are strings, application properties with simple values, one data section or an amqp-value
that is binary, a string or null, and a footer (skipped). Anything else (a symbolic
descriptor, several data sections, an amqp-sequence, a decimal property, a malformed message)
is handed to proton, so the result is always what proton's reading gives
(``tests/test_amqp_decode.py`` compares the two).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from proton import (
    Message,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from failover_client.adapter import Received
from failover_client.amqp._convert import received

__all__ = ["decode_received"]


class _Unread(Exception):
    """A shape this module does not read: proton reads the message instead."""


_B = struct.Struct(">b").unpack_from
_H = struct.Struct(">H").unpack_from
_SH = struct.Struct(">h").unpack_from
_I = struct.Struct(">I").unpack_from
_SI = struct.Struct(">i").unpack_from
_Q = struct.Struct(">Q").unpack_from
_SQ = struct.Struct(">q").unpack_from
_F = struct.Struct(">f").unpack_from
_D = struct.Struct(">d").unpack_from

_HEADER = 0x70
_DELIVERY_ANNOTATIONS = 0x71
_MESSAGE_ANNOTATIONS = 0x72
_PROPERTIES = 0x73
_APPLICATION_PROPERTIES = 0x74
_DATA = 0x75
_AMQP_VALUE = 0x77
_FOOTER = 0x78

_STRINGS = frozenset((0xA1, 0xB1))


def _fixed_width(code: int) -> int:
    """Bytes after the constructor of a fixed-width type (AMQP 1.0, 1.6: by the code's high
    nibble), -1 for a variable-width one."""
    width = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}.get(code >> 4)
    return -1 if width is None else width


_WIDTHS = tuple(_fixed_width(code) for code in range(256))


def _skip(raw: bytes, at: int) -> int:
    """The offset after the value at ``at`` (any type, described ones too)."""
    code = raw[at]
    at += 1
    if code == 0x00:  # described: the descriptor, then the value
        return _skip(raw, _skip(raw, at))
    width = _WIDTHS[code]
    if width >= 0:
        return at + width
    high = code >> 4
    if high in (0xA, 0xC, 0xE):
        return at + 1 + raw[at]
    if high in (0xB, 0xD, 0xF):
        size: int = _I(raw, at)[0]
        return at + 4 + size
    raise _Unread(f"constructor 0x{code:02x}")


def _value(raw: bytes, at: int) -> tuple[Any, int]:
    """The value at ``at`` as proton's ``Data.get_object`` gives it, and the offset after it."""
    code = raw[at]
    at += 1
    if code == 0xA1:
        size = raw[at]
        return raw[at + 1 : at + 1 + size].decode("utf-8"), at + 1 + size
    if code == 0xB1:
        size = _I(raw, at)[0]
        return raw[at + 4 : at + 4 + size].decode("utf-8"), at + 4 + size
    reader = _SCALARS.get(code)
    if reader is None:
        raise _Unread(f"value of constructor 0x{code:02x}")
    return reader(raw, at)


def _symbol(raw: bytes, at: int, wide: bool) -> tuple[Any, int]:
    if wide:
        size = _I(raw, at)[0]
        return symbol(raw[at + 4 : at + 4 + size].decode("ascii")), at + 4 + size
    size = raw[at]
    return symbol(raw[at + 1 : at + 1 + size].decode("ascii")), at + 1 + size


_Reader = Callable[[bytes, int], tuple[Any, int]]

_SCALARS: dict[int, _Reader] = {
    0x40: lambda raw, at: (None, at),
    0x41: lambda raw, at: (True, at),
    0x42: lambda raw, at: (False, at),
    0x56: lambda raw, at: (raw[at] != 0, at + 1),
    0x43: lambda raw, at: (uint(0), at),
    0x44: lambda raw, at: (ulong(0), at),
    0x50: lambda raw, at: (ubyte(raw[at]), at + 1),
    0x51: lambda raw, at: (byte(_B(raw, at)[0]), at + 1),
    0x52: lambda raw, at: (uint(raw[at]), at + 1),
    0x53: lambda raw, at: (ulong(raw[at]), at + 1),
    0x54: lambda raw, at: (int32(_B(raw, at)[0]), at + 1),
    0x55: lambda raw, at: (_B(raw, at)[0], at + 1),
    0x60: lambda raw, at: (ushort(_H(raw, at)[0]), at + 2),
    0x61: lambda raw, at: (short(_SH(raw, at)[0]), at + 2),
    0x70: lambda raw, at: (uint(_I(raw, at)[0]), at + 4),
    0x71: lambda raw, at: (int32(_SI(raw, at)[0]), at + 4),
    0x72: lambda raw, at: (float32(_F(raw, at)[0]), at + 4),
    0x73: lambda raw, at: (char(chr(_I(raw, at)[0])), at + 4),
    0x80: lambda raw, at: (ulong(_Q(raw, at)[0]), at + 8),
    0x81: lambda raw, at: (_SQ(raw, at)[0], at + 8),
    0x82: lambda raw, at: (_D(raw, at)[0], at + 8),
    0x83: lambda raw, at: (timestamp(_SQ(raw, at)[0]), at + 8),
    0x98: lambda raw, at: (uuid.UUID(bytes=bytes(raw[at : at + 16])), at + 16),
    0xA0: lambda raw, at: (raw[at + 1 : at + 1 + raw[at]], at + 1 + raw[at]),
    0xB0: lambda raw, at: (
        raw[at + 4 : at + 4 + _I(raw, at)[0]],
        at + 4 + _I(raw, at)[0],
    ),
    0xA3: lambda raw, at: _symbol(raw, at, False),
    0xB3: lambda raw, at: _symbol(raw, at, True),
}
"""Readers of the simple types by constructor (decimals are left to proton)."""


def _list_items(raw: bytes, at: int) -> tuple[int, int, int]:
    """(count, offset of the first item, offset after the list) of the list at ``at``."""
    code = raw[at]
    if code == 0x45:
        return 0, at + 1, at + 1
    if code == 0xC0:
        return raw[at + 2], at + 3, at + 2 + raw[at + 1]
    if code == 0xD0:
        size, count = struct.unpack_from(">II", raw, at + 1)
        return count, at + 9, at + 5 + size
    raise _Unread(f"a list with constructor 0x{code:02x}")


def _map_items(raw: bytes, at: int) -> tuple[int, int, int]:
    """(keys and values, offset of the first, offset after the map) of the map at ``at``."""
    code = raw[at]
    if code == 0xC1:
        return raw[at + 2], at + 3, at + 2 + raw[at + 1]
    if code == 0xD1:
        size, count = struct.unpack_from(">II", raw, at + 1)
        return count, at + 9, at + 5 + size
    raise _Unread(f"a map with constructor 0x{code:02x}")


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _fields(raw: bytes, at: int, wanted: int) -> tuple[list[Any], int]:
    """The first ``wanted`` fields of the list at ``at`` (None where absent), and the end."""
    count, item, end = _list_items(raw, at)
    fields: list[Any] = [None] * wanted
    for index in range(min(count, wanted)):
        fields[index], item = _value(raw, item)
    return fields, end


class _Parts:
    """What the sections read so far say."""

    __slots__ = ("body", "delivery_count", "first_acquirer", "headers", "identifiers")

    def __init__(self) -> None:
        self.delivery_count = 0
        self.first_acquirer = False
        self.identifiers: list[Any] = [None] * 6
        self.headers: dict[str, str] = {}
        self.body: bytes | None = None


def _application_properties(raw: bytes, at: int, headers: dict[str, str]) -> int:
    count, item, end = _map_items(raw, at)
    for _ in range(count // 2):
        if raw[item] not in _STRINGS:
            raise _Unread("an application property whose key is not a string")
        key, item = _value(raw, item)
        code = raw[item]
        if code >= 0xC0 or code == 0x00:
            raise _Unread("an application property that is not a simple value")
        value, item = _value(raw, item)
        headers[key] = _text(value)
    return end


def _body(raw: bytes, at: int, section: int) -> tuple[bytes, int]:
    if section == _DATA:
        value, at = _value(raw, at)
        if not isinstance(value, bytes):
            raise _Unread("a data section that is not binary")
        return value, at
    if raw[at] not in (0x40, 0xA0, 0xB0, 0xA1, 0xB1):
        raise _Unread("an amqp-value that is neither binary, a string nor null")
    value, at = _value(raw, at)
    if value is None:
        return b"", at
    if isinstance(value, str):
        return value.encode("utf-8"), at
    return value, at  # bytes: binary by its constructor


def _section(raw: bytes, at: int, parts: _Parts) -> int:
    """Read the section at ``at`` into ``parts``; the offset after it."""
    if raw[at] != 0x00 or raw[at + 1] != 0x53:
        raise _Unread("a section without a small-ulong descriptor")
    section = raw[at + 2]
    at += 3
    if section == _HEADER:
        fields, at = _fields(raw, at, 5)
        parts.first_acquirer = bool(fields[3])
        parts.delivery_count = int(fields[4] or 0)
    elif section in (_DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS, _FOOTER):
        at = _skip(raw, at)
    elif section == _PROPERTIES:
        parts.identifiers, at = _fields(raw, at, 6)
    elif section == _APPLICATION_PROPERTIES:
        at = _application_properties(raw, at, parts.headers)
    elif section in (_DATA, _AMQP_VALUE) and parts.body is None:
        parts.body, at = _body(raw, at, section)
    else:
        raise _Unread(f"section 0x{section:02x} here")
    return at


def _read(
    raw: bytes,
    *,
    subscription_id: str,
    destination: str,
    ack_id: str,
    first_acquirer_marks_first: bool,
) -> Received:
    length = len(raw)
    at = 0
    parts = _Parts()
    while at < length:
        at = _section(raw, at, parts)
    if at != length:
        raise _Unread("a section that runs past the message")
    identifiers = parts.identifiers
    headers = parts.headers
    message_id = identifiers[0]
    # As ``_convert.received`` shows them: message-id, correlation-id, subject, reply-to.
    shown = (message_id, identifiers[5], identifiers[3], identifiers[4])
    for name, value in zip(_SHOWN, shown, strict=True):
        if value is None:
            continue
        if not isinstance(value, str):
            raise _Unread(f"a {name} that is not a string")
        if name not in headers:
            headers[name] = value
    return Received(
        subscription_id=subscription_id,
        destination=destination,
        body=parts.body or b"",
        headers=headers,
        message_id=message_id,
        ack_id=ack_id,
        redelivered=parts.delivery_count > 0
        or (first_acquirer_marks_first and not parts.first_acquirer),
    )


_SHOWN = ("message-id", "correlation-id", "subject", "reply-to")


def decode_received(
    raw: bytes,
    *,
    subscription_id: str,
    destination: str,
    ack_id: str,
    first_acquirer_marks_first: bool = False,
) -> Received:
    """The engine's view of the encoded message ``raw`` (see the module); raises what proton
    raises for a message it cannot decode."""
    try:
        return _read(
            raw,
            subscription_id=subscription_id,
            destination=destination,
            ack_id=ack_id,
            first_acquirer_marks_first=first_acquirer_marks_first,
        )
    except (_Unread, IndexError, struct.error, UnicodeDecodeError, ValueError, OverflowError):
        pass  # not a shape read here, or malformed: proton reads it (and raises if malformed)
    message = Message()
    message.decode(raw)
    return received(
        message,
        subscription_id=subscription_id,
        destination=destination,
        ack_id=ack_id,
        first_acquirer_marks_first=first_acquirer_marks_first,
    )
