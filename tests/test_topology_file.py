"""The ``file`` topology source, on a fake clock: what it reads, when it pushes, how it stops."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator

import pytest
from failover_client.uri import BrokerAddress, ServerListAction

from failover_client import ConfigurationError, FailoverConnection
from failover_client._throttle import LogThrottle
from failover_client.testing import FakeClock, FakeConnector
from failover_client.topology import BaseSink, FileSource, parse_broker_list, read_broker_file

SAFETY = 5.0  # real seconds, only against a hung test
A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
C = BrokerAddress("stomp", "c", 61614)


class Sink(BaseSink):
    """Records every update; ``fail`` makes the next one raise (a buggy sink)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[tuple[tuple[BrokerAddress, ...], str, ServerListAction | None]] = []
        self.fail = False

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append((tuple(update), source, action))
            self.cond.notify_all()
            if self.fail:
                self.fail = False
                raise RuntimeError("sink bug")

    def wait_for(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.updates) >= count, SAFETY)

    def lists(self) -> list[tuple[BrokerAddress, ...]]:
        with self.cond:
            return [brokers for brokers, _, _ in self.updates]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def running(tmp_path, clock) -> Iterator[tuple[FileSource, Sink]]:
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    source = FileSource(path, interval=10.0, clock=clock, action="add", name="brokers-file")
    sink = Sink()
    source.start(sink)
    try:
        yield source, sink
    finally:
        source.stop()


def test_reads_uris_skipping_comments_blanks_duplicates_and_bad_lines(tmp_path, caplog):
    path = tmp_path / "brokers.txt"
    path.write_text(
        "# the brokers\n"
        "stomp://a:61613   # first\n"
        "\n"
        "stomp://a:notaport\n"
        "failover:(stomp://b:61613,stomp://c:61614)\n"
        "stomp://a:61613\n"
    )
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        assert read_broker_file(path) == (A, B, C)
    (record,) = caplog.records
    assert f"{path}:4: skipped" in record.getMessage()
    assert "bad port 'notaport'" in record.getMessage()


def test_a_bad_line_never_shows_a_password(tmp_path, caplog):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://user:s3cret@a:bad\n")
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        assert read_broker_file(path) == ()
    assert ":1: skipped" in caplog.text
    assert "s3cret" not in caplog.text


def test_pushes_the_list_at_start_and_then_only_when_it_changed(running, clock, tmp_path):
    _source, sink = running
    assert sink.wait_for(1)
    assert sink.updates == [((A,), "brokers-file", "add")]
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)  # unchanged: read, not pushed
    assert clock.wait_for_deadline(20.0)
    (tmp_path / "brokers.txt").write_text("stomp://a:61613\nstomp://b:61613\n")
    clock.advance(10.0)
    assert sink.wait_for(2)
    assert sink.lists() == [(A,), (A, B)]


def test_an_unreadable_file_keeps_the_last_list_and_the_source_goes_on(
    running, clock, tmp_path, caplog
):
    _source, sink = running
    path = tmp_path / "brokers.txt"
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(10.0)
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        clock.advance(10.0)
        assert clock.wait_for_deadline(20.0)
    assert "cannot read" in caplog.text
    path.write_text("stomp://b:61613\n")
    clock.advance(10.0)
    assert sink.wait_for(2)
    assert sink.lists() == [(A,), (B,)]


def test_a_sink_that_raises_does_not_stop_the_source(running, clock, tmp_path, caplog):
    _source, sink = running
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(10.0)
    sink.fail = True
    (tmp_path / "brokers.txt").write_text("stomp://b:61613\n")
    with caplog.at_level(logging.ERROR, logger="failover_client.topology"):
        clock.advance(10.0)
        assert clock.wait_for_deadline(20.0)
    assert "sink failed" in caplog.text
    (tmp_path / "brokers.txt").write_text("stomp://c:61614\n")
    clock.advance(10.0)
    assert sink.wait_for(3)
    assert sink.lists() == [(A,), (B,), (C,)]


def test_stop_ends_the_thread_without_time_passing_and_is_idempotent(running, clock):
    source, sink = running
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(10.0)
    source.stop()
    source.stop()
    assert clock.waiters() == 0
    assert clock.monotonic() == 0.0
    assert repr(source).endswith("stopped)")
    assert not [
        t for t in threading.enumerate() if t.name == "failover-client-topology-brokers-file"
    ]
    with pytest.raises(RuntimeError, match="already started"):
        source.start(sink)


def test_a_source_that_never_started_stops_quietly(tmp_path):
    source = FileSource(tmp_path / "none.txt")
    source.stop()
    assert repr(source).startswith("FileSource(")


def test_interval_must_be_positive(tmp_path):
    with pytest.raises(ConfigurationError, match="interval must be > 0, got 0"):
        FileSource(tmp_path / "b.txt", interval=0)


def test_a_failover_connection_takes_the_file_s_list(tmp_path, clock):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\nstomp://c:61614\n")
    source = FileSource(path, interval=10.0, clock=clock, action="add")
    conn = FailoverConnection(
        (A,), connector=FakeConnector(clock=clock), clock=clock, topology=[source]
    )
    try:
        conn.connect()  # starts the source with the connection's sink
        assert clock.wait_for_deadline(10.0)
        assert [s.address for s in conn.pool.states()] == [A, C]
    finally:
        conn.close()


def test_a_list_of_thousands_of_bad_entries_costs_a_few_lines_and_repeats_are_counted(caplog):
    clock = FakeClock()
    throttle = LogThrottle(logging.getLogger("failover_client.topology"), clock=clock.monotonic)
    text = "\n".join(f"not a uri {n}" for n in range(3_000)) + "\nstomp://a:61613\n"
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        for _ in range(3):  # re-read within the minute: nothing new is said
            assert parse_broker_list(text, "big.txt", throttle=throttle) == (A,)
        assert len(caplog.records) == 6
        assert caplog.records[-1].getMessage() == (
            "big.txt: skipped 2995 more entries that are not broker URIs"
        )
        clock.advance(60.0)
        assert parse_broker_list(text, "big.txt", throttle=throttle) == (A,)
    assert len(caplog.records) == 12
    assert "(2 similar messages suppressed in the last 60 s)" in caplog.records[-1].getMessage()
