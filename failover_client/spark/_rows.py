"""What the spool keeps of a batch of deliveries, as an Arrow table built column by column.

The driver's one Python process receives every message, writes the ACKs and builds each
batch's spool file, and its interpreter time bounds the source's rate (docs/spark.md). So a
batch of deliveries becomes its table without an object per row: each column is one pass of
a builtin over the batch (a list of one attribute; the headers' keys and values chained into
two flat runs), and what is decided per row (the headers a delivery carries for itself
dropped, the ``timestamp`` header read, each row's broker) is Arrow's compute on whole
columns. Per row in Python there remain the message's attributes only.

Few Arrow calls, each on a whole column: a compute call lets go of the interpreter lock, and
in the driver the receiving and acknowledging threads may then hold it for a switch interval
before it comes back (measured: with two busy threads beside it, the same table took 584 ms
of wall time built with two dozen such calls, 319 ms with about eight; 64 and 61 ms of its own
CPU). Reading each row's ``timestamp`` header in Python costs less than finding it in Arrow.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import Protocol

# pyarrow ships no type information; everything from it is Any to mypy.
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from failover_client.adapter import Received
from failover_client.spark._spool import MESSAGE_SCHEMA

__all__ = ["PER_DELIVERY_HEADERS", "Delivered", "spool_table", "timestamp_ms"]

PER_DELIVERY_HEADERS = frozenset({"ack", "subscription", "content-length"})
"""STOMP headers that describe one delivery, not the message: left out of ``headers``."""

_SECONDS_BEFORE = 10**11
"""A ``timestamp`` below this is in seconds (RabbitMQ), else milliseconds (ActiveMQ, Artemis)."""

_INT64_MAX = 2**63 - 1

_DROPPED = pa.array(sorted(PER_DELIVERY_HEADERS), type=pa.string())
_HEADERS = MESSAGE_SCHEMA.field("headers").type
_TIMESTAMP = MESSAGE_SCHEMA.field("timestamp").type
_ZERO = pa.array([0], type=pa.int32())
_NO_TIME = pa.scalar(None, type=pa.int64())
_PLAIN_NUMBER = "^[0-9]{1,18}$"
"""Digits that fit an int64: every broker's ``timestamp``; anything else is parsed by
:func:`timestamp_ms` itself (a sign, spaces, underscores, other digits, too many)."""

_values = operator.methodcaller("values")  # any Mapping's, in the order of its keys
_timestamp_header = operator.methodcaller("get", "timestamp")


class Delivered(Protocol):
    """What the spool reads of a delivery (the shape of :class:`failover_client.Message`)."""

    @property
    def received(self) -> Received: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def session(self) -> object: ...


def spool_table(messages: Sequence[Delivered], ids: Sequence[str | None] | None = None) -> pa.Table:
    """``messages`` as rows of :data:`~failover_client.spark._spool.MESSAGE_SCHEMA`.

    Their headers without :data:`PER_DELIVERY_HEADERS`; ``timestamp`` from the ``timestamp``
    header (:func:`timestamp_ms`); ``broker`` the (redacted) address of the session that
    delivered each. ``ids``: their ``message_id`` s, when the caller read them already.
    """
    # One list per attribute: a comprehension of one attribute is the cheapest pass over
    # Python objects there is (cheaper than one loop appending to six lists, or a transpose).
    # Body, headers, destination and flag are read from what the adapter delivered: a
    # message's properties forward to it, and a property costs a call, a field does not.
    received = [m.received for m in messages]
    headers, stamps = _headers([r.headers for r in received])
    columns = [
        pa.array([r.body for r in received], type=pa.binary()),
        headers,
        pa.array([r.destination for r in received], type=pa.string()),
        pa.array([m.message_id for m in messages] if ids is None else ids, type=pa.string()),
        _timestamps(stamps),
        pa.array([r.redelivered for r in received], type=pa.bool_()),
        _brokers([m.session for m in messages]),
    ]
    return pa.Table.from_arrays(columns, schema=MESSAGE_SCHEMA)


def _headers(headers: list[Mapping[str, str]]) -> tuple[pa.MapArray, pa.StringArray]:
    """The map column, and each row's ``timestamp`` header (null where it has none).

    Built from flat runs of every key and value and each row's count; the per-delivery
    headers are filtered out in Arrow, only when a row has one.
    """
    keys = pa.array(list(itertools.chain.from_iterable(headers)), type=pa.string())
    values = pa.array(list(itertools.chain.from_iterable(map(_values, headers))), type=pa.string())
    offsets = pa.array(list(itertools.accumulate(map(len, headers), initial=0)), type=pa.int32())
    dropped = pc.is_in(keys, value_set=_DROPPED)
    if pc.any(dropped).as_py():
        keep = pc.invert(dropped)
        # Each row's end in the kept entries: how many were kept before its end in all.
        kept = pc.cumulative_sum(pc.cast(keep, pa.int32()))
        offsets = pc.take(pa.concat_arrays([_ZERO, kept]), offsets)
        keys, values = keys.filter(keep), values.filter(keep)
    stamps = pa.array(list(map(_timestamp_header, headers)), type=pa.string())
    return pa.MapArray.from_arrays(offsets, keys, values, type=_HEADERS), stamps


def _timestamps(texts: pa.StringArray) -> pa.Array:
    """The ``timestamp`` headers in milliseconds (:func:`timestamp_ms` on each)."""
    plain = pc.match_substring_regex(texts, _PLAIN_NUMBER)
    if pc.all(plain).as_py():
        number = pc.cast(texts, pa.int64())
        least = pc.min(number).as_py()
        if least is None or least >= _SECONDS_BEFORE:
            return number.cast(_TIMESTAMP)  # milliseconds every one (or none at all): as written
    number = pc.cast(pc.if_else(plain, texts, None), pa.int64())
    millis = pc.if_else(pc.less(number, _SECONDS_BEFORE), pc.multiply(number, 1000), number)
    millis = pc.if_else(pc.greater(number, 0), millis, _NO_TIME)
    odd = pc.and_(pc.invert(plain), pc.is_valid(texts))
    if pc.any(odd).as_py():
        parsed = [timestamp_ms(text) for text in pc.filter(texts, odd).to_pylist()]
        millis = pc.replace_with_mask(millis, odd, pa.array(parsed, type=pa.int64()))
    return millis.cast(_TIMESTAMP)


def _brokers(sessions: list[object]) -> pa.Array:
    """Each row's broker: the redacted address of its session, worked out once per session."""
    # The session is the engine's slot (the same object for every message it delivered):
    # usually one for a whole batch, a few around a fail-over.
    ids = list(map(id, sessions))
    if not ids or ids.count(ids[0]) == len(ids):
        name = _broker(sessions[0]) if sessions else None
        return pa.repeat(pa.scalar(name, type=pa.string()), len(sessions))
    codes: dict[int, int] = {}
    rows = [codes.setdefault(i, len(codes)) for i in ids]
    names = [_broker(s) for s in dict(zip(ids, sessions, strict=True)).values()]
    return pc.take(pa.array(names, type=pa.string()), pa.array(rows, type=pa.int32()))


def _broker(session: object) -> str | None:
    named = getattr(session, "broker", None)
    return None if named is None else str(named)


def timestamp_ms(text: str | None) -> int | None:
    """The broker's ``timestamp`` header in milliseconds since the epoch (None if absent).

    None too for what is no positive integer, or lies beyond what Arrow's timestamps hold.
    """
    if not text:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None
    if value <= 0:
        return None
    millis = value * 1000 if value < _SECONDS_BEFORE else value
    return millis if millis <= _INT64_MAX else None
