"""Frame filters of the fault proxy: drop deliveries to the client, pass everything else.

``FaultProxy.drop_deliveries()`` makes a session deaf the way a stuck broker-side consumer or a
bridge that stopped forwarding does: the connection stays up, heart-beats, receipts and every
other frame flow, only the messages for the client's subscriptions never arrive. That needs the
proxy to know where frames begin and end in the byte stream from the broker, so each connection
has a filter that follows its frames from the first byte:

* :class:`StompDeliveryFilter`: STOMP frames (``COMMAND``, headers, a blank line, a body ended
  by NUL, or ``content-length`` bytes then NUL) and the EOLs between them (heart-beats). While
  dropping, ``MESSAGE`` frames are removed whole.
* :class:`AmqpDeliveryFilter`: AMQP 1.0 protocol headers (``AMQP`` + 4 bytes) and
  length-prefixed frames. While dropping, frames carrying the ``transfer`` performative are
  removed whole (dispositions, flows, empty heart-beat frames pass).

Both are pure: ``feed(chunk, drop=...)`` returns the bytes to forward now, for chunks split
at any point. A frame that begins while not dropping is forwarded as its bytes come; one that
begins while dropping is held only until its kind is known (its STOMP command line, the AMQP
performative's descriptor). A filter that meets bytes its protocol cannot start with (a proxy
in front of another protocol) stops filtering and passes everything through.
"""

from __future__ import annotations

import re
from typing import Protocol

__all__ = ["AmqpDeliveryFilter", "DeliveryFilter", "StompDeliveryFilter", "delivery_filter_for"]

_STOMP_COMMANDS = frozenset((b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR"))
"""What a STOMP server sends; anything else means the stream is not STOMP from a server."""
_LONGEST_COMMAND = max(map(len, _STOMP_COMMANDS)) + 1  # with a CR
_MAX_HEAD = 1 << 20
"""A STOMP command and headers longer than this are no STOMP a broker sends: stop filtering."""
_BLANK_LINE = re.compile(rb"\n\r?\n")
"""The end of a STOMP frame's headers (one search that stops at the first)."""
_AMQP_HEADER = b"AMQP"
_TRANSFER = 0x14
"""The descriptor code of the ``transfer`` performative."""


class DeliveryFilter(Protocol):
    """What the proxy asks of a filter (one per connection, for the broker-to-client bytes)."""

    def feed(self, data: bytes, *, drop: bool) -> bytes: ...

    @property
    def dropped(self) -> int: ...


def delivery_filter_for(scheme: str) -> DeliveryFilter | None:
    """The filter for a plain connection of ``scheme`` (None: TLS or unknown, not readable)."""
    if scheme == "stomp":
        return StompDeliveryFilter()
    if scheme == "amqp":
        return AmqpDeliveryFilter()
    return None


class _Frame:
    """The fate of the frame under way: pass, drop, or (None) held until its kind is known.

    A frame that starts while the filter is not dropping passes at once, byte by byte as it
    comes (nothing is held back from a client that is not being made deaf); one that starts
    while dropping is held only until its kind is known.
    """

    def __init__(self) -> None:
        self.drop: bool | None = False
        self.held = bytearray()

    def start(self, dropping: bool) -> None:
        self.drop = None if dropping else False
        self.held.clear()

    def emit(self, out: bytearray, chunk: bytes | bytearray) -> None:
        if self.drop is None:
            self.held += chunk
        elif not self.drop:
            out += chunk

    def decide(self, out: bytearray, drop: bool) -> None:
        if self.drop is None:
            self.drop = drop
            if not drop:
                out += self.held
            self.held.clear()


class StompDeliveryFilter:
    """Follows STOMP frames from a broker; removes ``MESSAGE`` frames begun while dropping."""

    def __init__(self) -> None:
        self._state = "between"  # between frames, in a frame's head, in its body
        self._head = bytearray()
        self._frame = _Frame()
        self._left: int | None = None
        """Body bytes left, its NUL included (content-length), or None: up to the next NUL."""
        self._through = False
        self.dropped = 0
        """Frames removed so far."""

    def feed(self, data: bytes, *, drop: bool) -> bytes:
        out = bytearray()
        i, n = 0, len(data)
        frame = self._frame
        while i < n:
            if self._through:
                out += data[i:]
                break
            if self._state == "between":
                j = i
                while j < n and data[j] in b"\r\n":  # heart-beats, and the EOLs after a frame
                    j += 1
                out += data[i:j]
                i = j
                if i < n:
                    self._state = "head"
                    self._head.clear()
                    frame.start(drop)
            elif self._state == "head":
                i = self._read_head(data, i, out)
            else:
                i = self._read_body(data, i, out)
        return bytes(out)

    def _read_head(self, data: bytes, i: int, out: bytearray) -> int:
        head = self._head
        before = len(head)
        # Only the head is copied (a chunk holds many frames): its end is searched in the
        # chunk, and across the cut in the head's last two bytes and the chunk's first three.
        end = None
        tail = bytes(head[-2:])
        if tail:
            across = _blank_line(tail + data[i : i + 3], 0)
            if across is not None:
                end = i + across[1] - len(tail)
        if end is None:
            within = _blank_line(data, i)
            end = None if within is None else within[1]
        taken = (len(data) if end is None else end) - i
        head += data[i : i + taken]
        blank = None if end is None else _blank_line(head, max(0, before - 2))
        frame = self._frame
        frame.emit(out, data[i : i + taken])
        line_end = head.find(b"\n")
        command = bytes(head[:line_end]).rstrip(b"\r") if line_end >= 0 else None
        if command is not None and command not in _STOMP_COMMANDS:
            self._through = True  # not a STOMP server's frame: stop filtering
        elif (command is None and len(head) > _LONGEST_COMMAND) or len(head) > _MAX_HEAD:
            self._through = True
        if self._through:
            frame.decide(out, False)
            return i + taken
        if command is not None:
            frame.decide(out, command == b"MESSAGE")
        if blank is not None:
            length = _content_length(bytes(head[line_end + 1 : blank[0]]))
            self._left = None if length is None else length + 1
            self._state = "body"
        return i + taken

    def _read_body(self, data: bytes, i: int, out: bytearray) -> int:
        n = len(data)
        if self._left is not None:
            take = min(self._left, n - i)
            self._left -= take
            done = self._left == 0
        else:
            nul = data.find(b"\x00", i)
            done = nul >= 0
            take = nul + 1 - i if done else n - i
        frame = self._frame
        frame.emit(out, data[i : i + take])
        if done:
            if frame.drop:
                self.dropped += 1
            self._state = "between"
        return i + take


def _blank_line(buf: bytes | bytearray, start: int) -> tuple[int, int] | None:
    """(end of the headers, start of the body) at the first blank line from ``start``."""
    found = _BLANK_LINE.search(buf, start)
    return None if found is None else (found.start(), found.end())


def _content_length(headers: bytes) -> int | None:
    for line in headers.split(b"\n"):
        name, _, value = line.rstrip(b"\r").partition(b":")
        if name == b"content-length":  # the first of repeated headers counts
            try:
                return int(value)
            except ValueError:
                return None
    return None


class AmqpDeliveryFilter:
    """Follows AMQP 1.0 frames from a broker; removes ``transfer`` frames begun while dropping."""

    def __init__(self) -> None:
        self._start = bytearray()
        """The first bytes of the protocol header or frame under way (as many as needed)."""
        self._left = 0
        """Bytes of the frame under way still to come (0: at the start of the next one)."""
        self._frame = _Frame()
        self._started = False
        self._through = False
        self.dropped = 0
        """Frames removed so far."""

    def feed(self, data: bytes, *, drop: bool) -> bytes:
        out = bytearray()
        i, n = 0, len(data)
        frame = self._frame
        while i < n:
            if self._through:
                out += data[i:]
                break
            if self._left:
                take = min(self._left, n - i)
                chunk = data[i : i + take]
                i += take
                self._left -= take
                if frame.drop is None:
                    self._start += chunk
                frame.emit(out, chunk)
                self._maybe_decide(out)
                if not self._left:
                    self._end_frame()
                continue
            if not self._start:
                frame.start(drop)
            take = min(8 - len(self._start), n - i)
            chunk = data[i : i + take]
            i += take
            self._start += chunk
            frame.emit(out, chunk)
            if len(self._start) < 8:
                continue
            if self._start[:4] == _AMQP_HEADER:  # a protocol header (SASL, then AMQP)
                frame.decide(out, False)
                self._started = True
                self._start.clear()
                continue
            size = int.from_bytes(self._start[:4], "big")
            if not self._started or size < 8:
                frame.decide(out, False)
                self._through = True  # not AMQP (or a stream we lost track of): pass it all
                continue
            self._left = size - 8
            self._maybe_decide(out)
            if not self._left:
                self._end_frame()
        return bytes(out)

    def _maybe_decide(self, out: bytearray) -> None:
        """Decide the frame under way once enough of it is known to tell a transfer."""
        frame = self._frame
        if frame.drop is not None:
            return
        start = self._start
        body = max(start[4] * 4, 8)
        if len(start) >= body + 10 or not self._left:
            frame.decide(out, _is_transfer(bytes(start)))

    def _end_frame(self) -> None:
        if self._frame.drop:
            self.dropped += 1
        self._start.clear()


def _is_transfer(frame: bytes) -> bool:
    """Whether an AMQP frame (not SASL) carries the ``transfer`` performative."""
    if frame[5] != 0:  # frame type 0: AMQP; 1: SASL
        return False
    body = frame[max(frame[4] * 4, 8) :]  # after the header (doff counts 4-byte words)
    if len(body) < 3 or body[0] != 0x00:  # an empty body is a heart-beat
        return False
    if body[1] == 0x53:  # smallulong descriptor
        return body[2] == _TRANSFER
    if body[1] == 0x80 and len(body) >= 10:  # ulong descriptor
        return int.from_bytes(body[2:10], "big") == _TRANSFER
    return False
