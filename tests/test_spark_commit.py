"""The sink's commit records and the files it keeps under a checkpoint (no Spark running)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from failover_client import FailoverConnection
from failover_client.spark import (
    MARKER_DIRECTORY,
    PartitionReport,
    SinkOptions,
    _commit,
    sink_options,
)
from failover_client.spark._commit import log_abort, record_commit
from failover_client.spark._fs import Location
from failover_client.testing import FakeClock, FakeConnector

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"


def options(**extra: str) -> SinkOptions:
    return sink_options({"uri": URI, "destination": "/queue/out", **extra})


# --- commits ------------------------------------------------------------------------------------


def report(partition: int, rows: int) -> PartitionReport:
    return PartitionReport(partition, 0, rows, "f", "l", "q", "5", "stomp://a:61613")


def test_commit_writes_a_marker_and_a_replay_gets_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = options(checkpointLocation=str(tmp_path))
    first = record_commit(sink, 5, [report(1, 3), report(0, 2), None])
    assert (first.rows, first.replay, first.query_id) == (5, 0, "q")
    assert [p.partition for p in first.partitions] == [0, 1]
    marker = tmp_path / MARKER_DIRECTORY / "batch-5.json"
    assert json.loads(marker.read_text())["rows"] == 5

    with caplog.at_level(logging.WARNING, logger="failover_client.spark"):
        again = record_commit(sink, 5, [report(0, 5)])
    assert again.replay == 1
    assert (tmp_path / MARKER_DIRECTORY / "batch-5.replay-1.json").exists()
    assert "batch 5 was committed before (a replay after a restart)" in caplog.text


def test_commit_without_a_checkpoint_or_markers_writes_nothing(tmp_path: Path) -> None:
    record_commit(options(), 1, [report(0, 1)])
    record_commit(options(checkpointLocation=str(tmp_path), commitMarkers="false"), 1, [])
    record_commit(options(checkpointLocation=str(tmp_path)), None, [report(0, 1)])
    assert list(tmp_path.iterdir()) == []


def test_commit_can_send_a_summary_message(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as conn:
        monkeypatch.setattr(_commit, "connection_for", lambda _: conn)
        record_commit(options(commitDestination="/queue/commits"), 5, [report(0, 2)])
        batch = record_commit(options(commitDestination="/queue/c"), None, [], write_id="w1")
    first, second = connector.session("a:61613").sent
    assert first.destination == "/queue/commits"
    assert first.message_id == "q-5-commit-0"
    assert json.loads(first.body)["rows"] == 2
    assert second.message_id == "w1-commit-0"  # a batch df.write is named by its write id
    assert (batch.batch, batch.rows) == (None, 0)


def test_abort_logs_what_was_already_confirmed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="failover_client.spark"):
        rows = log_abort(3, [report(0, 4), None])
    assert rows == 4
    assert "batch 3 aborted; 1 of 2 partitions had confirmed 4 rows" in caplog.text


# --- files under a checkpoint -------------------------------------------------------------------


def test_location_writes_atomically_and_lists(tmp_path: Path) -> None:
    place = Location(str(tmp_path / "a")).child("b")
    assert not place.exists("x.json")
    assert place.names() == []
    place.write_bytes("x.json", b"{}")
    place.write_bytes("x.json", b"[]")
    assert place.read_bytes("x.json") == b"[]"
    assert place.names() == ["x.json"]  # no temporary file left behind
    place.delete("x.json")
    place.delete("x.json")
    assert place.names() == []


def test_location_takes_file_urls_and_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Location(f"file:{tmp_path}").write_bytes("u", b"1")
    monkeypatch.chdir(tmp_path)
    assert Location(".").read_bytes("u") == b"1"
