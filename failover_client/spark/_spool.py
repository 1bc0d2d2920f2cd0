"""The source's durable spool: every micro-batch's messages, in a file, before Spark sees them.

A broker's acknowledgement belongs to the connection that received the message, and Spark
commits a batch long after its offsets were planned (batch N is committed when batch N+1 is
planned), maybe after the driver restarted on another host. So the driver writes each batch's
messages here *before* it reports the batch's end offset, and acknowledges them only once
Spark committed the batch. A batch can then be replayed exactly (``read`` between the same
offsets reads the same file, on any executor) and the source's position is what this
directory says, never what a driver process remembers.

Under ``<checkpointLocation>/failover-source/`` (any location that
:mod:`~failover_client.spark._storage` serves, through
:class:`~failover_client.spark._fs.Location`)::

    source.json                                   which destinations / selector it belongs to
    batch-<start>-<end>.arrow                     messages with offsets start .. end-1 (Arrow IPC)
    committed-<start>-<end>.json                  the ids of a committed batch, kept a while

Offsets count messages: the n-th message ever spooled has offset n. A committed batch's file is
replaced by its ``committed-`` record (ids only), which also remembers the committed position
after the data files are gone; the newest records are kept until they hold
:data:`RETAINED_IDS` ids, so a message redelivered after its acknowledgement was lost (a
driver killed with ACK frames unsent) is still recognised by id. Names are zero-padded, so
listing order is offset order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# pyarrow ships no type information; everything from it is Any to mypy.
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from failover_client._errors import SpoolGap
from failover_client.spark._fs import Location
from failover_client.spark._options import SparkOptionError
from failover_client.spark._s3conf import S3Settings
from failover_client.spark._storage import absolute

__all__ = [
    "MESSAGE_SCHEMA",
    "RETAINED_IDS",
    "SPOOL_DIRECTORY",
    "SPOOL_SCHEMA",
    "SpoolBatch",
    "SpoolGap",
    "SpoolState",
    "absolute_url",
    "read_batch",
]

SPOOL_DIRECTORY = "failover-source"

RETAINED_IDS = 100_000
"""Ids of committed messages kept for de-duplication (the newest record is always kept)."""

_IDENTITY = "source.json"
_NAME = re.compile(r"^(batch|committed)-(\d{19})-(\d{19})\.(arrow|json)$")

SPOOL_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("body", pa.binary()),
        pa.field("headers", pa.map_(pa.string(), pa.string())),
        pa.field("destination", pa.string()),
        pa.field("message_id", pa.string()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("redelivered", pa.bool_()),
        pa.field("broker", pa.string()),
    ]
)
"""One row per message, as written to a batch file."""

MESSAGE_SCHEMA = pa.schema(list(SPOOL_SCHEMA)[1:])
"""The messages of a batch as the driver hands them to :meth:`Spool.write` (no offsets yet)."""

_OFFSET = SPOOL_SCHEMA.field("offset")


@dataclass(frozen=True, order=True)
class SpoolBatch:
    """One batch file: offsets ``start`` .. ``end - 1``."""

    start: int
    end: int

    @property
    def name(self) -> str:
        return f"batch-{self.start:019d}-{self.end:019d}.arrow"

    @property
    def committed_name(self) -> str:
        return f"committed-{self.start:019d}-{self.end:019d}.json"


@dataclass(frozen=True)
class SpoolState:
    """What the spool directory holds: the source's position, derived from files alone."""

    batches: tuple[SpoolBatch, ...]
    """Spooled, not yet committed, in offset order."""
    committed: tuple[SpoolBatch, ...]
    """Committed batches whose id records are still kept, in offset order."""

    @property
    def committed_end(self) -> int:
        """Every offset below this was committed by Spark (0 for a new spool)."""
        return self.committed[-1].end if self.committed else 0

    @property
    def position(self) -> int:
        """The end of the last spooled batch: where the next batch starts."""
        ends = [b.end for b in self.batches] + [self.committed_end]
        return max(ends)


def absolute_url(location: str) -> str:
    """``location`` with a relative local path made absolute (executors run elsewhere)."""
    return absolute(location)


class Spool:
    """The spool directory of one source (see the module docstring)."""

    def __init__(
        self, url: str, *, retained: int = RETAINED_IDS, s3: S3Settings | None = None
    ) -> None:
        self.url = url
        self.retained = retained
        self.s3 = s3
        self._location = Location(url, s3)

    @classmethod
    def open(
        cls,
        checkpoint_location: str,
        identity: Mapping[str, object],
        *,
        retained: int = RETAINED_IDS,
        s3: S3Settings | None = None,
    ) -> Spool:
        """The spool under ``checkpoint_location``, claimed for the source ``identity``.

        A spool written for other destinations (another source of the same query given the
        same location, or a query whose destinations changed) is refused: its offsets would
        mean other messages.
        """
        url = f"{absolute_url(checkpoint_location).rstrip('/')}/{SPOOL_DIRECTORY}"
        spool = cls(url, retained=retained, s3=s3)
        wanted = json.dumps(dict(identity), sort_keys=True)
        if spool._location.exists(_IDENTITY):
            found = spool._location.read_bytes(_IDENTITY).decode()
            if json.loads(found) != json.loads(wanted):
                raise SparkOptionError(
                    f"failover source: the spool at {spool.url} belongs to a source of {found}, "
                    f"not {wanted}; give each source (and each changed source) its own "
                    "checkpointLocation",
                    option="checkpointLocation",
                )
        else:
            spool._location.write_bytes(_IDENTITY, wanted.encode())
        return spool

    # --- reading the directory -------------------------------------------------------------

    def state(self) -> SpoolState:
        """Scan the directory; leftovers of an interrupted commit or write are removed."""
        batches: list[SpoolBatch] = []
        committed: list[SpoolBatch] = []
        for name in self._location.names():
            match = _NAME.match(name)
            if match is None:
                if name.startswith(".") and name.endswith(".tmp"):
                    self._location.delete(name)  # a write the process did not finish
                continue
            batch = SpoolBatch(int(match[2]), int(match[3]))
            (batches if match[1] == "batch" else committed).append(batch)
        committed.sort()
        done = committed[-1].end if committed else 0
        for batch in [b for b in batches if b.end <= done]:
            # Committed (its record exists) but the process died before deleting it.
            self._location.delete(batch.name)
        return SpoolState(tuple(sorted(b for b in batches if b.end > done)), tuple(committed))

    def covering(self, start: int, end: int) -> list[SpoolBatch]:
        """The batch files holding offsets ``start`` .. ``end - 1``; SpoolGap if any is missing."""
        if end <= start:
            return []
        found = [b for b in self.state().batches if b.end > start and b.start < end]
        reached = start
        for batch in found:
            if batch.start > reached:
                break
            reached = max(reached, batch.end)
        if reached < end:
            raise SpoolGap(
                f"failover source: the spool at {self.url} has no messages for offsets "
                f"{reached}..{end - 1} that Spark asks for: was it deleted, or does the "
                "source's checkpointLocation differ from the query's?",
                option="checkpointLocation",
            )
        return found

    def ids(self, batch: SpoolBatch) -> list[str | None]:
        """The message ids in a batch file (for de-duplication after a restart)."""
        table = read_batch(self.url, batch.name, self.s3)
        return [None if v is None else str(v) for v in table.column("message_id").to_pylist()]

    def committed_ids(self, batch: SpoolBatch) -> list[str]:
        data = json.loads(self._location.read_bytes(batch.committed_name))
        return [str(v) for v in data["ids"]]

    # --- writing ---------------------------------------------------------------------------

    def write(self, start: int, messages: pa.Table) -> SpoolBatch:
        """Write ``messages`` (:data:`MESSAGE_SCHEMA`) as offsets ``start`` ..; atomic: a reader
        sees all or nothing."""
        batch = SpoolBatch(start, start + messages.num_rows)
        self._location.write_bytes(batch.name, encode(start, messages))
        return batch

    def commit(
        self, end: int, known: Callable[[SpoolBatch], Sequence[str | None] | None]
    ) -> list[SpoolBatch]:
        """Spark committed every offset below ``end``: keep the batches' ids, drop their data.

        ``known(batch)`` gives the ids of a batch the caller holds (None: read the file).
        Returns the batches committed now. Each batch's id record is written before its data
        file is deleted, so an interruption leaves both (cleaned up by :meth:`state`), never
        neither.
        """
        state = self.state()
        done = [b for b in state.batches if b.end <= end]
        for batch in done:
            ids = known(batch)
            kept = [i for i in (ids if ids is not None else self.ids(batch)) if i is not None]
            record = {"start": batch.start, "end": batch.end, "ids": kept}
            self._location.write_bytes(batch.committed_name, json.dumps(record).encode())
            self._location.delete(batch.name)
        if done:
            self._prune((*state.committed, *done))
        return done

    def _prune(self, committed: Sequence[SpoolBatch]) -> None:
        """Drop the oldest id records beyond ``retained`` ids (the newest always stays)."""
        kept = 0
        for index, batch in enumerate(reversed(committed)):
            if index > 0 and kept >= self.retained:
                self._location.delete(batch.committed_name)
            kept += batch.end - batch.start

    def __repr__(self) -> str:
        return f"Spool({self.url!r})"


def encode(start: int, messages: pa.Table) -> memoryview:
    """``messages`` (:data:`MESSAGE_SCHEMA`) as one Arrow IPC stream with offsets from ``start``.

    A view of Arrow's buffer: copied into a ``bytes`` it would cost a batch of 10,000 a few
    milliseconds more, for nothing (the file is written from it and it is dropped).
    """
    if not messages.schema.equals(MESSAGE_SCHEMA):
        raise ValueError(
            f"failover source: spool rows must have the schema {MESSAGE_SCHEMA}, "
            f"not {messages.schema}"
        )
    # start, start + 1, ...: counted in Arrow (from a Python range it is ten times slower).
    ones = pa.repeat(pa.scalar(1, type=pa.int64()), messages.num_rows)
    offsets = pc.cumulative_sum(ones, start=pa.scalar(start - 1, type=pa.int64()))
    table = messages.add_column(0, _OFFSET, offsets)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SPOOL_SCHEMA) as writer:
        writer.write_table(table)
    return memoryview(sink.getvalue())


def read_batch(url: str, name: str, s3: S3Settings | None = None) -> pa.Table:
    """The table in batch file ``name`` of the spool at ``url`` (runs on executors)."""
    data = Location(url, s3).read_bytes(name)
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
