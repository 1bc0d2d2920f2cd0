"""The demo's pure parts: scenario script, recorder, summary, timeline data, event lines."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from failover_client._errors import BrokerUnavailable
from failover_client._events import (
    Connected,
    Disconnected,
    FailedOver,
    PriorityRestored,
    ReconnectAttempt,
    TopologyChanged,
)
from failover_client.cli._output import plain_table
from failover_client.demo import (
    Scenario,
    Step,
    build_timeline,
    full_scenario,
    plot_timeline,
    quick_scenario,
    summarize,
)
from failover_client.demo._clients import ClientEvents, Labeller
from failover_client.demo._live import BrokerRow, ClientRow, PlainView, ViewState, format_event
from failover_client.demo._record import EventLine, FailoverTime, Mark, Recorder
from failover_client.demo._run import DemoConfig, _Demo
from failover_client.demo._summary import summary_tables
from failover_client.demo._timeline import mark_text
from failover_client.testing import FakeClock

# --- scenario -------------------------------------------------------------------------------


def test_full_scenario_fits_the_time_budget_and_adds_one_broker() -> None:
    scenario = full_scenario()
    assert scenario.duration + scenario.settle <= 60
    assert [(s.at, s.action, s.target) for s in scenario.steps] == [
        (5, "kill", "producer"),
        (11, "hang", "consumer"),
        (17, "resume", "hung"),
        (20, "start", "dead"),
        (27, "kill", "consumer"),
        (32, "start", "dead"),
        (36, "add", "D"),
    ]
    assert scenario.total_brokers == 4
    assert scenario.added_labels() == ("D",)


def test_quick_scenario_is_short() -> None:
    scenario = quick_scenario()
    assert scenario.duration + scenario.settle <= 25
    assert [s.action for s in scenario.steps] == ["kill", "hang", "resume", "start", "add"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Step(-1, "kill", "A", ""), "at=-1 is before the start"),
        (lambda: Step(1, "explode", "A", ""), "unknown action 'explode'"),  # type: ignore[arg-type]
        (lambda: Step(1, "kill", "nobody", ""), "step target 'nobody'"),
        (lambda: Step(1, "add", "producer", ""), "name the new broker's label"),
        (
            lambda: Scenario("s", (Step(2, "kill", "A", ""), Step(1, "kill", "B", "")), 5, 1),
            "not in time order",
        ),
        (lambda: Scenario("s", (Step(5, "kill", "A", ""),), 5, 1), "is not before the end"),
        (lambda: Scenario("s", (), 5, -1), "settle must be >= 0"),
    ],
)
def test_invalid_scripts_are_refused(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


# --- recorder and summary --------------------------------------------------------------------


def recorded() -> Recorder:
    clock = FakeClock(start=100.0)
    recorder = Recorder(clock)
    recorder.start()
    for number in range(5):
        recorder.sent()
        clock.advance(0.5)
        if number == 4:
            recorder.unconfirmed("m-4", "SendTimeout: late")
        else:
            recorder.confirmed(f"m-{number}", "A" if number < 2 else "B")
    recorder.received("m-0", "C")
    recorder.received("m-1", "C")
    clock.advance(1.0)
    recorder.received("m-1", "B")  # a re-sent message delivered twice
    recorder.mark("kill", "A", "dies")
    recorder.failover("producer", "A", "B", 16.4, "failover")
    return recorder


def test_recorder_snapshot_times_are_relative_to_start() -> None:
    snap = recorded().snapshot()
    assert snap.sent == 5
    assert snap.confirmed == (
        (0.5, "m-0", "A"),
        (1.0, "m-1", "A"),
        (1.5, "m-2", "B"),
        (2.0, "m-3", "B"),
    )
    assert snap.unconfirmed == (("m-4", "SendTimeout: late"),)
    assert snap.received == ((2.5, "m-0", "C"), (2.5, "m-1", "C"), (3.5, "m-1", "B"))
    assert snap.marks == (Mark(3.5, "kill", "A", "dies"),)
    assert snap.failovers == (FailoverTime(3.5, "producer", "A", "B", 16.4, "failover"),)


def test_summary_counts_lost_and_duplicates() -> None:
    summary = summarize(recorded().snapshot(), drained_ids=["m-2", "m-2"])
    assert summary.sent == 5
    assert summary.confirmed == 4
    assert summary.unconfirmed == 1
    assert summary.received == 3
    assert summary.drained == 2
    assert summary.lost == ("m-3",)
    assert summary.duplicates == 2  # m-1 twice to the consumer, m-2 twice in the drain
    assert not summary.ok


def test_summary_is_ok_when_every_confirmed_id_turned_up() -> None:
    summary = summarize(recorded().snapshot(), drained_ids=["m-3", "m-2"])
    assert summary.lost == ()
    assert summary.ok


def test_lost_ids_sort_numerically() -> None:
    clock = FakeClock()
    recorder = Recorder(clock)
    for message_id in ("m-10", "m-9", "m-100"):
        recorder.confirmed(message_id, "A")
    assert summarize(recorder.snapshot(), []).lost == ("m-9", "m-10", "m-100")


def test_summary_tables_text() -> None:
    tables = summary_tables(summarize(recorded().snapshot(), ["m-3", "m-2"]))
    assert plain_table(tables[0]).splitlines()[2].split() == ["5", "4", "1", "3", "2", "0", "1"]
    assert plain_table(tables[1]).splitlines()[2].split() == [
        "3.5",
        "producer",
        "A",
        "B",
        "failover",
        "16",
    ]


def test_wait_settled_returns_at_once_when_everything_arrived() -> None:
    recorder = recorded()
    assert recorder.wait_settled(["m-0", "m-1"], quiet=60.0, timeout=60.0) is True


# --- timeline ------------------------------------------------------------------------------


def test_timeline_bins_points_per_broker() -> None:
    marks = (Mark(1.2, "kill", "A"),)
    timeline = build_timeline(
        [(0.1, "A"), (0.9, "A"), (1.5, "B"), (2.99, "B"), (7.0, "B")],
        [(0.5, "C"), (2.0, "B")],
        marks,
        end=3.0,
    )
    assert timeline.bins == 3
    assert timeline.starts == (0.0, 1.0, 2.0)
    # A point after ``end`` lands in the last bin rather than being dropped.
    assert timeline.confirmed == {"A": (2, 0, 0), "B": (0, 1, 2)}
    assert timeline.received == {"B": (0, 0, 1), "C": (1, 0, 0)}
    assert timeline.marks == marks


def test_timeline_bucket_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bucket must be > 0"):
        build_timeline([], [], [], end=1.0, bucket=0)


@pytest.mark.parametrize(
    ("mark", "text"),
    [
        (Mark(1, "kill", "A"), "kill A"),
        (Mark(1, "hang", "C"), "hang C"),
        (Mark(1, "up", "A"), "A up"),
        (Mark(1, "joined", "D"), "D joins"),
    ],
)
def test_mark_text(mark: Mark, text: str) -> None:
    assert mark_text(mark) == text


def test_plot_writes_a_png(tmp_path: Path) -> None:
    timeline = build_timeline(
        [(0.5, "A"), (1.5, "B")], [(0.6, "A")], [Mark(1.0, "kill", "A")], end=2
    )
    path = plot_timeline(timeline, tmp_path / "sub" / "t.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- event lines ---------------------------------------------------------------------------


class Lines:
    def __init__(self) -> None:
        self.lines: list[EventLine] = []
        self.infos: list[str] = []

    def info(self, text: str) -> None:
        self.infos.append(text)

    def event(self, line: EventLine) -> None:
        self.lines.append(line)

    def refresh(self, state: ViewState) -> None:
        raise AssertionError("not used")

    def close(self) -> None:
        return None


def test_labeller_maps_ports_to_labels() -> None:
    label = Labeller({20001: "A", 20003: "B"})
    assert label("stomp://127.0.0.1:20003") == "B"
    assert label("stomp://127.0.0.1:9") == "?"
    assert label(None) == "-"


def test_client_events_become_lines_and_failover_records() -> None:
    recorder = Recorder(FakeClock())
    view = Lines()
    listener = ClientEvents("producer", recorder, view, Labeller({1: "A", 2: "B", 4: "D"}))
    listener(Connected("stomp://h:1", 1, 0.01))
    listener(Disconnected("stomp://h:1", BrokerUnavailable("gone")))
    listener(ReconnectAttempt("stomp://h:2", 1, 0.0))  # too noisy: not shown
    listener(FailedOver("stomp://h:1", "stomp://h:2", 0.0425))
    listener(PriorityRestored("stomp://h:2", "stomp://h:1"))
    listener(TopologyChanged(("stomp://h:4",), (), "demo"))
    assert [line.text for line in view.lines] == [
        "connected to A",
        "lost broker A (BrokerUnavailable)",
        "failed over A -> B in 42 ms",
        "back on priority broker A (left B)",
        "broker list changed (demo): added D",
    ]
    assert [
        (f.from_label, f.to_label, round(f.ms, 1), f.kind) for f in recorder.snapshot().failovers
    ] == [
        ("A", "B", 42.5, "failover"),
        ("B", "A", 0.0, "priority return"),
    ]


def test_plain_view_logs_events_and_a_status_line_every_few_seconds() -> None:
    stream = io.StringIO()
    view = PlainView(stream, every=5.0)
    state = ViewState(
        0.2,
        19.0,
        "traffic",
        (ClientRow("producer", "A", "connected", 99.6, 20),),
        (BrokerRow("A", "stomp://h:1", "up"), BrokerRow("B", "stomp://h:2", "dead")),
        (),
    )
    view.refresh(state)
    view.refresh(state)  # within five seconds: nothing new
    view.event(EventLine(3.04, "producer", "failed over A -> B in 12 ms"))
    assert stream.getvalue() == (
        "[   0.2 s] traffic: producer on A (connected) 100 msg/s, 20 total | brokers A:up B:dead\n"
        "[   3.0 s] producer: failed over A -> B in 12 ms\n"
    )
    assert format_event(EventLine(12.34, "c", "x")) == "[  12.3 s] c: x"


def test_shutdown_after_an_interrupt_before_the_view_thread_started() -> None:
    # Ctrl-C right after "traffic started" can come before the view thread's start().
    demo = _Demo(DemoConfig(scenario=quick_scenario()), io.StringIO(), FakeClock())
    demo._ticker = threading.Thread(target=demo.stop.wait)
    demo.shutdown(interrupted=True)  # no "cannot join thread before it is started"
    assert demo.stop.is_set()
    assert not demo._ticker.is_alive()
