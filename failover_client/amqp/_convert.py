"""Between the engine's (body, headers) and an AMQP 1.0 message.

Outgoing: the body goes into one data section; the ``failover-message-id`` header becomes the
AMQP message-id *and* stays an application property (a consumer on any protocol, and the
engine's de-duplication, read it from there); ``persistent: false`` makes the message
non-durable (durable otherwise, as a STOMP send is persistent unless told not to be); every
other header becomes an application property.

:func:`encode_message` writes those bytes directly rather than through a proton
:class:`~proton.Message`: building one and encoding it cost about 20 µs a message (a C message
object, its data trees, and an encode retried with a buffer doubled from 16 bytes), more than
the rest of a send; this fixed shape takes ``struct`` a few µs. The bytes are the ones proton
writes for the same message (``tests/test_amqp_encode.py`` compares them), so a broker cannot
tell the two apart.

Incoming: application properties become headers (stringified), the body bytes (a text body
UTF-8 encoded), and ``redelivered`` is true when the broker says the message was delivered
before: a delivery-count above zero or, from a broker known to mark first deliveries
(``first_acquirer_marks_first``), a first-acquirer flag that is false. RabbitMQ 3.10 leaves
delivery-count at 0 and marks only first deliveries first-acquirer; in general the flag cannot
tell (false is its default, which encoders leave out, and "may have been acquired before").
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from proton import Message

from failover_client.adapter import Received

__all__ = ["MESSAGE_ID_HEADER", "encode_message", "received"]

MESSAGE_ID_HEADER = "failover-message-id"
"""The engine's message id header (``failover_client.engine``'s outbox sets it)."""

_PERSISTENT = "persistent"

_STANDARD = (
    ("message-id", "id"),
    ("correlation-id", "correlation_id"),
    ("subject", "subject"),
    ("reply-to", "reply_to"),
)
"""AMQP properties shown as headers of a received message, unless a property has the name.

Not the content type: proton reports an absent one as the symbol ``None``."""

# A described section: 0x00, the descriptor as a small ulong (0x53 and the code), the value.
_HEADER_DURABLE = b"\x00\x53\x70\xc0\x02\x01\x41"  # header: list8 [durable=true]
_HEADER_TRANSIENT = b"\x00\x53\x70\x45"  # header: list0 (durable defaults to false)
_NO_PROPERTIES = b"\x00\x53\x73\x45"  # properties: list0
_PROPERTIES = b"\x00\x53\x73"
_APPLICATION_PROPERTIES = b"\x00\x53\x74"
_DATA = b"\x00\x53\x75"

_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_LIST8 = struct.Struct(">BBB")  # constructor, size, count
_LIST32 = struct.Struct(">BII")
_MAP32 = struct.Struct(">BII")  # proton writes every map with 4-byte size and count


def encode_message(body: bytes, headers: Mapping[str, str]) -> bytes:
    """The AMQP encoding of ``body`` and ``headers`` (see the module for the mapping)."""
    parts: list[bytes] = []
    persistent = headers.get(_PERSISTENT)
    durable = persistent is None or str(persistent).strip().lower() != "false"
    parts.append(_HEADER_DURABLE if durable else _HEADER_TRANSIENT)
    message_id = headers.get(MESSAGE_ID_HEADER)
    if message_id is None:
        parts.append(_NO_PROPERTIES)
    else:
        item = _string(str(message_id))
        parts.append(_PROPERTIES)
        parts.append(_list((item,)))
    entries: list[bytes] = []
    for key, value in headers.items():
        if key != _PERSISTENT:
            entries.append(_string(str(key)))
            entries.append(_string(str(value)))
    if entries:
        payload = b"".join(entries)
        parts.append(_APPLICATION_PROPERTIES)
        # size counts the count field (4 bytes) and the entries; count is keys plus values.
        parts.append(_MAP32.pack(0xD1, len(payload) + 4, len(entries)))
        parts.append(payload)
    parts.append(_DATA)
    data = bytes(body)
    if len(data) <= 0xFF:
        parts.append(b"\xa0" + _U8.pack(len(data)))
    else:
        parts.append(b"\xb0" + _U32.pack(len(data)))
    parts.append(data)
    return b"".join(parts)


def received(
    message: Message,
    *,
    subscription_id: str,
    destination: str,
    ack_id: str,
    first_acquirer_marks_first: bool = False,
) -> Received:
    """A decoded message as the engine sees it (see the module for ``redelivered``)."""
    headers: dict[str, str] = {}
    properties: dict[Any, Any] = message.properties or {}
    for key, value in properties.items():
        headers[str(key)] = _text(value)
    for name, attribute in _STANDARD:
        value = getattr(message, attribute)
        if value is not None and name not in headers:
            headers[name] = _text(value)
    redelivered = message.delivery_count > 0 or (
        first_acquirer_marks_first and not message.first_acquirer
    )
    return Received(
        subscription_id=subscription_id,
        destination=destination,
        body=_body(message.body),
        headers=headers,
        message_id=None if message.id is None else _text(message.id),
        ack_id=ack_id,
        redelivered=redelivered,
    )


def _body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    # An amqp-value of another type (a map, a number) from a foreign producer: its text.
    return str(body).encode("utf-8")


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) <= 0xFF:
        return b"\xa1" + _U8.pack(len(raw)) + raw
    return b"\xb1" + _U32.pack(len(raw)) + raw


def _list(items: tuple[bytes, ...]) -> bytes:
    payload = b"".join(items)
    if len(payload) + 1 <= 0xFF:  # size counts the 1-byte count field
        return _LIST8.pack(0xC0, len(payload) + 1, len(items)) + payload
    return _LIST32.pack(0xD0, len(payload) + 4, len(items)) + payload
