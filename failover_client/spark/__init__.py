"""Spark Structured Streaming and batch writes to brokers that fail over (PySpark 4 data source).

Sink::

    from failover_client.spark import register
    register(spark)                                   # once per SparkSession
    (df.writeStream.format("failover")
        .option("uri", "failover:(stomp://a:61613,stomp://b:61613)")
        .option("destination", "/queue/orders")
        .option("checkpointLocation", "/checkpoints/orders")
        .start())

Each task sends its partition through a ``FailoverConnection`` that its Python worker opened
and keeps for later tasks, and ends only when the broker confirmed every row; a failure fails
the task and Spark retries it. At-least-once: a row can arrive twice (a retried task, a fail-over,
a replayed batch), always with the same ``failover-message-id`` (see :data:`OPTIONS` for the
options, :func:`foreach_batch_sink` for ``foreachBatch`` users). Importing this package needs
PySpark and pyarrow: ``pip install 'failover-client[spark]'``.
"""

from __future__ import annotations

from failover_client._errors import PartitionNotConfirmed, RowError, SparkOptionError, SpoolGap
from failover_client.spark._commit import MARKER_DIRECTORY, BatchRecord, PartitionReport
from failover_client.spark._connections import close_all as close_connections
from failover_client.spark._datasource import FORMAT, FailoverDataSource, register
from failover_client.spark._foreach import ForeachBatchSink, foreach_batch_sink
from failover_client.spark._options import (
    OPTIONS,
    OptionInfo,
    SinkOptions,
    SourceOptions,
    sink_options,
    source_options,
)

__all__ = [
    "FORMAT",
    "MARKER_DIRECTORY",
    "OPTIONS",
    "BatchRecord",
    "FailoverDataSource",
    "ForeachBatchSink",
    "OptionInfo",
    "PartitionNotConfirmed",
    "PartitionReport",
    "RowError",
    "SinkOptions",
    "SourceOptions",
    "SparkOptionError",
    "SpoolGap",
    "close_connections",
    "foreach_batch_sink",
    "register",
    "sink_options",
    "source_options",
]
