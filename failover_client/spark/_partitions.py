"""Parallel reads: one micro-batch spooled as ``numPartitions`` files, read by as many tasks.

Where the consumers run decides what can be promised, so they stay on the driver. A STOMP or
AMQP acknowledgement belongs to the connection that received the message, and only the driver
hears that Spark committed a batch (``commit`` of the stream reader); executors have no hook
after the commit and may be gone by then. Consumers on executors would have to acknowledge
when their task ends, before Spark's commit (a driver crash then loses the batch), or hold
their connections open across tasks and learn of commits some other way. So the driver keeps
its one consumer, and parallelism comes from the spool: each batch is written as up to
``numPartitions`` files of contiguous offsets, and ``partitions()`` hands Spark one
:class:`~failover_client.spark._source.SpoolPartition` per file, so Spark runs that many
tasks, on as many executors as it has, each reading only its own file. A replay after a
restart finds the same files, so it is the same partitions with the same rows; the
acknowledgements still wait for Spark's commit of the batch.

What is spread is everything after the spool: reading the file, building rows, and the
query's own work on them (parsing bodies, writing to its sink), which is where a real query
spends its time. The driver's receive loop is not multiplied (one connection holds the
acknowledgements); it was never the part of a batch that needed several cores.
"""

from __future__ import annotations

# pyarrow ships no type information; everything from it is Any to mypy.
import pyarrow as pa  # type: ignore[import-untyped]

from failover_client.spark._spool import Spool, SpoolBatch

__all__ = ["ids_if_whole", "slices", "write_parts"]


def slices(count: int, parts: int) -> list[tuple[int, int]]:
    """``count`` items as up to ``parts`` contiguous ``(begin, end)`` ranges, sizes within one.

    No empty range: fewer items than parts gives one range per item.
    """
    if count <= 0:
        return []
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    ranges = []
    begin = 0
    for index in range(parts):
        end = begin + size + (1 if index < extra else 0)
        ranges.append((begin, end))
        begin = end
    return ranges


def write_parts(spool: Spool, start: int, messages: pa.Table, parts: int) -> SpoolBatch:
    """Spool ``messages`` from offset ``start`` as up to ``parts`` files; the whole range.

    Each file holds a slice of the one table (no copy until it is written).

    Each file is written atomically; a process that dies between two leaves the ones written,
    which the next driver finds as spooled and never reported, and reports as its next batch
    (``SourceDriver.latest``): nothing is lost or read twice, only the split differs.
    """
    for begin, end in slices(messages.num_rows, parts):
        spool.write(start + begin, messages.slice(begin, end - begin))
    return SpoolBatch(start, start + messages.num_rows)


def ids_if_whole(batch: SpoolBatch, ids: list[str] | None) -> list[str] | None:
    """``ids`` when they are exactly ``batch``'s (one id per offset), else None (read the file).

    The ledger knows a batch's ids by its end; a batch spooled as several files shares that
    end with its last file only.
    """
    if ids is None or len(ids) != batch.end - batch.start:
        return None
    return ids
