"""Rows to messages: body, destination, headers and a deterministic id per row.

The id is what makes at-least-once bearable: a row sent twice (a retried task, a replayed
batch, a fail-over that re-sends an unconfirmed message) carries the same id every time, so a
consumer, or the broker itself (Artemis ``_AMQ_DUPL_ID``), can drop the copy. It is the user's
id column when there is one; otherwise ``<prefix>-<row index>``, where the prefix names the
query, batch and partition (see ``_task``) and the index counts the partition's rows in the
order Spark hands them over, which a retry or replay of the same input repeats.

Two inputs, one result: Spark rows (tuples, for PySpark's row writers and ``foreachPartition``)
and Arrow record batches (the Arrow writers), read column by column. Pure: no Spark, no
pyarrow import (a record batch is used through the two methods below), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from failover_client._errors import RowError
from failover_client.spark._layout import RowLayout
from failover_client.spark._options import ARTEMIS_DUPLICATE_HEADER, SinkOptions
from failover_client.spark._rowcheck import Refusal, RowRules
from failover_client.uri import parse

__all__ = [
    "ColumnBatch",
    "MessageShape",
    "Outgoing",
    "PartitionMessages",
    "Refusal",
    "RowError",
    "rules_of",
]


class Outgoing(NamedTuple):
    """One message, ready for ``FailoverConnection.send_async``."""

    destination: str
    body: bytes | str
    headers: dict[str, str]
    message_id: str


class _Column(Protocol):
    def to_pylist(self) -> list[Any]: ...


class ColumnBatch(Protocol):
    """What the Arrow writers receive (``pyarrow.RecordBatch``), as far as we use it."""

    @property
    def num_rows(self) -> int: ...

    def column(self, i: int) -> _Column: ...


@dataclass(frozen=True)
class MessageShape:
    """Everything needed to make messages from rows; built on the driver, pickled to tasks."""

    layout: RowLayout
    destination: str | None
    destination_column: str | None
    message_id_column: str | None
    persistent: bool
    duplicate_header: str | None
    rules: RowRules = field(default_factory=RowRules)
    body_column: str = "value"
    headers_column: str | None = None

    @classmethod
    def of(cls, options: SinkOptions, layout: RowLayout) -> MessageShape:
        return cls(
            layout=layout,
            destination=options.destination,
            destination_column=options.destination_column,
            message_id_column=options.message_id_column,
            persistent=options.persistent,
            duplicate_header=(
                ARTEMIS_DUPLICATE_HEADER if options.duplicate_detection == "artemis" else None
            ),
            rules=rules_of(options),
            body_column=options.body_column,
            headers_column=options.headers_column,
        )


def rules_of(options: SinkOptions) -> RowRules:
    """The row checks for ``options``: STOMP rules when every broker speaks STOMP."""
    target = parse(options.uri)
    return RowRules(
        stomp=all(member.protocol == "stomp" for member in target.members),
        max_frame=target.options.max_frame_size,
        allow_null_body=options.allow_null_body,
        allow_any_destination=options.allow_any_destination,
    )


class PartitionMessages:
    """Turns one partition's input into messages, numbering its rows for generated ids.

    ``prefix`` is the id prefix of this partition (query, batch, partition); ``count`` is the
    number of rows turned into messages so far.
    """

    def __init__(self, shape: MessageShape, prefix: str) -> None:
        self._shape = shape
        self._prefix = prefix
        self._base = {"persistent": "false"} if not shape.persistent else {}
        self.count = 0

    def from_rows(self, rows: Iterable[Sequence[Any]]) -> Iterator[Outgoing | Refusal]:
        """Messages from Spark rows (tuples in schema order)."""
        layout = self._shape.layout
        for row in rows:
            yield self._message(
                row[layout.body],
                None if layout.destination is None else row[layout.destination],
                None if layout.headers is None else row[layout.headers],
                None if layout.message_id is None else row[layout.message_id],
            )

    def from_batches(self, batches: Iterable[ColumnBatch]) -> Iterator[Outgoing | Refusal]:
        """Messages from Arrow record batches, one column converted at a time."""
        layout = self._shape.layout
        for batch in batches:
            rows = batch.num_rows
            nothing: list[Any] = [None] * rows
            bodies = batch.column(layout.body).to_pylist()
            destinations = _column(batch, layout.destination, nothing)
            headers = _column(batch, layout.headers, nothing)
            ids = _column(batch, layout.message_id, nothing)
            for values in zip(bodies, destinations, headers, ids, strict=True):
                yield self._message(*values)

    def _message(
        self, body: Any, destination: Any, headers: Any, user_id: Any
    ) -> Outgoing | Refusal:
        """The row's message, or the :class:`Refusal` that names what is wrong with it."""
        index = self.count
        self.count = index + 1
        shape = self._shape
        message_id = f"{self._prefix}-{index}" if user_id is None else str(user_id)
        target = shape.destination if shape.destination is not None else destination
        payload = b"" if body is None else _body(body)
        own: dict[str, str] = {}
        if headers:
            # The row path gives a dict, the Arrow path a list of (key, value) pairs.
            pairs = headers.items() if isinstance(headers, dict) else headers
            own = {str(k): str(v) for k, v in pairs if v is not None}
        broken = self._broken(body, target, user_id, own)
        if broken is not None:
            column, rule = broken
            return Refusal(index, message_id, column, rule, target or None, payload)
        merged = {**self._base, **own}
        if shape.duplicate_header is not None:
            merged[shape.duplicate_header] = message_id
        too_big = shape.rules.frame(payload, merged)
        if too_big is not None:
            return Refusal(index, message_id, repr(shape.body_column), too_big, target, payload)
        return Outgoing(target, payload, merged, message_id)

    def _broken(
        self, body: Any, target: Any, user_id: Any, headers: dict[str, str]
    ) -> tuple[str, str] | None:
        """(column, rule) of the first check the row fails, or None."""
        shape = self._shape
        rules = shape.rules
        if user_id is None and shape.message_id_column is not None:
            return repr(shape.message_id_column), "is null; every row needs its message id"
        if not target:
            return repr(shape.destination_column), "is null or empty; a row needs a destination"
        if shape.destination is None:
            wrong = rules.destination(str(target))
            if wrong is not None:
                return repr(shape.destination_column), wrong
        if body is None and not rules.allow_null_body:
            return (
                repr(shape.body_column),
                "is null (allowNullBody=true sends an empty message instead)",
            )
        wrong_header = rules.headers(headers) if headers else None
        if wrong_header is not None:
            detail, rule = wrong_header
            return f"{shape.headers_column!r} {detail}".rstrip(), rule
        return None


def _column(batch: ColumnBatch, at: int | None, nothing: list[Any]) -> list[Any]:
    return nothing if at is None else batch.column(at).to_pylist()


def _body(value: Any) -> bytes | str:
    if isinstance(value, (str, bytes)):
        return value
    return bytes(value)  # bytearray / memoryview from the row path
