"""The ``failover`` data source that Spark finds by name, and the one-line registration.

Spark calls ``writer()`` / ``streamWriter()`` on the driver when a query starts (in a Python
worker of the driver), so options and columns are validated there: a mistake fails the query
at once with a :class:`SparkOptionError` that names the option. The writer returned carries
only plain values; connections are made on the executors. ``schema()`` / ``streamReader()``
serve the source (:mod:`._source`): ``schema()`` checks every source option at ``load()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from failover_client.spark._options import SparkOptionError
from failover_client.spark._s3conf import S3Settings, from_session, use
from failover_client.spark._source import source_schema, stream_reader
from failover_client.spark._storage import check_location
from failover_client.spark._threads import visible_from_threads
from failover_client.spark._writer import FailoverBatchWriter, WritePlan, stream_writer

__all__ = ["FORMAT", "FailoverDataSource", "register"]

FORMAT = "failover"
"""The name to pass to ``format()`` once :func:`register` ran."""


class FailoverDataSource(DataSource):
    """Brokers behind a failover URI as a Spark data source (``format("failover")``).

    Sink: ``df.write`` and ``df.writeStream``; every row becomes one message, confirmed by a
    broker before its task ends (at-least-once; a re-sent row carries the same message id).
    Source: ``spark.readStream``; one row per message, acknowledged only after Spark committed
    its batch. The options are listed in :data:`failover_client.spark.OPTIONS`.
    """

    s3: ClassVar[S3Settings | None] = None
    """The session's ``fs.s3a.*`` settings, set by :func:`register` (None: the AWS chain)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise SparkOptionError(
                "failover sink: mode overwrite is not possible: a broker cannot take messages "
                "back; use mode append",
                option=None,
            )
        plan = _plan(self.options, schema)
        if plan.options.commit_markers and plan.options.checkpoint_location:
            _check_location(plan.options.checkpoint_location, self.s3)
        return _BatchWriter(plan, self.s3)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is the complete output mode: every batch sends the whole result again.
        use(self.s3)  # commit() writes the batch markers from this process
        plan = _plan(self.options, schema)
        if plan.options.commit_markers and plan.options.checkpoint_location:
            _check_location(plan.options.checkpoint_location, self.s3)
        return stream_writer(plan)

    def schema(self) -> StructType:
        schema = source_schema(self.options)
        location = self.options.get("checkpointlocation")
        if location:
            _check_location(location, self.s3)
        return schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        use(self.s3)
        return stream_reader(self.options, schema, self.s3)


class _BatchWriter(FailoverBatchWriter):
    """The batch writer, carrying the S3 settings to ``commit``: Spark runs it in a process
    of its own from the pickled writer (inside ``foreachBatch`` it writes a batch marker)."""

    def __init__(self, plan: WritePlan, s3: S3Settings | None) -> None:
        super().__init__(plan)
        self.s3 = s3

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        use(self.s3)
        super().commit(messages)


def _check_location(location: str, s3: S3Settings | None) -> None:
    """Fail now, with one short message, if the checkpoint location cannot be served."""
    try:
        check_location(location, s3)
    except SparkOptionError as exc:
        raise exc.with_traceback(None) from None


def _plan(options: Mapping[str, str], schema: StructType) -> WritePlan:
    try:
        return WritePlan.build(options, schema)
    except SparkOptionError as exc:
        # Spark shows the user this error's traceback: one frame says where, the message what.
        raise exc.with_traceback(None) from None


def register(spark: SparkSession) -> str:
    """Register the data source with ``spark``; returns its format name (``"failover"``).

    Call it once per session, on any thread: ``format("failover")`` then works from every
    Python thread of the session. The session's ``spark.hadoop.fs.s3a.*`` settings (endpoint,
    keys, path style) are read here and carried to every process that reads or writes the
    spool and the commit markers under an ``s3a://`` checkpoint location: set them before.
    """
    s3 = from_session(spark)
    use(s3)  # foreach_batch_sink commits from this process
    spark.dataSource.register(_with_settings(s3) if s3 else FailoverDataSource)
    visible_from_threads(FORMAT)
    return FORMAT


def _with_settings(s3: S3Settings) -> type[FailoverDataSource]:
    """A subclass carrying ``s3``: defined here, it is pickled by value, settings included,
    into the processes Spark starts for the data source (the base class is pickled by name)."""
    return type(
        "FailoverDataSource",
        (FailoverDataSource,),
        {"s3": s3, "__module__": __name__, "__qualname__": "register.<locals>.FailoverDataSource"},
    )
