"""A Spark streaming job from one queue to another, failing over on both sides.

Messages are read from ``--source`` with the ``failover`` source, their bodies upper-cased,
and written to ``--sink`` with the ``failover`` sink; both talk to the brokers of ``--uri``
(or ``--sink-uri``) and follow them when one dies::

    python examples/spark_stream.py \\
        --uri 'failover:(stomp://127.0.0.1:61613,stomp://127.0.0.1:61623)?randomize=false' \\
        --source /queue/orders --sink /queue/orders.shouted --checkpoint /tmp/orders-checkpoint

What holds end to end (at-least-once, with copies recognisable by id):

* the source acknowledges a message only after Spark committed the micro-batch that holds
  it, and spools every batch under the checkpoint first, so a restarted job (same
  ``--checkpoint``) replays an unfinished batch exactly and resumes where it stopped;
* the sink returns from a task only when the broker confirmed every row, and a failed task
  or a replayed batch sends the same rows again;
* each output message carries its input message's id (``messageIdColumn``) as its
  ``failover-message-id``, so whoever reads ``--sink`` can drop a copy by id.

Each micro-batch prints a line; Ctrl-C stops the query and the job. Needs
``pip install 'failover-client[spark]'`` and a Java runtime (17+).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import coalesce, col, concat, lit, upper
from pyspark.sql.streaming import StreamingQueryListener

from failover_client.spark import FORMAT, register


class BatchPrinter(StreamingQueryListener):
    """One line per micro-batch (Spark calls listeners on its own thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        with self.lock:
            print(f"query started: {event.id}", flush=True)

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.numInputRows:
            with self.lock:
                print(f"batch {progress.batchId}: {progress.numInputRows} message(s)", flush=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self.lock:
            print(f"query ended{f': {event.exception}' if event.exception else ''}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="failover URI of the source's brokers")
    parser.add_argument("--sink-uri", help="failover URI of the sink's brokers (default --uri)")
    parser.add_argument("--source", required=True, help="queue(s) to read, comma-separated")
    parser.add_argument("--sink", required=True, help="queue to write")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument("--batch", type=int, default=1000, help="most messages per micro-batch")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2]"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = SparkSession.builder.master(args.master).appName("failover-stream").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.streams.addListener(BatchPrinter())

    messages = (
        spark.readStream.format(FORMAT)
        .option("uri", args.uri)
        .option("destination", args.source)
        .option("checkpointLocation", args.checkpoint)  # the spool lives under it
        .option("maxMessagesPerBatch", args.batch)
        .option("bodyAsString", "true")
        .load()
    )
    # The input's id goes with the output (the spool offset for a message without one).
    input_id = coalesce(col("message_id"), concat(lit("offset-"), col("offset").cast("string")))
    shouted = messages.select(upper(col("body_string")).alias("value"), input_id.alias("id"))
    query = (
        shouted.writeStream.format(FORMAT)
        .option("uri", args.sink_uri or args.uri)
        .option("destination", args.sink)
        .option("messageIdColumn", "id")
        .option("checkpointLocation", args.checkpoint)
        .start()
    )
    error: Exception | None = None
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    except Exception as exc:  # noqa: BLE001 - the query's failure, reported below
        error = exc
    finally:
        query.stop()
        spark.stop()
    if error is not None:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
