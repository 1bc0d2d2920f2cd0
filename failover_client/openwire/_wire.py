"""OpenWire's primitive encoding: big-endian numbers, Java's modified UTF-8, size-prefixed frames.

What ActiveMQ's ``DataInput`` / ``DataOutput`` streams do, and nothing more: every command of
:mod:`._commands` is built from these reads and writes. Only *loose* encoding is spoken (no
tight-encoding bit stream, no marshal cache), which the client's WireFormatInfo asks for and
every ActiveMQ broker accepts.

Nothing read is trusted. A :class:`Reader` checks every length against the bytes that are
really left before it allocates or slices, and :class:`FrameReader` refuses a size prefix that
is negative or above its limit before it buffers a byte of the frame. Every failure is a
:class:`CodecError` naming the command, the field and the offset of the problem (counted from
the frame's type byte, the first byte after the 4-byte size prefix).

Strings are Java's modified UTF-8 (``DataOutput.writeUTF``): a 2-byte length, NUL written as
``C0 80`` and characters outside the Basic Multilingual Plane as two 3-byte surrogates. Plain
4-byte UTF-8 is accepted too when reading; anything else that is not UTF-8 is an error.
"""

from __future__ import annotations

import struct

from failover_client._errors import CodecError

__all__ = [
    "MAX_CONTROL_FRAME",
    "CodecError",
    "FrameReader",
    "Reader",
    "Writer",
    "decode_modified_utf8",
    "encode_modified_utf8",
    "frame",
]

MAX_CONTROL_FRAME = 1 << 20
"""Bytes one inbound frame may hold on a control channel (1 MiB). What a control channel reads
(WireFormatInfo, BrokerInfo, ConnectionControl, responses) is a few hundred bytes; a larger
frame is not what it waits for, so it is refused before it is buffered."""

_MAX_UTF = 0xFFFF  # a 2-byte length


def encode_modified_utf8(text: str) -> bytes:
    """``text`` as Java's ``writeUTF`` encodes it (without the length)."""
    if text.isascii() and "\0" not in text:
        return text.encode("ascii")
    # Java strings are UTF-16: a character outside the BMP is two surrogates, each encoded
    # on its own as three bytes.
    units = text.encode("utf-16-be", "surrogatepass")
    chars = "".join(chr(int.from_bytes(units[i : i + 2], "big")) for i in range(0, len(units), 2))
    return chars.encode("utf-8", "surrogatepass").replace(b"\0", b"\xc0\x80")


def decode_modified_utf8(raw: bytes) -> str:
    """The text of Java-encoded ``raw``; UnicodeDecodeError (a ValueError) when it is not."""
    if raw.isascii():
        return raw.decode("ascii")
    # C0 never occurs in UTF-8, so replacing its one legal modified form cannot shift others.
    text = raw.replace(b"\xc0\x80", b"\0").decode("utf-8", "surrogatepass")
    if any("\ud800" <= c <= "\udfff" for c in text):
        # Pair the surrogates up; a lone one has no meaning and fails here.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    return text


class Reader:
    """Reads one frame's fields in order; every read checks the bytes that are left."""

    def __init__(self, data: bytes, command: str) -> None:
        self._data = data
        self._pos = 0
        self.command = command

    @property
    def offset(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def error(self, problem: str, field: str | None, offset: int | None = None) -> CodecError:
        return CodecError(
            problem,
            command=self.command,
            field=field,
            offset=self._pos if offset is None else offset,
        )

    def take(self, count: int, field: str, length_at: int | None = None) -> bytes:
        """The next ``count`` bytes; errors name ``length_at``, where the length was read."""
        if count < 0:
            raise self.error(f"length {count} is negative", field, length_at)
        if count > self.remaining:
            raise self.error(
                f"needs {count} bytes, the frame has {self.remaining} left", field, length_at
            )
        start = self._pos
        self._pos += count
        return self._data[start : self._pos]

    def _unpack(self, fmt: str, size: int, field: str) -> int:
        value: int = struct.unpack(fmt, self.take(size, field))[0]
        return value

    def byte(self, field: str) -> int:
        return self._unpack(">b", 1, field)

    def boolean(self, field: str) -> bool:
        # DataInput.readBoolean: any byte but 0 is true.
        return self.take(1, field) != b"\0"

    def short(self, field: str) -> int:
        return self._unpack(">h", 2, field)

    def ushort(self, field: str) -> int:
        return self._unpack(">H", 2, field)

    def int32(self, field: str) -> int:
        return self._unpack(">i", 4, field)

    def int64(self, field: str) -> int:
        return self._unpack(">q", 8, field)

    def float32(self, field: str) -> float:
        value: float = struct.unpack(">f", self.take(4, field))[0]
        return value

    def float64(self, field: str) -> float:
        value: float = struct.unpack(">d", self.take(8, field))[0]
        return value

    def utf(self, field: str, length: int | None = None) -> str:
        """A modified-UTF-8 string: ``length`` bytes, or a 2-byte length first."""
        start = self._pos
        if length is None:
            length = self.ushort(field)
        raw = self.take(length, field, start)
        try:
            return decode_modified_utf8(raw)
        except UnicodeDecodeError as exc:
            raise self.error(
                f"string is not UTF-8 ({exc.reason} at byte {exc.start})", field, start
            ) from None

    def string(self, field: str) -> str | None:
        """A nullable string: a presence flag, then :meth:`utf`."""
        return self.utf(field) if self.boolean(field) else None

    def byte_array(self, field: str) -> bytes | None:
        """A nullable byte array: a presence flag, a 4-byte length, the bytes."""
        if not self.boolean(field):
            return None
        start = self._pos
        return self.take(self.int32(field), field, start)

    def finish(self) -> None:
        """The frame must end here: left-over bytes mean the fields were misread."""
        if self.remaining:
            raise self.error(f"{self.remaining} bytes left over after the last field", None)


class Writer:
    """Builds one frame's body (type byte and fields)."""

    def __init__(self) -> None:
        self._out = bytearray()

    def byte(self, value: int) -> None:
        self._out += struct.pack(">b", value)

    def boolean(self, value: bool) -> None:
        self._out.append(1 if value else 0)

    def short(self, value: int) -> None:
        self._out += struct.pack(">h", value)

    def ushort(self, value: int) -> None:
        self._out += struct.pack(">H", value)

    def int32(self, value: int) -> None:
        self._out += struct.pack(">i", value)

    def int64(self, value: int) -> None:
        self._out += struct.pack(">q", value)

    def float64(self, value: float) -> None:
        self._out += struct.pack(">d", value)

    def raw(self, data: bytes) -> None:
        self._out += data

    def utf(self, text: str) -> None:
        data = encode_modified_utf8(text)
        if len(data) > _MAX_UTF:
            raise ValueError(
                f"a string of {len(data)} encoded bytes does not fit OpenWire's 64 KiB"
            )
        self.ushort(len(data))
        self._out += data

    def string(self, text: str | None) -> None:
        self.boolean(text is not None)
        if text is not None:
            self.utf(text)

    def byte_array(self, data: bytes | None) -> None:
        self.boolean(data is not None)
        if data is not None:
            self.int32(len(data))
            self._out += data

    def getvalue(self) -> bytes:
        return bytes(self._out)


def frame(body: bytes) -> bytes:
    """``body`` (type byte and fields) with its 4-byte size prefix."""
    return struct.pack(">i", len(body)) + body


class FrameReader:
    """Cuts a byte stream into frames (without their size prefix), refusing oversize ones.

    ``feed`` takes what a socket read returned and gives back the frames it completed. A size
    prefix that is negative, zero (a frame holds at least its type byte) or above ``limit``
    raises :class:`CodecError` at once, before any of the frame is kept.
    """

    def __init__(self, limit: int = MAX_CONTROL_FRAME) -> None:
        if limit < 1:
            raise ValueError(f"frame limit must be >= 1, got {limit}")
        self.limit = limit
        self._buffer = bytearray()
        self._need: int | None = None  # size of the frame being read, once its prefix is in
        self.frames = 0
        """Frames completed so far (for error messages and tests)."""

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        out: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buffer) < 4:
                    return out
                size = struct.unpack_from(">i", self._buffer)[0]
                if size < 1 or size > self.limit:
                    problem = (
                        f"size prefix {size} is not a frame size"
                        if size < 1
                        else f"a frame of {size} bytes exceeds the limit of {self.limit} bytes"
                    )
                    raise CodecError(
                        f"{problem} (frame #{self.frames + 1})", command="frame", field="size"
                    )
                del self._buffer[:4]
                self._need = size
            if len(self._buffer) < self._need:
                return out
            out.append(bytes(self._buffer[: self._need]))
            del self._buffer[: self._need]
            self._need = None
            self.frames += 1
