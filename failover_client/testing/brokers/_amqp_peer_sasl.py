"""The server side of AMQP SASL (ANONYMOUS and PLAIN) for the test peer.

proton's built-in SASL offers a server only ANONYMOUS and EXTERNAL (PLAIN needs Cyrus SASL,
which the wheels built here lack), so the peer runs the SASL layer itself, in front of a proton
transport that then sees a plain AMQP connection. :class:`SaslServer` takes the bytes a client
sends and returns what to answer; once the outcome is sent, whatever follows is the AMQP
connection, handed on untouched. Frames are encoded and decoded with proton's ``Data``.
"""

from __future__ import annotations

import hmac
import struct
from typing import Any, Final, Literal, cast

__all__ = ["AMQP_HEADER", "SASL_HEADER", "SaslServer", "SaslState"]

AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"
SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"

_SASL_FRAME = 1
_MECHANISMS = 0x40
_INIT = 0x41
_OUTCOME = 0x44
_INIT_NAME = "amqp:sasl-init:list"
_OK, _AUTH, _SYS = 0, 1, 2
_MAX_FRAME = 65536  # far above any sasl-init a client sends

SaslState = Literal["header", "init", "done", "failed"]


class SaslServer:
    """One client's SASL exchange. Not thread-safe (the peer thread owns it).

    ``credentials=None`` lets anyone in (ANONYMOUS, PLAIN with any password, or no SASL);
    otherwise only PLAIN with exactly ``(user, password)``.
    """

    def __init__(self, credentials: tuple[str, str] | None) -> None:
        self._credentials = credentials
        self._buffer = b""
        self.state: SaslState = "header"
        self.mechanism: str | None = None
        self.user: str | None = None
        self.problem: str | None = None

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Take bytes from the client; returns (bytes to answer, AMQP bytes that followed).

        Once ``state`` is ``failed`` the caller sends the answer and closes; once it is
        ``done`` every byte is AMQP.
        """
        if self.state == "done":
            return b"", data
        if self.state == "failed":
            return b"", b""
        self._buffer += data
        answer = self._header() if self.state == "header" else b""
        while self.state == "init" and (body := self._next_frame()) is not None:
            if not body:
                continue  # an empty frame keeps a connection alive
            code = self._check(body)
            answer += _frame(_encode(_OUTCOME, [_ubyte(code)]))
            self.state = "done" if code == _OK else "failed"
        rest = self._buffer if self.state == "done" else b""
        if self.state in ("done", "failed"):
            self._buffer = b""
        return answer, rest

    def _header(self) -> bytes:
        if len(self._buffer) < len(SASL_HEADER):
            return b""
        header = self._buffer[: len(SASL_HEADER)]
        if header == AMQP_HEADER and self._credentials is None:
            self.state = "done"  # a client that skips SASL, as an open broker allows
            return b""
        self._buffer = self._buffer[len(SASL_HEADER) :]
        if header != SASL_HEADER:
            self.problem = f"the client sent header {header!r}, not SASL"
            self.state = "failed"
            return SASL_HEADER
        self.state = "init"
        return SASL_HEADER + _frame(_encode(_MECHANISMS, [self._offer()]))

    def _next_frame(self) -> bytes | None:
        """The body of the next whole frame in the buffer; None until one is complete."""
        if len(self._buffer) < 8:
            return None
        size, doff, kind = struct.unpack_from(">IBB", self._buffer)
        if size > _MAX_FRAME or size < 8 or doff < 2 or kind != _SASL_FRAME:
            self.problem = f"bad SASL frame (size {size}, type {kind})"
            self.state = "failed"
            return None
        if len(self._buffer) < size:
            return None
        body, self._buffer = self._buffer[doff * 4 : size], self._buffer[size:]
        return body

    def _offer(self) -> object:
        from proton import UNDESCRIBED, Array, Data, symbol  # noqa: PLC0415 - optional

        names = ("PLAIN",) if self._credentials is not None else ("ANONYMOUS", "PLAIN")
        return Array(cast("Any", UNDESCRIBED), Data.SYMBOL, *(symbol(n) for n in names))

    def _check(self, body: bytes) -> int:
        """The outcome code for a sasl-init frame."""
        init = _decode_init(body)
        if init is None:
            self.problem = "the client's SASL frame is not a sasl-init"
            return _SYS
        self.mechanism, response = init
        self.problem = self._refusal(self.mechanism, response)
        return _OK if self.problem is None else _AUTH

    def _refusal(self, mechanism: str, response: bytes) -> str | None:
        """Why the client may not come in; None lets it in."""
        if mechanism == "ANONYMOUS" and self._credentials is None:
            self.user = "anonymous"
            return None
        if mechanism != "PLAIN":
            return f"mechanism {mechanism[:40]!r} is not offered"
        parts = response.split(b"\0")
        if len(parts) != 3:
            return "a PLAIN response needs authzid, user and password"
        self.user = parts[1].decode("utf-8", "replace")
        if self._credentials is None:
            return None
        user, password = (c.encode() for c in self._credentials)
        # Both compared, always: which one was wrong is not the client's business.
        same = hmac.compare_digest(parts[1], user) & hmac.compare_digest(parts[2], password)
        return None if same else f"wrong user or password for {self.user[:40]!r}"


def _decode_init(body: bytes) -> tuple[str, bytes] | None:
    """(mechanism, initial response) of a sasl-init frame body; None if it is not one."""
    from proton import Data, DataException, Described  # noqa: PLC0415 - optional

    data = Data()
    try:
        data.decode(body)
        data.rewind()
        data.next()
        frame = data.get_object()
    except DataException:
        return None
    if not (
        isinstance(frame, Described)
        and frame.descriptor in (_INIT, _INIT_NAME)
        and isinstance(frame.value, list)
        and frame.value
        and isinstance(frame.value[0], str)
    ):
        return None
    response = frame.value[1] if len(frame.value) > 1 else None
    return str(frame.value[0]), bytes(response) if isinstance(response, bytes | memoryview) else b""


def _ubyte(value: int) -> object:
    from proton import ubyte  # noqa: PLC0415 - optional, see the package doc

    return ubyte(value)


def _encode(code: int, fields: list[object]) -> bytes:
    from proton import Data, Described, ulong  # noqa: PLC0415 - optional

    data = Data()
    data.put_object(Described(ulong(code), cast("Any", fields)))
    return bytes(data.encode())


def _frame(body: bytes) -> bytes:
    """A SASL frame: size, data offset 2 (words), type 1, channel 0, then the body."""
    return struct.pack(">IBBH", 8 + len(body), 2, _SASL_FRAME, 0) + body
