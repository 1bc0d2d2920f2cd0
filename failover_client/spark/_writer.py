"""The sink's writers: built on the driver, pickled to the executors, writing one partition each.

A writer carries only a :class:`WritePlan` (options, column positions, a write id): plain
values that pickle. In ``write()`` on the executor it takes the worker's cached connection
(``_connections``), turns the partition into messages (``_messages``) and returns once all are
confirmed (``_send``), reporting what it sent (``_commit``).

Flavours, by what the running PySpark offers:

* streaming, Arrow (``DataSourceStreamArrowWriter``, PySpark 4.1+): record batches, about twice
  the row writer's rate in Spark itself;
* streaming, rows (``DataSourceStreamWriter``): PySpark 4.0;
* batch ``df.write`` (``DataSourceArrowWriter``, every 4.x).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import datasource
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from failover_client import ConnectionFailure, SendFailure
from failover_client.spark._commit import PartitionReport, log_abort, record_commit
from failover_client.spark._connections import connection_for
from failover_client.spark._layout import row_layout
from failover_client.spark._messages import (
    ColumnBatch,
    MessageShape,
    Outgoing,
    PartitionMessages,
    Refusal,
)
from failover_client.spark._options import SinkOptions, sink_options
from failover_client.spark._rowerrors import RefusedRows
from failover_client.spark._send import PartitionNotConfirmed, send_all
from failover_client.spark._task import current_task

if TYPE_CHECKING:  # checked against a PySpark that has it (4.1+)
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
else:  # None on PySpark 4.0
    DataSourceStreamArrowWriter = getattr(datasource, "DataSourceStreamArrowWriter", None)

__all__ = [
    "ARROW_STREAM_WRITER",
    "FailoverBatchWriter",
    "FailoverStreamWriter",
    "WritePlan",
    "stream_writer",
    "write_partition",
]

ARROW_STREAM_WRITER = DataSourceStreamArrowWriter is not None
"""Whether the running PySpark streams Arrow record batches to a sink (4.1+)."""


@dataclass(frozen=True)
class WritePlan:
    """What a task needs to write its partition: options, message shape, ids."""

    options: SinkOptions
    shape: MessageShape
    write_id: str
    """Names a batch ``df.write`` (its tasks share it, and so do their retries); a task of a
    streaming query, or of a write inside ``foreachBatch``, uses the query and batch ids."""

    @classmethod
    def build(cls, raw: Mapping[str, str] | SinkOptions, schema: StructType) -> WritePlan:
        """Validate ``raw`` options against ``schema`` (SparkOptionError when wrong)."""
        options = raw if isinstance(raw, SinkOptions) else sink_options(raw)
        shape = MessageShape.of(options, row_layout(schema, options))
        return cls(options, shape, uuid.uuid4().hex[:16])


def write_partition(plan: WritePlan, source: Iterable[Any], *, arrow: bool) -> PartitionReport:
    """Send one partition (rows, or Arrow batches when ``arrow``) and report it."""
    task = current_task()
    messages = PartitionMessages(plan.shape, task.id_prefix(plan.write_id))
    stream: Iterator[Outgoing | Refusal] = (
        messages.from_batches(source) if arrow else messages.from_rows(source)
    )
    refused = RefusedRows(plan.options, plan.shape.rules.max_frame)
    try:
        connection = connection_for(plan.options)
        sent = send_all(connection, stream, refused)
    except (ConnectionFailure, SendFailure) as exc:
        # What reaches the user is this exception's traceback, printed by the Python worker
        # and carried into the query's error: without the engine's frames it stays readable,
        # and the message keeps every broker's cause.
        where = f"failover sink: partition {task.partition} (attempt {task.attempt})"
        if isinstance(exc, PartitionNotConfirmed):
            raise PartitionNotConfirmed(f"{where}: {exc}", message_id=exc.message_id) from None
        raise PartitionNotConfirmed(
            f"{where} stopped after {messages.count} rows: {type(exc).__name__}: {exc}"
        ) from None
    return PartitionReport(
        partition=task.partition,
        attempt=task.attempt,
        rows=sent.messages,
        first_id=sent.first_id,
        last_id=sent.last_id,
        query_id=task.query_id,
        batch_id=task.batch_id,
        broker=connection.broker,
        refused=refused.count,
        reasons=tuple(refused.reasons),
    )


class FailoverStreamWriter(DataSourceStreamWriter):
    """Streaming writer over Spark rows (PySpark 4.0, or when Arrow is not offered)."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_partition(self.plan, iterator, arrow=False)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        record_commit(self.plan.options, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log_abort(batchId, messages)


if DataSourceStreamArrowWriter is not None:

    class FailoverStreamArrowWriter(DataSourceStreamArrowWriter):
        """Streaming writer over Arrow record batches (PySpark 4.1+)."""

        def __init__(self, plan: WritePlan) -> None:
            self.plan = plan

        def write(self, iterator: Iterator[ColumnBatch]) -> WriterCommitMessage:
            return write_partition(self.plan, iterator, arrow=True)

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            record_commit(self.plan.options, batchId, messages)

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            log_abort(batchId, messages)


class FailoverBatchWriter(DataSourceArrowWriter):
    """Writer of a batch ``df.write``: Arrow record batches (every PySpark 4.x)."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[ColumnBatch]) -> WriterCommitMessage:
        return write_partition(self.plan, iterator, arrow=True)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        # Inside foreachBatch the tasks ran as part of a micro-batch: record it like one.
        batch = next((m.batch_id for m in messages if isinstance(m, PartitionReport)), None)
        options = self.plan.options
        refused = any(isinstance(m, PartitionReport) and m.refused for m in messages)
        if batch is not None or options.commit_destination is not None or refused:
            number = None if batch is None else int(batch)
            record_commit(options, number, messages, write_id=self.plan.write_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log_abort(None, messages)


def stream_writer(plan: WritePlan, *, arrow: bool = ARROW_STREAM_WRITER) -> DataSourceStreamWriter:
    """The fastest streaming writer the running PySpark offers (``arrow=False``: rows)."""
    if arrow and DataSourceStreamArrowWriter is not None:
        writer: DataSourceStreamWriter = FailoverStreamArrowWriter(plan)
        return writer
    return FailoverStreamWriter(plan)
