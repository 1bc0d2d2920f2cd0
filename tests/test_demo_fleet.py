"""The demo's fleet records: where each client is, the moves that took it there, the table rows."""

from __future__ import annotations

import io

from failover_client._events import Connected, Disconnected, FailedOver, Rebalanced
from failover_client.demo._fleet import FleetEvents, fleet_summary
from failover_client.demo._live import PlainView
from failover_client.demo._record import Move, Recorder
from failover_client.testing import FakeClock

LABELS = {"stomp://a:1": "A", "stomp://b:2": "B", "stomp://c:3": "C"}


def _label(broker: str | None) -> str:
    return LABELS.get(broker or "", "-")


def _fleet_client(recorder: Recorder) -> FleetEvents:
    return FleetEvents("fleet-01", recorder, PlainView(io.StringIO(), every=5.0), _label, 1)


def test_a_switch_places_the_client_together_with_its_move() -> None:
    clock = FakeClock(start=10.0)
    recorder = Recorder(clock)
    recorder.start()
    client = _fleet_client(recorder)
    client(Connected("stomp://a:1", 1, 0.0))
    assert recorder.wait_placed({"fleet-01": "A"}, timeout=0)
    clock.advance(1.0)
    # A rebalancing switch says Connected, then Rebalanced: whoever waits for the client on B
    # (the demo's end of the run, its next step) must find the move to B recorded as well.
    client(Connected("stomp://b:2", 1, 0.0))
    assert not recorder.wait_placed({"fleet-01": "B"}, timeout=0)
    client(Rebalanced("stomp://a:1", "stomp://b:2"))
    assert recorder.wait_placed({"fleet-01": "B"}, timeout=0)
    assert recorder.snapshot().moves == (Move(1.0, "fleet-01", "A", "B", "rebalance"),)


def test_a_failover_places_the_client_nowhere_then_with_its_move() -> None:
    clock = FakeClock(start=10.0)
    recorder = Recorder(clock)
    recorder.start()
    client = _fleet_client(recorder)
    client(Connected("stomp://a:1", 1, 0.0))
    clock.advance(1.0)
    client(Disconnected("stomp://a:1", None))
    assert recorder.wait_placed({"fleet-01": "-"}, timeout=0)
    client(Connected("stomp://c:3", 1, 0.0))
    client(FailedOver("stomp://a:1", "stomp://c:3", 0.01))
    snap = recorder.snapshot()
    assert [where for _, _, where in snap.positions] == ["A", "-", "C"]
    assert snap.moves == (Move(1.0, "fleet-01", "A", "C", "failover"),)


def test_a_start_s_row_is_taken_before_the_start_not_when_the_broker_answers() -> None:
    clock = FakeClock(start=0.0)
    recorder = Recorder(clock)
    recorder.start()
    client = _fleet_client(recorder)
    client(Connected("stomp://b:2", 1, 0.0))
    clock.advance(1.0)
    recorder.mark("kill", "A")
    clock.advance(1.0)
    recorder.mark("start", "A")
    clock.advance(1.0)
    # A client reaches A as soon as it listens, before start() has seen it answer.
    client(Connected("stomp://a:1", 1, 0.0))
    client(Rebalanced("stomp://b:2", "stomp://a:1"))
    clock.advance(1.0)
    recorder.mark("up", "A")
    clock.advance(1.0)
    recorder.end()
    summary = fleet_summary(recorder.snapshot(), ["A", "B"])
    assert summary is not None
    assert summary.rows == (
        ("before kill A", 1.0, (0, 1)),
        ("before start A", 2.0, (0, 1)),
        ("end", 5.0, (1, 0)),
    )
