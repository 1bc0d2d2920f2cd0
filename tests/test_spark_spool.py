"""The source's spool on a local directory: batch files, commits, position, gaps, identity.

No Spark and no broker: the spool is files written through pyarrow's filesystems.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from failover_client.spark import SparkOptionError
from failover_client.spark._spool import (
    SPOOL_DIRECTORY,
    Spool,
    SpoolBatch,
    SpoolGap,
    absolute_url,
    read_batch,
)
from tests.spool_support import SpooledMessage, table_of

IDENTITY = {"destinations": ["/queue/in"], "selector": None}


def message(number: int, *, message_id: str | None = "") -> SpooledMessage:
    return SpooledMessage(
        body=f"body-{number}".encode(),
        headers={"n": str(number)},
        destination="/queue/in",
        message_id=f"id-{number}" if message_id == "" else message_id,
        timestamp_ms=1_700_000_000_000 + number,
        redelivered=number % 2 == 1,
        broker="stomp://a:61613",
    )


def batch_of(start: int, count: int) -> pa.Table:
    return table_of([message(n) for n in range(start, start + count)])


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool.open(str(tmp_path / "checkpoint"), IDENTITY)


def files(spool: Spool) -> list[str]:
    return sorted(os.listdir(spool.url))


# --- writing and reading -----------------------------------------------------------------------


def test_a_new_spool_starts_at_zero_with_nothing_committed(spool: Spool) -> None:
    state = spool.state()
    assert (state.position, state.committed_end, state.batches) == (0, 0, ())
    assert spool.url.endswith(f"/checkpoint/{SPOOL_DIRECTORY}")


def test_a_batch_file_holds_its_messages_with_their_offsets(spool: Spool) -> None:
    written = spool.write(0, batch_of(0, 3))
    assert written == SpoolBatch(0, 3)
    assert written.name == f"batch-{0:019d}-{3:019d}.arrow"
    table = read_batch(spool.url, written.name)
    rows = table.to_pylist()
    assert [r["offset"] for r in rows] == [0, 1, 2]
    assert [r["body"] for r in rows] == [b"body-0", b"body-1", b"body-2"]
    assert rows[1]["headers"] == [("n", "1")]
    assert rows[1]["redelivered"] is True
    assert rows[2]["message_id"] == "id-2"
    assert rows[0]["broker"] == "stomp://a:61613"
    assert rows[0]["timestamp"].timestamp() == 1_700_000_000.0


def test_position_is_the_end_of_the_last_batch_on_disk(spool: Spool) -> None:
    spool.write(0, batch_of(0, 3))
    spool.write(3, batch_of(3, 2))
    # Another process (a restarted driver) sees the same position.
    again = Spool(spool.url).state()
    assert again.position == 5
    assert again.batches == (SpoolBatch(0, 3), SpoolBatch(3, 5))


def test_files_are_listed_in_offset_order_past_one_digit(spool: Spool) -> None:
    spool.write(0, batch_of(0, 9))
    spool.write(9, batch_of(9, 2))
    spool.write(11, batch_of(11, 100))
    assert [b.start for b in spool.state().batches] == [0, 9, 11]


def test_a_write_the_process_did_not_finish_is_removed(spool: Spool) -> None:
    spool.write(0, batch_of(0, 1))
    leftover = Path(spool.url) / ".batch-0000000000000000001-0000000000000000002.arrow.ab.tmp"
    leftover.write_bytes(b"half a file")
    assert spool.state().position == 1
    assert not leftover.exists()


def test_messages_without_an_id_or_a_timestamp_are_kept(spool: Spool) -> None:
    bare = SpooledMessage(b"", {}, "/queue/in", None, None, False, None)
    spool.write(0, table_of([bare]))
    row = read_batch(spool.url, SpoolBatch(0, 1).name).to_pylist()[0]
    assert (row["message_id"], row["timestamp"], row["broker"], row["body"]) == (
        None,
        None,
        None,
        b"",
    )


# --- committing --------------------------------------------------------------------------------


def test_a_committed_batch_leaves_its_ids_and_loses_its_data(spool: Spool) -> None:
    spool.write(0, batch_of(0, 3))
    spool.write(3, batch_of(3, 2))
    done = spool.commit(3, lambda batch: None)
    assert done == [SpoolBatch(0, 3)]
    assert files(spool) == [
        SpoolBatch(3, 5).name,
        SpoolBatch(0, 3).committed_name,
        "source.json",
    ]
    state = spool.state()
    assert (state.committed_end, state.position, state.batches) == (3, 5, (SpoolBatch(3, 5),))
    assert spool.committed_ids(SpoolBatch(0, 3)) == ["id-0", "id-1", "id-2"]


def test_commit_uses_the_ids_the_caller_knows(spool: Spool) -> None:
    spool.write(0, batch_of(0, 2))
    spool.commit(2, lambda batch: ["known-a", None, "known-b"])
    assert spool.committed_ids(SpoolBatch(0, 2)) == ["known-a", "known-b"]


def test_the_position_survives_when_every_batch_was_committed(spool: Spool) -> None:
    spool.write(0, batch_of(0, 4))
    spool.commit(4, lambda batch: None)
    state = Spool(spool.url).state()
    assert (state.batches, state.committed_end, state.position) == ((), 4, 4)


def test_commit_below_the_first_batch_end_changes_nothing(spool: Spool) -> None:
    spool.write(0, batch_of(0, 4))
    assert spool.commit(2, lambda batch: None) == []
    assert spool.state().batches == (SpoolBatch(0, 4),)


def test_a_commit_interrupted_before_the_delete_is_finished_on_the_next_scan(spool: Spool) -> None:
    spool.write(0, batch_of(0, 2))
    record = {"start": 0, "end": 2, "ids": ["id-0", "id-1"]}
    (Path(spool.url) / SpoolBatch(0, 2).committed_name).write_text(json.dumps(record))
    state = spool.state()
    assert (state.batches, state.committed_end) == ((), 2)
    assert SpoolBatch(0, 2).name not in files(spool)


def test_old_id_records_are_pruned_beyond_the_retention(tmp_path: Path) -> None:
    spool = Spool.open(str(tmp_path), IDENTITY, retained=5)
    for start in range(0, 12, 3):
        spool.write(start, batch_of(start, 3))
        spool.commit(start + 3, lambda batch: None)
    committed = spool.state().committed
    # The newest records holding at least 5 ids: 9..11 and 6..8.
    assert committed == (SpoolBatch(6, 9), SpoolBatch(9, 12))
    assert spool.state().committed_end == 12


def test_the_newest_id_record_stays_whatever_its_size(tmp_path: Path) -> None:
    spool = Spool.open(str(tmp_path), IDENTITY, retained=1)
    spool.write(0, batch_of(0, 4))
    spool.write(4, batch_of(4, 4))
    spool.commit(8, lambda batch: None)
    assert spool.state().committed == (SpoolBatch(4, 8),)


# --- what Spark asks for -----------------------------------------------------------------------


def test_covering_returns_the_files_of_a_range(spool: Spool) -> None:
    for start in (0, 3, 5):
        spool.write(start, batch_of(start, 3 if start == 0 else 2))
    assert spool.covering(3, 7) == [SpoolBatch(3, 5), SpoolBatch(5, 7)]
    assert spool.covering(0, 3) == [SpoolBatch(0, 3)]
    assert spool.covering(4, 6) == [SpoolBatch(3, 5), SpoolBatch(5, 7)]
    assert spool.covering(7, 7) == []


def test_a_range_the_spool_lacks_is_an_error_that_names_it(spool: Spool) -> None:
    spool.write(0, batch_of(0, 3))
    spool.commit(3, lambda batch: None)
    spool.write(3, batch_of(3, 2))
    with pytest.raises(SpoolGap) as caught:
        spool.covering(0, 5)
    assert "no messages for offsets 0..4" in str(caught.value)
    assert caught.value.option == "checkpointLocation"
    with pytest.raises(SpoolGap, match=r"offsets 5\.\.8"):
        spool.covering(3, 9)


# --- where the spool lives ---------------------------------------------------------------------


def test_a_spool_belongs_to_one_source(tmp_path: Path) -> None:
    Spool.open(str(tmp_path), IDENTITY)
    Spool.open(str(tmp_path), dict(IDENTITY))  # the same source again: fine
    other = {"destinations": ["/queue/other"], "selector": None}
    with pytest.raises(SparkOptionError) as caught:
        Spool.open(str(tmp_path), other)
    assert "belongs to a source of" in str(caught.value)
    assert "/queue/in" in str(caught.value)
    assert caught.value.option == "checkpointLocation"


def test_a_relative_location_becomes_absolute_for_the_executors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_url("ckpt") == str(tmp_path / "ckpt")
    assert absolute_url("hdfs://nn:8020/ckpt") == "hdfs://nn:8020/ckpt"
    assert absolute_url("file:///data/ckpt") == "file:///data/ckpt"
    spool = Spool.open("ckpt", IDENTITY)
    assert spool.url == f"{tmp_path}/ckpt/{SPOOL_DIRECTORY}"


def test_a_file_url_serves_the_same_spool(tmp_path: Path) -> None:
    by_path = Spool.open(str(tmp_path), IDENTITY)
    by_path.write(0, batch_of(0, 2))
    by_url = Spool.open(f"file://{tmp_path}", IDENTITY)
    assert by_url.state().position == 2
    assert read_batch(by_url.url, SpoolBatch(0, 2).name).num_rows == 2
