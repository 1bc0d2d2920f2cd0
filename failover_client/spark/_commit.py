"""What each task reports, and what the driver does with the reports of a batch.

Each task returns a :class:`PartitionReport` (rows confirmed, first and last id). Spark hands
them to ``commit`` on the driver (on a freshly built writer: nothing a task set on its own
writer object arrives there, only these reports) once every task succeeded, or to ``abort``.

``commit`` makes a batch visible after the fact: a marker file per batch under the query's
checkpoint location (``<checkpointLocation>/failover-sink/batch-<id>.json``), and, if asked, a
summary message. A batch Spark runs again after a driver restart (same id, same offsets) finds
its marker and is logged as a replay, with a second marker beside the first: whoever reads the
broker then knows that batch's rows came twice, with the same ids. ``abort`` logs what the
successful tasks had already confirmed: those rows are on the broker, and come again when
Spark retries the batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from pyspark.sql.datasource import WriterCommitMessage

from failover_client.spark._connections import connection_for
from failover_client.spark._fs import Location
from failover_client.spark._options import SinkOptions
from failover_client.spark._rowerrors import batch_error

__all__ = ["MARKER_DIRECTORY", "BatchRecord", "PartitionReport", "log_abort", "record_commit"]

log = logging.getLogger("failover_client.spark")

MARKER_DIRECTORY = "failover-sink"


@dataclass(frozen=True)
class PartitionReport(WriterCommitMessage):
    """One task's result: every row it counts was confirmed by a broker."""

    partition: int
    attempt: int
    rows: int
    first_id: str | None
    last_id: str | None
    query_id: str | None
    batch_id: str | None
    broker: str | None
    """The (redacted) broker the task's connection ended on."""
    refused: int = 0
    """Rows refused (by the checks or a broker) and not sent; see ``onRowError``."""
    reasons: tuple[str, ...] = ()
    """Why, for the first few of them."""


@dataclass(frozen=True)
class BatchRecord:
    """The summary of one committed batch (the marker's and the summary message's content)."""

    batch: int | None
    """The micro-batch id (None for a batch ``df.write``, named by ``write_id``)."""
    query_id: str | None
    rows: int
    partitions: tuple[PartitionReport, ...]
    replay: int = 0
    """0 the first time this batch id is committed, n for its n-th replay."""
    write_id: str | None = None
    refused: int = 0
    """Rows of the batch refused and skipped or dead-lettered (``onRowError``)."""

    def to_json(self) -> str:
        data = asdict(self)
        data["partitions"] = [asdict(p) for p in self.partitions]
        return json.dumps(data, sort_keys=True)


def _reports(messages: Sequence[WriterCommitMessage | None]) -> tuple[PartitionReport, ...]:
    found = [m for m in messages if isinstance(m, PartitionReport)]
    return tuple(sorted(found, key=lambda r: r.partition))


def record_commit(
    options: SinkOptions,
    batch_id: int | None,
    messages: Sequence[WriterCommitMessage | None],
    *,
    write_id: str | None = None,
) -> BatchRecord:
    """Write the batch's marker (and summary message); return what was recorded.

    ``batch_id`` is None for a batch ``df.write``: it has no checkpoint and gets no marker.
    """
    reports = _reports(messages)
    query_id = next((r.query_id for r in reports if r.query_id), None)
    rows = sum(r.rows for r in reports)
    refused = sum(r.refused for r in reports)
    if refused and options.on_row_error == "fail":
        reasons = [reason for r in reports for reason in r.reasons]
        error = batch_error(batch_id, refused, reasons, sum(1 for r in reports if r.refused))
        raise error.with_traceback(None) from None
    if refused:
        where = "the write" if batch_id is None else f"batch {batch_id}"
        done = "left out" if options.on_row_error == "skip" else f"sent to {options.dead_letter}"
        first = next(reason for r in reports for reason in r.reasons)
        log.warning(
            "failover sink: %s: %d rows refused and %s (first: %s)", where, refused, done, first
        )
    record = BatchRecord(batch_id, query_id, rows, reports, write_id=write_id, refused=refused)
    if batch_id is not None and options.commit_markers and options.checkpoint_location:
        record = _write_marker(Location(options.checkpoint_location), record)
    if options.commit_destination is not None:
        _send_summary(options, options.commit_destination, record)
    return record


def _write_marker(checkpoint: Location, record: BatchRecord) -> BatchRecord:
    """Write the batch's marker; a second commit of the same batch id gets a replay marker."""
    markers = checkpoint.child(MARKER_DIRECTORY)
    first = f"batch-{record.batch}.json"
    replay = 0
    if markers.exists(first):
        taken = {n for n in markers.names() if n.startswith(f"batch-{record.batch}.")}
        replay = len(taken)
        log.warning(
            "failover sink: batch %d was committed before (a replay after a restart): its "
            "%d rows were sent again with the same message ids",
            record.batch,
            record.rows,
        )
    record = replace(record, replay=replay)
    name = first if replay == 0 else f"batch-{record.batch}.replay-{replay}.json"
    markers.write_bytes(name, record.to_json().encode())
    return record


def _send_summary(options: SinkOptions, destination: str, record: BatchRecord) -> None:
    # The id repeats for a replayed batch, so a consumer can tell the summaries apart too.
    batch = f"{record.query_id}-{record.batch}"
    name = batch if record.batch is not None else f"{record.write_id}"
    message_id = f"{name}-commit-{record.replay}"
    connection = connection_for(options)
    connection.send(
        destination,
        record.to_json(),
        {"content-type": "application/json"},
        message_id=message_id,
    )


def log_abort(batch_id: int | None, messages: Sequence[WriterCommitMessage | None]) -> int:
    """Log what the tasks of a failed batch had confirmed; return that row count."""
    reports = _reports(messages)
    rows = sum(r.rows for r in reports)
    where = "write" if batch_id is None else f"batch {batch_id}"
    log.warning(
        "failover sink: %s aborted; %d of %d partitions had confirmed %d rows, which are on "
        "the brokers and will be sent again (same ids) when Spark retries",
        where,
        len(reports),
        len(messages),
        rows,
    )
    return rows
