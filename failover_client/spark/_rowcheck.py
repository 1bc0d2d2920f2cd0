"""What a broker refuses in a row, checked before the row is sent.

A STOMP broker parses some headers into typed message fields and ends the session when one
does not parse, or when a frame is over its limits: ActiveMQ reads ``priority`` and
``JMSXGroupSeq`` with ``Integer.parseInt``, ``expires`` and ``timestamp`` with
``Long.parseLong``, ``reply-to`` as a destination with a known prefix, and refuses a header line
over 10,240 bytes or more than 1,000 headers (``StompWireFormat``); RabbitMQ refuses a
``priority`` or ``expiration`` that is not a number, and a ``persistent`` that is not a
boolean. The failover connection then quarantines the frame only after two fail-overs
(``engine/_poison.py``), and all the broker's log says is why. Checking here costs a few
dictionary look-ups per row and turns that into a :class:`Refusal` that names the row, the
column and the rule, before anything is written.

The rules are the brokers' own (the tightest where they differ: JMS priority 0-9, not
RabbitMQ's 0-255). A refusal is not an exception: what it leads to is the sink's
``onRowError`` option (``_rowerrors``). Pure: no Spark, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from failover_client.engine._outbox import MESSAGE_ID_HEADER

__all__ = [
    "HEADER_RULES",
    "KNOWN_PREFIXES",
    "MAX_HEADERS",
    "MAX_HEADER_LINE",
    "RESERVED_HEADERS",
    "Refusal",
    "RowRules",
    "destination_rule",
]

KNOWN_PREFIXES = (
    "/queue/",
    "/topic/",
    "/temp-queue/",
    "/temp-topic/",
    "/remote-temp-queue/",
    "/remote-temp-topic/",
    "/exchange/",
    "/amq/queue/",
    "/reply-queue/",
)
"""Destination prefixes STOMP brokers give a meaning (ActiveMQ and RabbitMQ). Without one,
ActiveMQ and RabbitMQ create a queue of that literal name: a typo that loses rows silently."""

MAX_HEADER_LINE = 10_240
"""ActiveMQ's limit for one header line (``name:value``, in bytes, as encoded)."""

MAX_HEADERS = 990
"""ActiveMQ refuses more than 1,000 headers; the connection adds a few of its own."""

RESERVED_HEADERS = frozenset(
    {
        "content-length",
        "destination",
        "receipt",
        "transaction",
        "ack",
        "subscription",
        MESSAGE_ID_HEADER,
    }
)
"""Headers the connection writes itself (the frame's length, its destination, its receipt,
the row's id): a row setting one would contradict the frame, so it is refused."""

_MIME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*;.*)?$")


def _integer(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            return False
        return low <= int(text) <= high

    return check


_LONG = 2**63 - 1
_INT = 2**31 - 1

HEADER_RULES: Mapping[str, tuple[Callable[[str], bool], str]] = {
    "priority": (_integer(0, 9), "an integer 0-9 (JMS priority)"),
    "expires": (_integer(0, _LONG), "milliseconds since the epoch, an integer >= 0 (0: never)"),
    "expiration": (_integer(0, _LONG), "a time to live in milliseconds, an integer >= 0"),
    "timestamp": (_integer(0, _LONG), "milliseconds since the epoch, an integer >= 0"),
    "persistent": (lambda v: v in ("true", "false"), "true or false"),
    "content-type": (lambda v: bool(_MIME.match(v)), "a MIME type such as text/plain"),
    "JMSXGroupSeq": (_integer(-(2**31), _INT), "a 32-bit integer"),
    "AMQ_SCHEDULED_DELAY": (_integer(0, _LONG), "milliseconds, an integer >= 0"),
    "AMQ_SCHEDULED_PERIOD": (_integer(0, _LONG), "milliseconds, an integer >= 0"),
    "AMQ_SCHEDULED_REPEAT": (_integer(0, _INT), "an integer >= 0"),
}
"""Headers brokers parse into typed fields: the check and the rule it states."""


def destination_rule() -> str:
    """The rule a destination without a known prefix breaks, with the way out."""
    return (
        f"a destination starting with one of {', '.join(KNOWN_PREFIXES)} "
        "(or set allowAnyDestination=true)"
    )


@dataclass(frozen=True)
class Refusal:
    """A row the sink will not send as it is: which row, which column, which rule."""

    row: int
    """The row's index in its partition."""
    message_id: str
    column: str
    rule: str
    destination: str | None = None
    body: bytes | str = b""
    broker: bool = False
    """True when a broker refused the row (``rule`` is its reason), not the check here."""

    def __str__(self) -> str:
        row = (
            f"row {self.row} (id {self.message_id})" if self.row >= 0 else f"row {self.message_id}"
        )
        if self.broker:
            return f"{row}: refused by the broker: {self.rule}"
        return f"{row}: column {self.column} {self.rule}"


@dataclass(frozen=True)
class RowRules:
    """What the checks need to know beyond the rules: protocol, limits, the sink's options."""

    stomp: bool = True
    """Every broker of the URI speaks STOMP (destination prefixes and header rules apply);
    AMQP addresses are free-form and its properties typed by the client."""
    max_frame: int = 104_857_600
    """The URI's ``maxFrameSize`` (ActiveMQ's own default): header block and body, in bytes."""
    allow_null_body: bool = False
    allow_any_destination: bool = False

    def destination(self, value: str) -> str | None:
        """The rule ``value`` breaks as a destination, or None."""
        if not self.stomp or self.allow_any_destination:
            return None
        if value in KNOWN_PREFIXES:
            return f"= {_short(value)} is only a prefix; name the queue or topic after it"
        if value.startswith(KNOWN_PREFIXES):
            return None
        return f"= {_short(value)} is not {destination_rule()}"

    def headers(self, headers: Mapping[str, str]) -> tuple[str, str] | None:
        """(``column detail``, rule) for the first header a broker would refuse, or None."""
        if len(headers) > MAX_HEADERS:
            return ("", f"has {len(headers)} headers, more than the {MAX_HEADERS} brokers accept")
        for name, value in headers.items():
            broken = self._header(name, value)
            if broken is not None:
                return broken
        return None

    def _header(self, name: str, value: str) -> tuple[str, str] | None:
        if not name or "\0" in name or "\0" in value:
            return (f"key {name!r}", "is empty or holds NUL: header names and values may not")
        if name in RESERVED_HEADERS:
            return (f"key {name!r}", "is set by the connection; a row may not set it")
        line = len(name.encode()) + 1 + len(value.encode())
        if line > MAX_HEADER_LINE:
            return (f"key {name!r}", f"is {line} bytes, over the {MAX_HEADER_LINE}-byte line limit")
        rule = HEADER_RULES.get(name) if self.stomp else None
        if rule is not None and not rule[0](value):
            return (f"key {name!r} = {_short(value)}", f"must be {rule[1]}")
        if self.stomp and name == "reply-to" and not value.startswith(KNOWN_PREFIXES):
            return (f"key {name!r} = {_short(value)}", f"must be {destination_rule()}")
        return None

    def frame(self, body: bytes | str, headers: Mapping[str, str]) -> str | None:
        """The size rule the whole frame breaks, or None."""
        size = len(body.encode() if isinstance(body, str) else body)
        size += sum(len(k.encode()) + len(v.encode()) + 2 for k, v in headers.items())
        if size > self.max_frame:
            return f"is {size} bytes with headers, over maxFrameSize={self.max_frame}"
        return None


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")
