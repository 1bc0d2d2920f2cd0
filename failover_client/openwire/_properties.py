"""The marshalled properties of a WireFormatInfo: ActiveMQ's "primitive map".

An int count, then per entry a modified-UTF-8 key and a typed value (a type byte, then the
value). The broker's own map holds booleans, longs, one int and strings; nested maps and lists
are refused here as the broker refuses them in the maps it reads (its depth limit is 0), and so
are maps of more than :data:`MAX_PROPERTIES` entries and values above :data:`MAX_VALUE_BYTES`.

Python values map onto the types like this: ``bool`` is BOOLEAN, ``int`` is LONG (every
number ActiveMQ reads from a client's WireFormatInfo is a ``Long``; an ``Integer`` there would
be a ``ClassCastException`` in the broker), ``float`` is DOUBLE, ``str`` is STRING, ``bytes``
is BYTE_ARRAY and ``None`` is NULL. Reading gives the same Python types back (SHORT, INTEGER
and BYTE as ``int``, CHAR as a one-character ``str``, FLOAT as ``float``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from ._wire import Reader, Writer

__all__ = ["MAX_PROPERTIES", "MAX_VALUE_BYTES", "PropertyValue", "read_map", "write_map"]

PropertyValue = bool | int | float | str | bytes | None

MAX_PROPERTIES = 64
"""Entries a WireFormatInfo's map may hold (the broker's own limit for what it reads)."""

MAX_VALUE_BYTES = 4096
"""Bytes one string or byte-array value may take (a broker's map holds short names and
versions; its platform details, the longest, are about 200 bytes)."""

_NULL, _BOOLEAN, _BYTE, _CHAR, _SHORT, _INTEGER, _LONG, _DOUBLE, _FLOAT = range(9)
_STRING, _BYTE_ARRAY, _MAP, _LIST, _BIG_STRING = 9, 10, 11, 12, 13
_NAMES = {_MAP: "map", _LIST: "list"}

_LONG_RANGE = range(-(1 << 63), 1 << 63)


def write_map(out: Writer, properties: Mapping[str, PropertyValue]) -> None:
    """``properties`` in insertion order; ValueError for a value that has no OpenWire type."""
    out.int32(len(properties))
    for name, value in properties.items():
        out.utf(name)
        _write_value(out, name, value)


def _write_value(out: Writer, name: str, value: PropertyValue) -> None:
    # bool before int: a bool is an int in Python.
    if value is None:
        out.byte(_NULL)
    elif isinstance(value, bool):
        out.byte(_BOOLEAN)
        out.boolean(value)
    elif isinstance(value, int):
        if value not in _LONG_RANGE:
            raise ValueError(f"property {name!r}: {value} does not fit a Java long")
        out.byte(_LONG)
        out.int64(value)
    elif isinstance(value, float):
        out.byte(_DOUBLE)
        out.float64(value)
    elif isinstance(value, str):
        out.byte(_STRING)
        out.utf(value)
    elif isinstance(value, bytes):
        out.byte(_BYTE_ARRAY)
        out.int32(len(value))
        out.raw(value)
    else:
        raise ValueError(f"property {name!r}: {type(value).__name__} has no OpenWire type")


def read_map(data: Reader, field: str) -> dict[str, PropertyValue] | None:
    """The map that starts at ``data``'s position; None for a null map (count -1)."""
    start = data.offset
    count = data.int32(field)
    if count < 0:
        return None
    if count > MAX_PROPERTIES:
        raise data.error(f"{count} entries exceed the limit of {MAX_PROPERTIES}", field, start)
    result: dict[str, PropertyValue] = {}
    for _ in range(count):
        name = data.utf(f"{field} key")
        result[name] = _read_value(data, f"{field}[{name[:40]!r}]")
    return result


def _sized(data: Reader, field: str, length: int, length_at: int) -> int:
    if length > MAX_VALUE_BYTES:
        raise data.error(
            f"a value of {length} bytes exceeds the limit of {MAX_VALUE_BYTES}", field, length_at
        )
    return length


_FIXED: dict[int, tuple[str, int]] = {
    _BYTE: (">b", 1),
    _SHORT: (">h", 2),
    _INTEGER: (">i", 4),
    _LONG: (">q", 8),
    _DOUBLE: (">d", 8),
    _FLOAT: (">f", 4),
}


def _read_value(data: Reader, field: str) -> PropertyValue:
    start = data.offset
    kind = data.byte(field)
    if kind in _FIXED:
        fmt, size = _FIXED[kind]
        number: int | float = struct.unpack(fmt, data.take(size, field))[0]
        return number
    if kind == _NULL:
        return None
    if kind == _BOOLEAN:
        return data.boolean(field)
    if kind == _CHAR:
        return chr(data.ushort(field))
    if kind in (_STRING, _BIG_STRING):
        length = data.ushort(field) if kind == _STRING else data.int32(field)
        return data.utf(field, _sized(data, field, length, start + 1))
    if kind == _BYTE_ARRAY:
        return data.take(_sized(data, field, data.int32(field), start + 1), field, start + 1)
    if kind in _NAMES:
        raise data.error(f"a nested {_NAMES[kind]} is not allowed here", field, start)
    raise data.error(f"unknown value type {kind}", field, start)
