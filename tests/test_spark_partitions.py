"""Parallel reads: a batch spooled as ``numPartitions`` files, one Spark partition per file.

No Spark and no broker: the driver runs over the scripted consumer of the source's tests and
a spool in a temporary directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failover_client.spark import SparkOptionError, source_options
from failover_client.spark._driver import SourceDriver
from failover_client.spark._partitions import ids_if_whole, slices
from failover_client.spark._source import FailoverStreamReader, source_schema
from failover_client.spark._spool import Spool, SpoolBatch
from tests.test_spark_source_pure import (
    IDENTITY,
    URI,
    Inline,
    ScriptedConsumer,
    deliveries,
    source,
)


def driver_on(tmp_path: Path, consumer: ScriptedConsumer, parts: int) -> SourceDriver:
    spool = Spool.open(str(tmp_path / "checkpoint"), IDENTITY)
    return SourceDriver(source(tmp_path, numPartitions=str(parts)), spool, consumer, acker=Inline())


def reader_on(driver: SourceDriver, tmp_path: Path) -> FailoverStreamReader:
    options = source(tmp_path, numPartitions="3")
    reader = FailoverStreamReader(options, source_schema(options))
    reader._driver = driver
    return reader


@pytest.mark.parametrize(
    ("count", "parts", "expected"),
    [
        (10, 3, [(0, 4), (4, 7), (7, 10)]),
        (4, 4, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        (2, 4, [(0, 1), (1, 2)]),
        (5, 1, [(0, 5)]),
        (0, 4, []),
    ],
)
def test_slices_are_contiguous_and_even(
    count: int, parts: int, expected: list[tuple[int, int]]
) -> None:
    assert slices(count, parts) == expected


def test_the_option_is_a_positive_integer_default_one(tmp_path: Path) -> None:
    assert source(tmp_path).num_partitions == 1
    assert source(tmp_path, numPartitions="4").num_partitions == 4
    with pytest.raises(SparkOptionError, match="option numPartitions: '0'; valid values"):
        source(tmp_path, numPartitions="0")
    with pytest.raises(SparkOptionError, match="did you mean numPartitions"):
        source_options({"uri": URI, "destination": "/queue/in", "numPartitons": "2"})


def test_a_batch_is_spooled_as_one_file_per_partition(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer, 3)
    consumer.push(*deliveries(*"abcdefg"))
    assert driver.latest(0, None) == 7
    assert driver.spool.state().batches == (SpoolBatch(0, 3), SpoolBatch(3, 5), SpoolBatch(5, 7))
    partitions = reader_on(driver, tmp_path).partitions({"position": 0}, {"position": 7})
    assert [(p.start, p.end) for p in partitions] == [(0, 3), (3, 5), (5, 7)]
    assert len({p.name for p in partitions}) == 3


def test_each_partition_reads_only_its_own_rows(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer, 2)
    consumer.push(*deliveries(*"abcde"))
    driver.latest(0, None)
    reader = reader_on(driver, tmp_path)
    read = []
    for partition in reader.partitions({"position": 0}, {"position": 5}):
        rows = [r for batch in reader.read(partition) for r in batch.to_pylist()]
        read.append([r["message_id"] for r in rows])
    assert read == [["a", "b", "c"], ["d", "e"]]


def test_commit_acknowledges_every_part_and_keeps_each_files_ids(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer, 2)
    sent = deliveries(*"abcd")
    consumer.push(*sent)
    driver.latest(0, None)
    driver.planned(0, 4)
    assert [d.acks for d in sent] == [0, 0, 0, 0]
    driver.commit(4)
    assert [d.acks for d in sent] == [1, 1, 1, 1]
    state = driver.spool.state()
    assert state.batches == ()
    records = [
        json.loads((tmp_path / "checkpoint" / "failover-source" / b.committed_name).read_text())
        for b in state.committed
    ]
    assert [r["ids"] for r in records] == [["a", "b"], ["c", "d"]]


def test_a_restarted_driver_replays_the_same_partitions(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer, 3)
    consumer.push(*deliveries(*"abcdef"))
    driver.latest(0, None)
    before = reader_on(driver, tmp_path).partitions({"position": 0}, {"position": 6})
    # The driver dies before Spark commits; a new one (with another numPartitions even)
    # finds the same files and Spark's replay of 0..6 gets the same partitions and rows.
    restarted = driver_on(tmp_path, ScriptedConsumer(), 1)
    after = reader_on(restarted, tmp_path).partitions({"position": 0}, {"position": 6})
    assert after == before
    assert restarted.position == 6


def test_ids_are_taken_from_the_ledger_only_for_a_whole_batch() -> None:
    assert ids_if_whole(SpoolBatch(0, 2), ["a", "b"]) == ["a", "b"]
    assert ids_if_whole(SpoolBatch(2, 4), ["a", "b", "c", "d"]) is None
    assert ids_if_whole(SpoolBatch(0, 2), None) is None
