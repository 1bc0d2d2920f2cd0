"""The Spark source's driver: a batch of deliveries into the spool's Arrow files, old and new path.

Run: ``python benchmarks/bench_spool_table.py [--messages 10000] [--reps 21] [--parts 1]``

In one process, no broker: ``--messages`` deliveries as the engine hands them to the source
(``failover_client.Message`` over a STOMP ``Received`` on one session slot), 128-byte bodies
and the headers ActiveMQ Classic puts on a persistent STOMP 1.2 message sent with the
library's confirmation window (``content-length``, ``expires``, ``destination``,
``subscription``, ``priority``, ``message-id``, ``persistent``, ``failover-message-id``,
``timestamp``, ``ack``). Each path turns the batch into ``--parts`` spool files in a temporary
directory, in the two steps of the driver's DEBUG timeline:

* ``rows``: old, one named tuple per delivery (headers filtered in a dict, the timestamp parsed
  per row: ``tests/spool_support.py``, the source's code before); new, the table built column
  by column (``failover_client.spark._rows.spool_table``);
* ``spool``: old, each file's table built from its rows, then encoded (offsets from a Python
  range, the stream copied into ``bytes``) and written; new, each file a slice of the one
  table, encoded and written (``write_parts``).

Each repetition runs both paths (in alternating order; a garbage collection before each);
printed are the medians over ``--reps`` in ms per batch, microseconds per message, and old/new.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from failover_client.uri import BrokerAddress

from failover_client import Message
from failover_client.adapter import Received
from failover_client.engine._slot import Slot
from failover_client.spark._fs import Location
from failover_client.spark._partitions import slices, write_parts
from failover_client.spark._rows import spool_table
from failover_client.spark._spool import SPOOL_SCHEMA, Spool, SpoolBatch
from tests.spool_support import SpooledMessage, rows_of, table_of

BODY = 128
IDENTITY = {"destinations": ["/queue/bench"], "selector": None}


def deliveries(count: int) -> list[Message]:
    """``count`` messages as ActiveMQ Classic delivers them over STOMP 1.2 (client-individual)."""
    slot = Slot(1, BrokerAddress("stomp", "broker-a.example", 61613, user="app", password="pw"))
    messages = []
    for n in range(count):
        broker_id = f"ID:broker-a-38271-1700000000000-3:1:1:1:{n + 1}"
        headers = {
            "content-length": str(BODY),
            "expires": "0",
            "destination": "/queue/bench",
            "subscription": "1",
            "priority": "4",
            "message-id": broker_id,
            "persistent": "true",
            "failover-message-id": f"3f2a9c1b7d4e-{n}",
            "timestamp": str(1_700_000_000_000 + n),
            "ack": f"ID:broker-a-38271-1700000000000-5:{n + 1}",
        }
        body = (f"{n:08d}" * (BODY // 8)).encode()
        received = Received("1", "/queue/bench", body, headers, broker_id, headers["ack"])
        messages.append(Message(received, None, slot, None))  # type: ignore[arg-type]
    return messages


def old_path(spool: Spool, messages: list[Message], parts: int) -> tuple[float, float]:
    """(rows, spool) seconds of the per-message path: a named tuple per row, then the files."""
    gc.collect()
    began = time.perf_counter()
    rows = rows_of(messages)
    built = time.perf_counter()
    location = Location(spool.url)
    for begin, end in slices(len(rows), parts):
        location.write_bytes(SpoolBatch(begin, end).name, old_encode(begin, rows[begin:end]))
    return built - began, time.perf_counter() - built


def old_encode(start: int, rows: list[SpooledMessage]) -> bytes:
    """The spool file as the source encoded it before: offsets from a range, the bytes copied."""
    table = table_of(rows)
    offsets = pa.array(range(start, start + len(rows)), type=pa.int64())
    table = table.add_column(0, SPOOL_SCHEMA.field("offset"), offsets)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SPOOL_SCHEMA) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def new_path(spool: Spool, messages: list[Message], parts: int) -> tuple[float, float]:
    """(rows, spool) seconds of the column-built table, then its slices as the files."""
    gc.collect()
    began = time.perf_counter()
    table = spool_table(messages)
    built = time.perf_counter()
    write_parts(spool, 0, table, parts)
    return built - began, time.perf_counter() - built


def one_round(spool: Spool, messages: list[Message], parts: int, first: str) -> dict[str, float]:
    laps: dict[str, float] = {}
    paths = {"old": old_path, "new": new_path}
    for name in sorted(paths, reverse=first == "old"):
        laps[f"{name} rows"], laps[f"{name} spool"] = paths[name](spool, messages, parts)
    return laps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--parts", type=int, default=1)
    args = parser.parse_args()
    messages = deliveries(args.messages)
    with tempfile.TemporaryDirectory(prefix="bench-spool-") as directory:
        spool = Spool.open(directory, IDENTITY)
        one_round(spool, messages, args.parts, "old")  # warm-up: imports, first allocations
        rounds = [
            one_round(spool, messages, args.parts, "old" if n % 2 == 0 else "new")
            for n in range(args.reps)
        ]
    median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    for path in ("old", "new"):
        median[f"{path} total"] = statistics.median(
            r[f"{path} rows"] + r[f"{path} spool"] for r in rounds
        )
    print(
        f"{args.messages:,} messages of {BODY} bytes, {args.parts} file(s), "
        f"medians of {args.reps} rounds, load {os.getloadavg()[0]:.2f}"
    )
    heads = ("old ms", "new ms", "old us/msg", "new us/msg", "old/new")
    print(f"{'step':8}", *(f"{head:>10}" for head in heads))
    for step in ("rows", "spool", "total"):
        old, new = median[f"old {step}"], median[f"new {step}"]
        per = 1e6 / args.messages
        print(
            f"{step:8} {old * 1000:10.1f} {new * 1000:10.1f} {old * per:10.2f} {new * per:10.2f} "
            f"{old / new:10.2f}"
        )


if __name__ == "__main__":
    main()
