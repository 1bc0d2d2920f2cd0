"""The spool's rows one message at a time: the reference the column-built table is held to.

This is how the source built a batch's table before ``spark._rows.spool_table``: one named
tuple per delivery (headers filtered in a dict, the timestamp parsed per row), then one Arrow
array per field. The tests use it to write spool files from plain values, and to check that
the fast path builds the same table; ``benchmarks/bench_spool_table.py`` times the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

import pyarrow as pa

from failover_client.spark._rows import PER_DELIVERY_HEADERS, timestamp_ms
from failover_client.spark._spool import MESSAGE_SCHEMA

_TIMESTAMP = MESSAGE_SCHEMA.field("timestamp").type


class Delivered(Protocol):
    """A delivery as ``failover_client.Message`` shows it."""

    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def destination(self) -> str: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def redelivered(self) -> bool: ...
    @property
    def session(self) -> object: ...


class SpooledMessage(NamedTuple):
    """A received message as the spool stores it (no connection, no ack handle)."""

    body: bytes
    headers: Mapping[str, str]
    destination: str
    message_id: str | None
    timestamp_ms: int | None
    redelivered: bool
    broker: str | None


def rows_of(messages: Sequence[Delivered]) -> list[SpooledMessage]:
    """What the spool keeps of deliveries, one row each."""
    brokers: dict[int, str | None] = {}
    rows = []
    for message in messages:
        session = message.session
        broker = brokers.get(id(session), "")
        if broker == "":
            named = getattr(session, "broker", None)
            broker = brokers[id(session)] = None if named is None else str(named)
        headers = {k: v for k, v in message.headers.items() if k not in PER_DELIVERY_HEADERS}
        rows.append(
            SpooledMessage(
                body=message.body,
                headers=headers,
                destination=message.destination,
                message_id=message.message_id,
                timestamp_ms=timestamp_ms(headers.get("timestamp")),
                redelivered=message.redelivered,
                broker=broker,
            )
        )
    return rows


def table_of(messages: Sequence[SpooledMessage]) -> pa.Table:
    """Rows as a table of ``MESSAGE_SCHEMA`` (what ``Spool.write`` takes)."""
    keys: list[str] = []
    values: list[str] = []
    ends = [0]
    for message in messages:
        keys += message.headers.keys()
        values += message.headers.values()
        ends.append(len(keys))
    headers = pa.MapArray.from_arrays(
        pa.array(ends, type=pa.int32()),
        pa.array(keys, type=pa.string()),
        pa.array(values, type=pa.string()),
        type=MESSAGE_SCHEMA.field("headers").type,
    )
    columns = [
        pa.array([m.body for m in messages], type=pa.binary()),
        headers,
        pa.array([m.destination for m in messages], type=pa.string()),
        pa.array([m.message_id for m in messages], type=pa.string()),
        pa.array([m.timestamp_ms for m in messages], type=pa.int64()).cast(_TIMESTAMP),
        pa.array([m.redelivered for m in messages], type=pa.bool_()),
        pa.array([m.broker for m in messages], type=pa.string()),
    ]
    return pa.Table.from_arrays(columns, schema=MESSAGE_SCHEMA)
