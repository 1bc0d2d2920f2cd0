"""``foreachBatch`` for users of the classic API: each micro-batch sent like the data source does.

``df.writeStream.foreachBatch(foreach_batch_sink(uri, destination=...))`` writes every
micro-batch through the ``failover`` data source (registered on the batch's session on first
use), as a batch ``df.write``: each task sends through its worker's cached connection and
returns once every row was confirmed. A job started inside ``foreachBatch`` carries the query's
id and the batch id as local properties, so the ids are the same as the streaming sink's
(query, batch, partition, row index) and a batch Spark replays after a restart carries the same
ids; the commit writes the batch's marker when ``checkpointLocation`` is given here
(``foreachBatch`` does not tell its function the query's checkpoint).

Why not ``mapInArrow`` or an RDD job: the first needs pandas, and on PySpark 4.0 an RDD
``collect`` inside ``foreachBatch`` leaks a socket per batch.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from failover_client.spark._datasource import FORMAT, register
from failover_client.spark._options import SinkOptions, sink_options

__all__ = ["ForeachBatchSink", "foreach_batch_sink"]


def foreach_batch_sink(uri: str, /, **options: object) -> ForeachBatchSink:
    """A function for ``foreachBatch``; options as for the data source, as keyword arguments.

    ``foreach_batch_sink(uri, destination="/queue/out", bodyColumn="payload")``. Validated
    now (SparkOptionError); columns are checked against each batch's schema.
    """
    raw = {key: _text(value) for key, value in options.items()}
    raw["uri"] = uri
    return ForeachBatchSink(raw, sink_options(raw))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class ForeachBatchSink:
    """Call it with ``(batch_df, batch_id)``: sends the batch, returns when all is confirmed."""

    def __init__(self, raw: dict[str, str], options: SinkOptions) -> None:
        self._raw = dict(raw)
        self.options = options

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        register(batch.sparkSession)
        batch.write.format(FORMAT).options(**self._raw).mode("append").save()

    def __repr__(self) -> str:
        return f"ForeachBatchSink({self.options!r})"
