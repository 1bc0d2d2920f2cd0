"""What an AMQP 1.0 broker says about itself in its open frame, made printable.

The open frame's connection properties are a map the broker fills as it likes: RabbitMQ sends
``product``, ``version``, ``platform``, ``cluster_name`` and more; Artemis and Qpid routers add
a ``failover-server-list``. Values arrive as proton's types (symbols, sized integers, lists,
maps). The probe prints scalars as text and describes a list or a map by its size: the server
list is shown parsed, as the adapter reports it to the engine, never as the raw map.

A broker is untrusted input: at most :data:`MAX_PROPERTIES` properties are kept, each value is
cut to :data:`MAX_VALUE` characters with control characters escaped, a password in a URL-like
value is starred out, and the value of a property whose name looks like a secret is hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from failover_client.uri import mask_same_length

__all__ = [
    "AMQP_VERSION",
    "MAX_PROPERTIES",
    "MAX_VALUE",
    "open_properties",
    "server_text",
]

AMQP_VERSION = "1.0"
"""The protocol version an AMQP open means (1.0 is the only one there is)."""

MAX_PROPERTIES = 32
MAX_VALUE = 120

_HIDDEN = "***"
_SECRET_NAME = re.compile(r"pass|secret|token|credential|private", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def open_properties(raw: Mapping[object, object]) -> dict[str, str]:
    """The open frame's properties as printable text, in the order the broker sent them."""
    shown: dict[str, str] = {}
    for key, value in raw.items():
        if len(shown) >= MAX_PROPERTIES:
            break
        name = _printable(str(key))
        shown[name] = _HIDDEN if _SECRET_NAME.search(name) else _value_text(value)
    return shown


def server_text(properties: Mapping[str, str]) -> str:
    """``product/version`` (the shape of a STOMP ``server`` header), or what there is of it."""
    product = properties.get("product", "")
    version = properties.get("version", "")
    if product and version:
        return f"{product}/{version}"
    return product or version


def _value_text(value: object) -> str:
    if isinstance(value, Mapping):
        return f"(map of {len(value)})"
    if isinstance(value, list | tuple):
        return f"(list of {len(value)})"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"({len(value)} bytes)"
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    # proton's sized numbers (ulong, uint...) and symbols subclass int and str, but print
    # their type name with their value.
    if isinstance(value, int):
        text = str(int(value))
    elif isinstance(value, str):
        text = str.__str__(value)
    else:
        text = str(value)
    return _printable(mask_same_length(text))


def _printable(text: str) -> str:
    """``text`` on one line and at most :data:`MAX_VALUE` characters long."""
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(escaped) > MAX_VALUE:
        return escaped[: MAX_VALUE - 3] + "..."
    return escaped
