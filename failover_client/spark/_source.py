"""The source Spark sees: ``spark.readStream.format("failover")``, its schema and its reader.

Read::

    frame = (spark.readStream.format("failover")
        .option("uri", "failover:(stomp://a:61613,stomp://b:61613)")
        .option("destination", "/queue/orders")
        .option("checkpointLocation", "/checkpoints/orders")    # the query's, see below
        .load())

Every message becomes one row (:func:`source_schema`). At-least-once: a message is
acknowledged to its broker only after Spark committed the micro-batch that holds it, so it
reaches the query's sink at least once whatever fails (a broker, an executor, the driver);
a copy the broker redelivers is dropped by message id while that id is remembered (the spool
keeps the ids of the last :data:`~failover_client.spark._spool.RETAINED_IDS` committed
messages). ``checkpointLocation`` must be given to the source as well: a Python data source
is not told the query's checkpoint, and the spool of every batch lives under it.

Where things run: the reader Spark builds on the driver when the query starts (one process
for its lifetime) consumes, spools and acknowledges, through a
:class:`~failover_client.spark._driver.SourceDriver` made on first use; the readers Spark
builds for planning and the copies pickled to executors never connect: :meth:`read` opens a
spool file by name, so a batch is replayed exactly, on any executor.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

# pyarrow ships no type information; everything from it is Any to mypy.
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from failover_client import FailoverClientError, SystemClock
from failover_client.spark._consumer import Consumer
from failover_client.spark._depth import QueueDepth
from failover_client.spark._driver import SourceDriver
from failover_client.spark._options import SourceOptions, SparkOptionError, source_options
from failover_client.spark._s3conf import S3Settings
from failover_client.spark._spool import Spool, read_batch
from failover_client.uri import parse

if TYPE_CHECKING:  # PySpark 4.2+; 4.0 / 4.1 never call getDefaultReadLimit
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.streaming.datasource import (
        SupportsTriggerAvailableNow as _AvailableNowContract,
    )
else:
    try:
        from pyspark.sql.streaming.datasource import (
            SupportsTriggerAvailableNow as _AvailableNowContract,
        )
    except ImportError:  # PySpark 4.0 / 4.1: Spark runs AvailableNow as "until nothing new"

        class _AvailableNowContract:
            pass


__all__ = [
    "FailoverStreamReader",
    "SpoolPartition",
    "source_schema",
    "stream_reader",
]

_OFFSET_KEY = "position"

log = logging.getLogger("failover_client.spark")

_CLOCK = SystemClock()
"""Times the DEBUG timeline's steps (durations only; nothing waits on it)."""

P = ParamSpec("P")
R = TypeVar("R")


def source_schema(options: Mapping[str, str] | SourceOptions) -> StructType:
    """The rows of the source; ``body_string`` only with ``bodyAsString=true``.

    ``body`` (binary), ``body_string`` (the body decoded as UTF-8, bad bytes replaced),
    ``headers`` (headers / application properties), ``destination``, ``message_id`` (the
    ``failover-message-id`` a failover sender set, else the broker's id), ``timestamp`` (the
    broker's, when it sends one), ``redelivered`` (the broker's flag), ``broker`` (the
    member address it came from, password masked), ``offset`` (the message's position in
    this query's spool: increasing, never reused).
    """
    parsed = options if isinstance(options, SourceOptions) else _validated(options)
    fields = [StructField("body", BinaryType())]
    if parsed.body_as_string:
        fields.append(StructField("body_string", StringType()))
    fields += [
        StructField("headers", MapType(StringType(), StringType())),
        StructField("destination", StringType()),
        StructField("message_id", StringType()),
        StructField("timestamp", TimestampType()),
        StructField("redelivered", BooleanType()),
        StructField("broker", StringType()),
        StructField("offset", LongType()),
    ]
    return StructType(fields)


def stream_reader(
    options: Mapping[str, str], schema: StructType, s3: S3Settings | None = None
) -> FailoverStreamReader:
    """The reader for ``DataSource.streamReader``: options validated, nothing connected."""
    parsed = _validated(options)
    try:
        _check_schema(schema, source_schema(parsed))
    except SparkOptionError as exc:
        raise exc.with_traceback(None) from None
    return FailoverStreamReader(parsed, schema, s3)


def _validated(options: Mapping[str, str]) -> SourceOptions:
    """Every source option checked (``DataSource.schema()`` runs this at ``load()``)."""
    try:
        return _checked(source_options(options))
    except SparkOptionError as exc:
        # Spark shows this error's traceback: one frame says where, the message what.
        raise exc.with_traceback(None) from None


def _check_schema(given: StructType, expected: StructType) -> None:
    if given != expected:
        raise SparkOptionError(
            "failover source: the schema is fixed; leave out .schema(...) or give exactly "
            f"{expected.simpleString()} (got {given.simpleString()})",
            option=None,
        )


def _checked(options: SourceOptions) -> SourceOptions:
    if options.checkpoint_location is None:
        raise SparkOptionError(
            "failover source: option checkpointLocation is required on readStream too (give "
            "the query's): each batch is spooled there before Spark sees its offsets",
            option="checkpointLocation",
        )
    protocols = {member.protocol for member in parse(options.uri).members}
    if options.selector is not None and "amqp" in protocols:
        raise SparkOptionError(
            "failover source: option selector works over STOMP only (stomp:// members); "
            "the AMQP adapter does not send selector filters",
            option="selector",
        )
    return options


@dataclass(frozen=True)
class SpoolPartition(InputPartition):
    """One spool file's offsets ``start`` .. ``end - 1``: plain values, read on an executor."""

    spool: str
    name: str
    start: int
    end: int


def _offset(position: int) -> dict[str, int]:
    return {_OFFSET_KEY: position}


def _position(offset: Mapping[str, Any]) -> int:
    return int(offset[_OFFSET_KEY])


def _brief(method: Callable[P, R]) -> Callable[P, R]:
    """Let a library error reach Spark without its traceback.

    Spark prints a failed offset call's whole traceback into the query's error; cut at the
    method Spark called, the reason is in the first lines, not below the library's frames.
    ``functools.wraps`` keeps the signature Spark inspects (``latestOffset``'s parameters).
    """

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except FailoverClientError as exc:
            raise exc.with_traceback(None) from None

    return call


class FailoverStreamReader(DataSourceStreamReader, _AvailableNowContract):
    """Spark's stream reader over a :class:`SourceDriver` (see the module docstring).

    Triggers and rate options: :mod:`failover_client.spark._pacing`. Lag: Spark shows
    :meth:`reportLatestOffset` as the progress's ``latestOffset`` (PySpark 4.2+).

    Picklable: it carries the options, the schema and how to reach the spool's store (``s3``,
    for executors); the driver state is made on first use of an offset method and never
    pickled.
    """

    def __init__(
        self, options: SourceOptions, schema: StructType, s3: S3Settings | None = None
    ) -> None:
        self.options = options
        self.schema = schema
        self.s3 = s3
        self._driver: SourceDriver | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver"] = None
        return state

    def _started(self) -> SourceDriver:
        if self._driver is None:
            self._driver = _open_driver(self.options, self.s3)
        return self._driver

    # --- offsets: the driver's long-lived process --------------------------------------------

    @_brief
    def initialOffset(self) -> dict[str, int]:
        return _offset(self._started().initial())

    @_brief
    def latestOffset(
        self, start: Mapping[str, Any] | None = None, limit: object = None
    ) -> dict[str, int]:
        begin = None if start is None else _position(start)
        return _offset(self._started().latest(begin, self._limit(limit)))

    @_brief
    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: fix the target (what the broker holds now), drain to it, stop."""
        self._started().prepare_available_now()

    @_brief
    def reportLatestOffset(self) -> dict[str, int]:
        """The latest offset known, with what it is made of (buffered, pending, broker depth).

        ``position`` minus the batch's end offset is how many messages the query is behind;
        ``brokerDepth`` only where the broker tells it (ActiveMQ Classic's statistics plugin).
        """
        return self._started().lag()

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: PLC0415 - 4.2+

        return ReadMaxRows(self.options.max_messages_per_batch)

    def _limit(self, limit: object) -> int | None:
        if limit is None:  # 4.0 / 4.1: no read limits, the option is the limit
            return self.options.max_messages_per_batch
        rows = getattr(limit, "max_rows", None)
        if isinstance(rows, int):
            return rows
        # ReadAllAvailable (Trigger.AvailableNow / Once): everything buffered.
        return None

    @_brief
    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> list[SpoolPartition]:
        first, last = _position(start), _position(end)
        if last <= first:
            return []
        driver = self._started()
        batches = driver.planned(first, last)
        return [
            SpoolPartition(driver.spool.url, b.name, max(first, b.start), min(last, b.end))
            for b in batches
        ]

    @_brief
    def commit(self, end: Mapping[str, Any]) -> None:
        self._started().commit(_position(end))

    def stop(self) -> None:
        # Not reliably called; it only closes (acks wait for commits, which stop never is).
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    # --- rows: executors -----------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's messages, from its spool file (stateless: runs on any executor)."""
        assert isinstance(partition, SpoolPartition)
        began = _CLOCK.monotonic()
        table = read_batch(partition.spool, partition.name, self.s3)
        offsets = table.column("offset")
        wanted = pc.and_(
            pc.greater_equal(offsets, partition.start), pc.less(offsets, partition.end)
        )
        table = table.filter(wanted)
        output = output_table(table, self.options.body_as_string)
        log.debug(
            "failover source timeline: read %s (%d rows) in %.0f ms",
            partition.name,
            output.num_rows,
            (_CLOCK.monotonic() - began) * 1000,
        )
        yield from output.to_batches()

    def __repr__(self) -> str:
        return f"FailoverStreamReader({self.options!r}, started={self._driver is not None})"


def output_table(spooled: pa.Table, body_as_string: bool) -> pa.Table:
    """Spool rows in the shape of :func:`source_schema` (Spark's Arrow types, UTC micros)."""
    columns: dict[str, Any] = {"body": spooled.column("body")}
    if body_as_string:
        columns["body_string"] = _text(spooled.column("body"))
    columns["headers"] = spooled.column("headers")
    columns["destination"] = spooled.column("destination")
    columns["message_id"] = spooled.column("message_id")
    columns["timestamp"] = spooled.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
    columns["redelivered"] = spooled.column("redelivered")
    columns["broker"] = spooled.column("broker")
    columns["offset"] = spooled.column("offset")
    fields = [pa.field(name, column.type, nullable=True) for name, column in columns.items()]
    return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))


def _text(bodies: pa.ChunkedArray) -> pa.ChunkedArray:
    try:
        return pc.cast(bodies, pa.string())
    except pa.ArrowInvalid:
        # Not all UTF-8: decode each body, replacing what is not.
        decoded = [None if b is None else b.decode("utf-8", "replace") for b in bodies.to_pylist()]
        return pa.chunked_array([pa.array(decoded, type=pa.string())])


def _open_driver(options: SourceOptions, s3: S3Settings | None = None) -> SourceDriver:
    assert options.checkpoint_location is not None  # checked by stream_reader
    identity = {"destinations": list(options.destinations), "selector": options.selector}
    began = _CLOCK.monotonic()
    spool = Spool.open(options.checkpoint_location, identity, s3=s3)
    consumer = Consumer(options)
    try:
        consumer.start()
        log.debug(
            "failover source timeline: driver opened (spool, connect, subscribe) in %.0f ms, "
            "%d delivered so far",
            (_CLOCK.monotonic() - began) * 1000,
            consumer.buffered(),
        )
        depth = None
        if options.queue_depth:
            depth = QueueDepth(consumer.connection, options.destinations)
        return SourceDriver(options, spool, consumer, depth=depth)
    except BaseException:
        consumer.close()
        raise
