"""Which task is writing: partition, attempt, and the query and batch it belongs to.

Spark does not pass the micro-batch id to ``write()``; the executor reads it, and the query's
id, from the task's local properties (``streaming.sql.batchId``, ``sql.streaming.queryId``; the
query id stays the same when a query restarts from its checkpoint). Together with the partition
they name a partition's input, so they prefix its messages' ids: a retried task or a replayed
batch reproduces the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import TaskContext

__all__ = ["BATCH_ID_PROPERTY", "QUERY_ID_PROPERTY", "TaskIdentity", "current_task"]

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class TaskIdentity:
    """The running task, as far as message ids and commit reports need it."""

    partition: int
    attempt: int
    query_id: str | None = None
    batch_id: str | None = None

    def id_prefix(self, write_id: str) -> str:
        """``<query>-<batch>-<partition>`` in a streaming query, else ``<write>-<partition>``.

        ``write_id`` names a batch write (drawn once on the driver and carried by the writer),
        so the tasks of one ``df.write`` share it and its retries reuse it.
        """
        if self.query_id is not None and self.batch_id is not None:
            return f"{self.query_id}-{self.batch_id}-{self.partition}"
        return f"{write_id}-{self.partition}"


def current_task() -> TaskIdentity:
    """The task this code runs in; outside a task (the driver), partition 0, attempt 0."""
    context = TaskContext.get()
    if context is None:
        return TaskIdentity(partition=0, attempt=0)
    return TaskIdentity(
        partition=context.partitionId(),
        attempt=context.attemptNumber(),
        query_id=context.getLocalProperty(QUERY_ID_PROPERTY) or None,
        batch_id=context.getLocalProperty(BATCH_ID_PROPERTY) or None,
    )
