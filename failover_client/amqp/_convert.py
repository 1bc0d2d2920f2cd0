"""Between the engine's (body, headers) and an AMQP 1.0 message.

Outgoing: the body goes into one data section; the ``failover-message-id`` header becomes the
AMQP message-id *and* stays an application property (a consumer on any protocol, and the
engine's de-duplication, read it from there); ``persistent: false`` makes the message
non-durable (durable otherwise, as a STOMP send is persistent unless told not to be); every
other header becomes an application property.

Incoming: application properties become headers (stringified), the body bytes (a text body
UTF-8 encoded), and ``redelivered`` is true when the broker says the message was delivered
before: a delivery-count above zero or, from a broker known to mark first deliveries
(``first_acquirer_marks_first``), a first-acquirer flag that is false. RabbitMQ 3.10 leaves
delivery-count at 0 and marks only first deliveries first-acquirer; in general the flag cannot
tell (false is its default, which encoders leave out, and "may have been acquired before").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proton import Message

from failover_client.adapter import Received

__all__ = ["MESSAGE_ID_HEADER", "received", "to_message"]

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


def to_message(body: bytes, headers: Mapping[str, str]) -> Message:
    """The message to send for ``body`` and ``headers`` (see the module)."""
    properties = {str(k): str(v) for k, v in headers.items() if k != _PERSISTENT}
    durable = headers.get(_PERSISTENT, "true").strip().lower() != "false"
    message = Message(
        body=bytes(body), durable=durable, inferred=True, properties=properties or None
    )
    message_id = headers.get(MESSAGE_ID_HEADER)
    if message_id is not None:
        message.id = message_id
    return message


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
