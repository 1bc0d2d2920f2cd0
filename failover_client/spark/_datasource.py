"""The ``failover`` data source that Spark finds by name, and the one-line registration.

Spark calls ``writer()`` / ``streamWriter()`` on the driver when a query starts (in a Python
worker of the driver), so options and columns are validated there: a mistake fails the query
at once with a :class:`SparkOptionError` that names the option. The writer returned carries
only plain values; connections are made on the executors. ``schema()`` / ``streamReader()``
serve the source (:mod:`._source`): ``schema()`` checks every source option at ``load()``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from failover_client.spark._options import SparkOptionError
from failover_client.spark._source import source_schema, stream_reader
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
        return FailoverBatchWriter(_plan(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is the complete output mode: every batch sends the whole result again.
        return stream_writer(_plan(self.options, schema))

    def schema(self) -> StructType:
        return source_schema(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return stream_reader(self.options, schema)


def _plan(options: Mapping[str, str], schema: StructType) -> WritePlan:
    try:
        return WritePlan.build(options, schema)
    except SparkOptionError as exc:
        # Spark shows the user this error's traceback: one frame says where, the message what.
        raise exc.with_traceback(None) from None


def register(spark: SparkSession) -> str:
    """Register the data source with ``spark``; returns its format name (``"failover"``)."""
    spark.dataSource.register(FailoverDataSource)
    return FORMAT
