"""What the spool keeps of a batch of deliveries, as an Arrow table built column by column.

The driver's one Python process receives every message, writes the ACKs and builds each
batch's spool file, and its interpreter time bounds the source's rate (docs/spark.md). So a
batch of deliveries becomes its table without an object per row: each column is one pass of
a builtin over the batch (a list of one attribute; the headers' keys and values chained into
two flat runs), and what is decided per row (the headers a delivery carries for itself
dropped, the ``timestamp`` header read, each row's broker) is Arrow's compute on whole
columns. Per row in Python there remain the message's attributes only.
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
_TIMESTAMP_KEY = pa.scalar("timestamp", type=pa.string())
_NO_TIME = pa.scalar(None, type=pa.int64())
_PLAIN_NUMBER = "^[0-9]{1,18}$"
"""Digits that fit an int64: every broker's ``timestamp``; anything else is parsed by
:func:`timestamp_ms` itself (a sign, spaces, underscores, other digits, too many)."""

_values = operator.methodcaller("values")  # any Mapping's, in the order of its keys


class Delivered(Protocol):
    """What the spool reads of a delivery (the shape of :class:`failover_client.Message`)."""

    @property
    def received(self) -> Received: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def session(self) -> object: ...


def spool_table(messages: Sequence[Delivered]) -> pa.Table:
    """``messages`` as rows of :data:`~failover_client.spark._spool.MESSAGE_SCHEMA`.

    Their headers without :data:`PER_DELIVERY_HEADERS`; ``timestamp`` from the ``timestamp``
    header (:func:`timestamp_ms`); ``broker`` the (redacted) address of the session that
    delivered each.
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
        pa.array([m.message_id for m in messages], type=pa.string()),
        _timestamps(stamps),
        pa.array([r.redelivered for r in received], type=pa.bool_()),
        _brokers([m.session for m in messages]),
    ]
    return pa.Table.from_arrays(columns, schema=MESSAGE_SCHEMA)


def _headers(headers: list[Mapping[str, str]]) -> tuple[pa.MapArray, pa.StringArray]:
    """The map column, and each row's ``timestamp`` header (null where it has none).

    Built from flat runs of every key and value and each row's count; the per-delivery
    headers are filtered out in Arrow.
    """
    keys = pa.array(list(itertools.chain.from_iterable(headers)), type=pa.string())
    values = pa.array(list(itertools.chain.from_iterable(map(_values, headers))), type=pa.string())
    offsets = _with_zero(pc.cumulative_sum(pa.array(list(map(len, headers)), type=pa.int32())))
    keep = pc.invert(pc.is_in(keys, value_set=_DROPPED))
    if pc.all(keep).as_py() is False:
        offsets = _entries_before(keep, offsets)
        keys, values = keys.filter(keep), values.filter(keep)
    # A row's keys are unique (a mapping's): where a row's run holds "timestamp", its value.
    stamp = pc.equal(keys, _TIMESTAMP_KEY)
    before = _entries_before(stamp, offsets)
    has = pc.not_equal(before.slice(1), before.slice(0, len(headers)))
    stamps = pc.replace_with_mask(
        pa.nulls(len(headers), type=pa.string()), has, values.filter(stamp)
    )
    return pa.MapArray.from_arrays(offsets, keys, values, type=_HEADERS), stamps


def _entries_before(chosen: pa.BooleanArray, offsets: pa.Int32Array) -> pa.Int32Array:
    """At each of ``offsets`` (into a flat run), how many entries before it are ``chosen``."""
    return pc.take(_with_zero(pc.cumulative_sum(pc.cast(chosen, pa.int32()))), offsets)


def _with_zero(ends: pa.Array) -> pa.Array:
    return pa.concat_arrays([pa.array([0], type=ends.type), ends])


def _timestamps(texts: pa.StringArray) -> pa.Array:
    """The ``timestamp`` headers in milliseconds (:func:`timestamp_ms` on each)."""
    plain = pc.match_substring_regex(texts, _PLAIN_NUMBER)
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
