"""What a refused row does: the sink's ``onRowError`` option.

A row is refused either here, before it is sent (``_rowcheck``: a header a broker would not
parse, a frame over its limits, a null body or id, a destination without a known prefix), or
by a broker (a send answered with :class:`~failover_client.SendRejected`, after the connection
quarantined it as poison). Either way re-sending it cannot help, so a refusal must never fail
the *task*: Spark would retry the task (``spark.task.maxFailures``, 4 on a cluster), and every
attempt re-sends every good row of the partition before meeting the bad one again. Instead the
task carries on, counts the refusal in its :class:`~failover_client.spark._commit.PartitionReport`,
and what happens next is the option's:

* ``fail`` (default): the task succeeds; the driver's commit of the batch raises one
  :class:`~failover_client.RowError` whose first line names the row, its column and the rule
  (or the broker's reason). The good rows were sent once; the batch is not committed, so a
  restarted query sends it again (same ids), once the data or the option is fixed;
* ``skip``: the row is left out, counted in the batch's marker and summary, and logged;
* ``deadLetter:<destination>``: the row's body goes to that destination with the reason in
  the :data:`ROW_ERROR_HEADER` header (the row's own headers are left out: they may be
  what was refused), and the query keeps running.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from failover_client._errors import RowError
from failover_client.spark._messages import Outgoing
from failover_client.spark._options import SinkOptions
from failover_client.spark._rowcheck import Refusal

__all__ = [
    "KEPT_REASONS",
    "ORIGINAL_DESTINATION_HEADER",
    "ROW_ERROR_HEADER",
    "RefusedRows",
    "batch_error",
]

ROW_ERROR_HEADER = "failover-row-error"
"""Why a dead-lettered row was refused (row, column, rule or the broker's reason)."""

ORIGINAL_DESTINATION_HEADER = "failover-original-destination"

KEPT_REASONS = 5
"""Reasons a task reports in full (every refusal is counted)."""

_HEADER_TEXT = 2_000
"""Characters of a reason kept in the dead letter's header (well under any line limit)."""


class RefusedRows:
    """One task's refusals: counted, the first few kept, dead letters made when asked."""

    def __init__(self, options: SinkOptions, rows_max_frame: int | None = None) -> None:
        self._mode = options.on_row_error
        self._dead_letter = options.dead_letter
        self._max_frame = rows_max_frame
        self._lock = threading.Lock()  # broker refusals arrive on adapter threads
        self.count = 0
        self.reasons: list[str] = []

    def take(self, refusal: Refusal) -> Outgoing | None:
        """Count ``refusal``; return the dead letter to send for it, if the option asks."""
        with self._lock:
            self.count += 1
            if len(self.reasons) < KEPT_REASONS:
                self.reasons.append(str(refusal))
        if self._mode != "deadLetter" or self._dead_letter is None:
            return None
        body = refusal.body
        size = len(body.encode() if isinstance(body, str) else body)
        if self._max_frame is not None and size + _HEADER_TEXT * 2 > self._max_frame:
            body = b""  # the body was what was too big: the reason says so
        headers = {ROW_ERROR_HEADER: str(refusal)[:_HEADER_TEXT]}
        if refusal.destination:
            headers[ORIGINAL_DESTINATION_HEADER] = refusal.destination[:_HEADER_TEXT]
        return Outgoing(self._dead_letter, body, headers, refusal.message_id)

    def __repr__(self) -> str:
        return f"RefusedRows({self._mode}, count={self.count})"


def batch_error(
    batch: int | None, refused: int, reasons: Sequence[str], partitions: int
) -> RowError:
    """The error that fails a batch under ``onRowError=fail``; the first line names a row."""
    first = reasons[0] if reasons else "a row was refused"
    where = "the write" if batch is None else f"batch {batch}"
    more = "" if refused <= 1 else f" (and {refused - 1} more rows in {partitions} partitions)"
    return RowError(
        f"failover sink: {first}{more}\n"
        f"{where} fails without retries (onRowError=fail): the other rows were sent once, and "
        "will be again (same ids) when the batch runs again; onRowError=skip or "
        "deadLetter:<destination> keeps the query running"
    )
