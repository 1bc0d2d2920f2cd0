"""Bad rows in the sink: the checks a broker would otherwise make, and ``onRowError``.

No Spark session and no broker: rows are tuples, the connection talks to the fake connector.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pyspark.sql.types import MapType, StringType, StructField, StructType

from failover_client import FailoverConnection
from failover_client.spark import PartitionReport, RowError, SparkOptionError, _writer, sink_options
from failover_client.spark._commit import record_commit
from failover_client.spark._layout import row_layout
from failover_client.spark._messages import MessageShape, Outgoing, PartitionMessages, Refusal
from failover_client.spark._rowcheck import MAX_HEADER_LINE, RowRules
from failover_client.spark._rowerrors import (
    ORIGINAL_DESTINATION_HEADER,
    ROW_ERROR_HEADER,
    RefusedRows,
)
from failover_client.spark._send import send_all
from failover_client.spark._writer import WritePlan, write_partition
from failover_client.testing import FakeClock, FakeConnector

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
AMQP_URI = "failover:(amqp://a:5672)"
SCHEMA = StructType(
    [
        StructField("value", StringType()),
        StructField("to", StringType()),
        StructField("props", MapType(StringType(), StringType())),
    ]
)


def refusal_of(headers: dict[str, str], uri: str = URI, **extra: str) -> str | None:
    sink = sink_options(
        {"uri": uri, "destination": "/queue/out", "headersColumn": "props", **extra}
    )
    shape = MessageShape.of(sink, row_layout(SCHEMA, sink))
    [item] = PartitionMessages(shape, "p").from_rows([("body", None, headers)])
    return str(item) if isinstance(item, Refusal) else None


# --- the rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"priority": "high"}, "key 'priority' = 'high' must be an integer 0-9 (JMS priority)"),
        ({"priority": "10"}, "key 'priority' = '10' must be an integer 0-9"),
        ({"expires": "tomorrow"}, "key 'expires' = 'tomorrow' must be milliseconds since"),
        ({"expires": "-5"}, "key 'expires' = '-5' must be milliseconds since the epoch"),
        ({"expiration": "1.5"}, "key 'expiration' = '1.5' must be a time to live"),
        ({"timestamp": "now"}, "key 'timestamp' = 'now' must be milliseconds"),
        ({"persistent": "yes"}, "key 'persistent' = 'yes' must be true or false"),
        ({"content-type": "json"}, "key 'content-type' = 'json' must be a MIME type"),
        ({"JMSXGroupSeq": "2147483648"}, "key 'JMSXGroupSeq' = '2147483648' must be a 32-bit"),
        ({"AMQ_SCHEDULED_DELAY": "soon"}, "key 'AMQ_SCHEDULED_DELAY' = 'soon' must be"),
        ({"reply-to": "replies"}, "key 'reply-to' = 'replies' must be a destination starting"),
        ({"content-length": "5"}, "key 'content-length' is set by the connection"),
        ({"destination": "/queue/x"}, "key 'destination' is set by the connection"),
        ({"failover-message-id": "x"}, "key 'failover-message-id' is set by the connection"),
        ({"a\0b": "x"}, "is empty or holds NUL"),
        ({"big": "x" * MAX_HEADER_LINE}, f"is {MAX_HEADER_LINE + 4} bytes, over the 10240-byte"),
        ({str(n): "v" for n in range(991)}, "has 991 headers, more than the 990"),
    ],
)
def test_a_header_a_broker_would_refuse_names_row_column_and_rule(
    headers: dict[str, str], reason: str
) -> None:
    text = refusal_of(headers)
    assert text is not None
    assert text.startswith("row 0 (id p-0): column 'props' ")
    assert reason in text


@pytest.mark.parametrize(
    "headers",
    [
        {"priority": "9", "expires": "0", "persistent": "true", "timestamp": "1700000000000"},
        {"content-type": "application/json; charset=utf-8", "reply-to": "/temp-queue/r"},
        {"JMSXGroupSeq": "-1", "AMQ_SCHEDULED_REPEAT": "3", "custom": "anything: at all"},
    ],
)
def test_headers_brokers_accept_pass(headers: dict[str, str]) -> None:
    assert refusal_of(headers) is None


def test_amqp_checks_sizes_but_not_stomp_header_types() -> None:
    assert refusal_of({"priority": "high"}, uri=AMQP_URI) is None
    assert refusal_of({"big": "x" * MAX_HEADER_LINE}, uri=AMQP_URI) is not None


def test_a_frame_over_max_frame_size_is_refused() -> None:
    rules = RowRules(max_frame=100)
    assert rules.frame("x" * 80, {}) is None
    assert rules.frame("x" * 80, {"key": "x" * 20}) == (
        "is 105 bytes with headers, over maxFrameSize=100"
    )


def test_a_destination_column_value_needs_a_known_prefix_unless_allowed() -> None:
    sink = sink_options({"uri": URI, "destinationColumn": "to"})
    shape = MessageShape.of(sink, row_layout(SCHEMA, sink))
    items = list(
        PartitionMessages(shape, "p").from_rows([("a", "orders", None), ("b", "/topic/t", None)])
    )
    assert str(items[0]).startswith(
        "row 0 (id p-0): column 'to' = 'orders' is not a destination starting with one of /queue/"
    )
    assert isinstance(items[1], Outgoing)
    [prefix] = PartitionMessages(shape, "p").from_rows([("a", "/queue/", None)])
    assert str(prefix).endswith(
        "column 'to' = '/queue/' is only a prefix; name the queue or topic after it"
    )
    allowed = sink_options({"uri": URI, "destinationColumn": "to", "allowAnyDestination": "true"})
    shape = MessageShape.of(allowed, row_layout(SCHEMA, allowed))
    [item] = PartitionMessages(shape, "p").from_rows([("a", "orders", None)])
    assert item == Outgoing("orders", "a", {}, "p-0")


# --- options --------------------------------------------------------------------------------


def test_on_row_error_values() -> None:
    base = {"uri": URI, "destination": "/queue/out"}
    assert sink_options(base).on_row_error == "fail"
    assert sink_options({**base, "onRowError": "SKIP"}).on_row_error == "skip"
    letter = sink_options({**base, "onRowError": "deadLetter:/queue/out.dlq"})
    assert (letter.on_row_error, letter.dead_letter) == ("deadLetter", "/queue/out.dlq")
    with pytest.raises(SparkOptionError) as caught:
        sink_options({**base, "onRowError": "ignore"})
    assert str(caught.value) == (
        "failover sink: option onRowError: 'ignore'; valid values: fail, skip, "
        "deadLetter:<destination> (e.g. deadLetter:/queue/orders.dlq)"
    )
    with pytest.raises(SparkOptionError, match="option onRowError: 'dlq' is not a destination"):
        sink_options({**base, "onRowError": "deadLetter:dlq"})


def test_a_destination_option_without_prefix_fails_at_start_over_stomp_only() -> None:
    with pytest.raises(SparkOptionError, match="option destination: 'orders' is not a destin"):
        sink_options({"uri": URI, "destination": "orders"})
    loose = {"uri": URI, "destination": "orders", "allowAnyDestination": "true"}
    assert sink_options(loose).destination == "orders"
    assert sink_options({"uri": AMQP_URI, "destination": "orders"}).destination == "orders"


# --- what a refused row does ----------------------------------------------------------------


def fake_connection() -> tuple[FailoverConnection, FakeConnector]:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    connection = FailoverConnection(URI, connector=connector, clock=clock)
    connection.connect()
    return connection, connector


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeConnector]:
    connection, connector = fake_connection()
    monkeypatch.setattr(_writer, "connection_for", lambda _: connection)
    yield connector
    connection.close()


ROWS = [("a", None, None), ("poison", None, {"priority": "high"}), ("c", None, None)]


def plan(**extra: str) -> WritePlan:
    raw = {"uri": URI, "destination": "/queue/out", "headersColumn": "props", **extra}
    return WritePlan.build(raw, SCHEMA)


def test_fail_sends_the_good_rows_once_and_fails_the_commit_with_the_row(
    pooled: FakeConnector,
) -> None:
    writing = plan()
    report = write_partition(writing, ROWS, arrow=False)
    assert [m.body for m in pooled.session("a:61613").sent] == [b"a", b"c"]
    assert (report.rows, report.refused) == (2, 1)
    with pytest.raises(RowError) as caught:
        record_commit(writing.options, 4, [report])
    first, second = str(caught.value).splitlines()
    assert first == (
        f"failover sink: row 1 (id {writing.write_id}-0-1): column 'props' key 'priority' = "
        "'high' must be an integer 0-9 (JMS priority)"
    )
    assert second.startswith("batch 4 fails without retries (onRowError=fail)")


def test_skip_leaves_the_row_out_and_counts_it(pooled: FakeConnector) -> None:
    writing = plan(onRowError="skip")
    report = write_partition(writing, ROWS, arrow=False)
    assert [m.body for m in pooled.session("a:61613").sent] == [b"a", b"c"]
    record = record_commit(writing.options, 4, [report])
    assert (record.rows, record.refused) == (2, 1)
    assert '"refused": 1' in record.to_json()


def test_dead_letter_sends_the_body_with_the_reason(pooled: FakeConnector) -> None:
    writing = plan(onRowError="deadLetter:/queue/out.dlq")
    report = write_partition(writing, ROWS, arrow=False)
    sent = pooled.session("a:61613").sent
    assert [(m.destination, m.body) for m in sent] == [
        ("/queue/out", b"a"),
        ("/queue/out.dlq", b"poison"),
        ("/queue/out", b"c"),
    ]
    letter = sent[1]
    assert letter.message_id == f"{writing.write_id}-0-1"
    assert letter.headers[ROW_ERROR_HEADER].endswith("must be an integer 0-9 (JMS priority)")
    assert letter.headers[ORIGINAL_DESTINATION_HEADER] == "/queue/out"
    assert "priority" not in letter.headers
    assert record_commit(writing.options, 4, [report]).refused == 1


def test_a_row_the_broker_rejects_is_a_refused_row_not_a_failed_task() -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock, auto_confirm=False)
    connection = FailoverConnection(URI, connector=connector, clock=clock)
    connection.connect()
    try:
        session = connector.session("a:61613")
        outgoing = [Outgoing("/queue/out", f"m{i}", {}, f"id-{i}") for i in range(3)]
        writing = plan(onRowError="skip")

        def settle() -> None:
            connector.wait_until(lambda: len(session.unconfirmed()) == 3)
            session.confirm(1)
            session.reject(1, reason="no such exchange")
            session.confirm(1)

        refused = RefusedRows(writing.options)
        broker = threading.Thread(target=settle)
        broker.start()
        result = send_all(connection, outgoing, refused)
        broker.join()
        assert result.messages == 2
        assert refused.count == 1
        assert refused.reasons[0].startswith("row id-1: refused by the broker: no such exchange")
    finally:
        connection.close()


def test_a_report_without_refusals_commits_as_before() -> None:
    options = sink_options({"uri": URI, "destination": "/queue/out", "commitMarkers": "false"})
    report = PartitionReport(0, 0, 3, "a", "c", "q", "1", None)
    assert record_commit(options, 1, [report]).refused == 0
