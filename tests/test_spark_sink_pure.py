"""The Spark sink without Spark running: columns, rows to messages, ids, sends, commits.

No SparkSession and no broker: schemas are built from PySpark's type objects, Arrow batches
with pyarrow, and connections talk to the shipped fake connector on a fake clock.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

import failover_client.spark
from failover_client import FailoverConnection, SendRejected
from failover_client.spark import (
    PartitionNotConfirmed,
    PartitionReport,
    SinkOptions,
    SparkOptionError,
    _writer,
    foreach_batch_sink,
    sink_options,
)
from failover_client.spark._connections import ConnectionCache
from failover_client.spark._layout import RowLayout, row_layout
from failover_client.spark._messages import MessageShape, Outgoing, PartitionMessages, Refusal
from failover_client.spark._send import send_all
from failover_client.spark._task import TaskIdentity
from failover_client.spark._writer import (
    FailoverBatchWriter,
    FailoverStreamWriter,
    WritePlan,
    stream_writer,
    write_partition,
)
from failover_client.testing import FakeClock, FakeConnector

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"

SCHEMA = StructType(
    [
        StructField("value", StringType()),
        StructField("topic", StringType()),
        StructField("props", MapType(StringType(), StringType())),
        StructField("key", LongType()),
        StructField("raw", BinaryType()),
        StructField("score", DoubleType()),
    ]
)


def options(**extra: str) -> SinkOptions:
    return sink_options({"uri": URI, "destination": "/queue/out", **extra})


# --- columns ------------------------------------------------------------------------------------


def test_layout_finds_every_column_it_is_told_about() -> None:
    raw = {"uri": URI, "destinationcolumn": "topic", "headerscolumn": "props"}
    layout = row_layout(SCHEMA, sink_options({**raw, "messageidcolumn": "key"}))
    assert layout == RowLayout(body=0, destination=1, headers=2, message_id=3)


def test_layout_takes_a_binary_body_and_matches_names_like_spark() -> None:
    assert row_layout(SCHEMA, options(bodyColumn="RAW")).body == 4


def test_missing_column_lists_the_columns_there_are() -> None:
    with pytest.raises(SparkOptionError) as caught:
        row_layout(SCHEMA, options(bodyColumn="payload"))
    assert str(caught.value) == (
        "failover sink: option bodyColumn: no column 'payload'; "
        "the DataFrame has: value, topic, props, key, raw, score"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"bodyColumn": "key"},
            "option bodyColumn: column 'key' is bigint, must be string or binary; "
            "cast it, e.g. col('key').cast('string')",
        ),
        (
            {"headersColumn": "value"},
            "option headersColumn: column 'value' is string, must be map<string,string>; "
            "cast it, e.g. col('value').cast('map<string,string>')",
        ),
        (
            {"messageIdColumn": "score"},
            "option messageIdColumn: column 'score' is double, must be string or integer; "
            "cast it, e.g. col('score').cast('string')",
        ),
    ],
)
def test_wrong_column_type_names_it_and_a_cast(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SparkOptionError) as caught:
        row_layout(SCHEMA, options(**extra))
    assert str(caught.value) == f"failover sink: {message}"


def test_destination_column_must_be_a_string() -> None:
    raw = {"uri": URI, "destinationcolumn": "key"}
    with pytest.raises(SparkOptionError, match="column 'key' is bigint, must be string"):
        row_layout(SCHEMA, sink_options(raw))


def test_headers_map_must_hold_strings() -> None:
    schema = StructType(
        [StructField("value", StringType()), StructField("h", MapType(StringType(), IntegerType()))]
    )
    with pytest.raises(SparkOptionError, match="column 'h' is map<string,int>"):
        row_layout(schema, options(headersColumn="h"))


# --- rows to messages ---------------------------------------------------------------------------


def messages_of(
    sink: SinkOptions, rows: list[tuple[object, ...]], prefix: str = "q-3-1"
) -> list[Outgoing | Refusal]:
    shape = MessageShape.of(sink, row_layout(SCHEMA, sink))
    return list(PartitionMessages(shape, prefix).from_rows(rows))


ROW = ("hello", "/queue/t", {"k": "v", "gone": None}, 7, b"\x00\x01", 1.5)


def test_a_row_becomes_a_message_with_a_generated_id() -> None:
    sent = messages_of(options(headersColumn="props"), [ROW, ROW])
    assert sent == [
        Outgoing("/queue/out", "hello", {"k": "v"}, "q-3-1-0"),
        Outgoing("/queue/out", "hello", {"k": "v"}, "q-3-1-1"),
    ]


def test_per_row_destination_user_id_and_broker_dedup_header() -> None:
    sink = sink_options(
        {
            "uri": URI,
            "destinationcolumn": "topic",
            "messageidcolumn": "key",
            "bodycolumn": "raw",
            "duplicatedetection": "artemis",
            "persistent": "false",
        }
    )
    [message] = messages_of(sink, [ROW])
    assert message == Outgoing(
        "/queue/t", b"\x00\x01", {"persistent": "false", "_AMQ_DUPL_ID": "7"}, "7"
    )


def test_null_bodies_are_refused_unless_allowed_and_byte_likes_are_bytes() -> None:
    rows = [(None, *ROW[1:]), (bytearray(b"ab"), *ROW[1:])]
    refused, sent = messages_of(options(), rows)
    assert isinstance(refused, Refusal)
    assert str(refused) == (
        "row 0 (id q-3-1-0): column 'value' is null (allowNullBody=true sends an empty "
        "message instead)"
    )
    assert sent == Outgoing("/queue/out", b"ab", {}, "q-3-1-1")
    allowed = messages_of(options(allowNullBody="true"), rows)
    assert [m.body for m in allowed] == [b"", b"ab"]


def test_a_row_without_destination_is_refused_with_its_id() -> None:
    sink = sink_options({"uri": URI, "destinationcolumn": "topic"})
    good, refused = messages_of(sink, [ROW, ("x", None, None, 1, None, None)])
    assert isinstance(good, Outgoing)
    assert str(refused) == (
        "row 1 (id q-3-1-1): column 'topic' is null or empty; a row needs a destination"
    )


def test_a_row_without_its_id_is_refused() -> None:
    [refused] = messages_of(options(messageIdColumn="key"), [("x", None, None, None, None, None)])
    assert (
        str(refused) == "row 0 (id q-3-1-0): column 'key' is null; every row needs its message id"
    )


def test_arrow_batches_give_the_same_messages_as_rows() -> None:
    sink = sink_options(
        {"uri": URI, "destinationcolumn": "topic", "headerscolumn": "props", "persistent": "false"}
    )
    rows = [
        ("a", "/queue/1", {"x": "1"}, 1, None, None),
        ("b", "/queue/2", None, 2, None, None),
        (None, "/queue/3", {"y": None, "z": "3"}, 3, None, None),
    ]
    table = pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, row, strict=True)) for row in rows],
        schema=pa.schema(
            [
                ("value", pa.string()),
                ("topic", pa.string()),
                ("props", pa.map_(pa.string(), pa.string())),
                ("key", pa.int64()),
                ("raw", pa.binary()),
                ("score", pa.float64()),
            ]
        ),
    )
    shape = MessageShape.of(sink, row_layout(SCHEMA, sink))
    from_arrow = list(PartitionMessages(shape, "p").from_batches(table.to_batches(max_chunksize=2)))
    assert from_arrow == messages_of(sink, rows, prefix="p")


def test_id_prefix_names_query_batch_and_partition_or_the_write() -> None:
    streaming = TaskIdentity(partition=2, attempt=1, query_id="q", batch_id="9")
    assert streaming.id_prefix("w") == "q-9-2"
    assert TaskIdentity(partition=2, attempt=0).id_prefix("w") == "w-2"


# --- sending ------------------------------------------------------------------------------------


def fake_connection(*, auto_confirm: bool = True) -> tuple[FailoverConnection, FakeConnector]:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock, auto_confirm=auto_confirm)
    connection = FailoverConnection(URI, connector=connector, clock=clock)
    connection.connect()
    return connection, connector


@pytest.fixture
def connection() -> Iterator[tuple[FailoverConnection, FakeConnector]]:
    pair = fake_connection()
    yield pair
    pair[0].close()


def test_send_all_returns_once_every_message_is_confirmed(
    connection: tuple[FailoverConnection, FakeConnector],
) -> None:
    conn, connector = connection
    outgoing = [Outgoing("/queue/out", f"m{i}", {"k": "v"}, f"id-{i}") for i in range(5)]
    result = send_all(conn, outgoing)
    assert (result.messages, result.first_id, result.last_id) == (5, "id-0", "id-4")
    sent = connector.session("a:61613").sent
    assert [m.message_id for m in sent] == [f"id-{i}" for i in range(5)]
    assert {m.state for m in sent} == {"confirmed"}
    assert sent[0].headers["k"] == "v"


def test_send_all_of_nothing_is_nothing(
    connection: tuple[FailoverConnection, FakeConnector],
) -> None:
    result = send_all(connection[0], [])
    assert (result.messages, result.first_id, result.last_id) == (0, None, None)


def test_a_rejected_message_fails_the_partition() -> None:
    conn, connector = fake_connection(auto_confirm=False)
    try:
        session = connector.session("a:61613")
        outgoing = [Outgoing("/queue/out", "m", {}, f"id-{i}") for i in range(3)]

        def settle() -> None:
            connector.wait_until(lambda: len(session.unconfirmed()) == 3)
            session.confirm(1)
            session.reject(2, reason="no room")

        import threading  # noqa: PLC0415 - the broker's side of this one test

        broker = threading.Thread(target=settle)
        broker.start()
        with pytest.raises(PartitionNotConfirmed) as caught:
            send_all(conn, outgoing)
        broker.join()
        assert str(caught.value).startswith(
            "2 of 3 messages were not confirmed (first: SendRejected"
        )
        assert isinstance(caught.value.__cause__, SendRejected)
    finally:
        conn.close()


# --- the connection cache -----------------------------------------------------------------------


def test_cache_reuses_a_connection_per_key_and_replaces_a_closed_one() -> None:
    made: list[FailoverConnection] = []

    def factory(_: SinkOptions) -> FailoverConnection:
        made.append(fake_connection()[0])
        return made[-1]

    cache = ConnectionCache(factory)
    first = cache.get(options())
    assert cache.get(options(persistent="false")) is first  # same URI and window
    other = cache.get(options(confirmWindow="4"))
    assert other is not first
    assert len(cache) == 2
    first.close()
    assert cache.get(options()) is made[2]  # a closed connection is not handed out
    cache.close_all()
    assert len(cache) == 0
    assert {c.state for c in made} == {"closed"}


def test_cache_keeps_nothing_when_connecting_fails() -> None:
    def factory(_: SinkOptions) -> FailoverConnection:
        raise OSError("no brokers")

    cache = ConnectionCache(factory)
    with pytest.raises(OSError, match="no brokers"):
        cache.get(options())
    assert len(cache) == 0


# --- writers ------------------------------------------------------------------------------------


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeConnector]:
    """Writers get their connection from a fake-backed cache instead of real brokers."""
    connection, connector = fake_connection()
    monkeypatch.setattr(_writer, "connection_for", lambda _: connection)
    yield connector
    connection.close()


def test_write_partition_sends_rows_and_reports_them(pooled: FakeConnector) -> None:
    plan = WritePlan.build({"uri": URI, "destination": "/queue/out"}, SCHEMA)
    report = write_partition(plan, [ROW, ROW, ROW], arrow=False)
    # Outside a Spark task: partition 0, first attempt, ids named by the write.
    assert report == PartitionReport(
        partition=0,
        attempt=0,
        rows=3,
        first_id=f"{plan.write_id}-0-0",
        last_id=f"{plan.write_id}-0-2",
        query_id=None,
        batch_id=None,
        broker="stomp://a:61613",
    )
    assert [m.body for m in pooled.session("a:61613").sent] == [b"hello"] * 3


def test_a_bad_row_is_reported_and_the_rows_around_it_are_sent(pooled: FakeConnector) -> None:
    plan = WritePlan.build(options(messageIdColumn="key"), SCHEMA)
    rows = [ROW, ("x", None, None, None, None, None), ("y", None, None, 8, None, None)]
    report = write_partition(plan, rows, arrow=False)
    assert [m.message_id for m in pooled.session("a:61613").sent] == ["7", "8"]
    assert (report.rows, report.refused) == (2, 1)
    assert report.reasons == (
        f"row 1 (id {plan.write_id}-0-1): column 'key' is null; every row needs its message id",
    )


def test_an_unreachable_group_fails_the_task_with_one_short_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from failover_client import AllBrokersFailed, BrokerUnavailable  # noqa: PLC0415

    def give_up(_: SinkOptions) -> FailoverConnection:
        cause = BrokerUnavailable("connection refused", broker="stomp://a:61613")
        raise AllBrokersFailed("gave up after 1 reconnect attempt(s)", {"stomp://a:61613": cause})

    monkeypatch.setattr(_writer, "connection_for", give_up)
    plan = WritePlan.build(options(), SCHEMA)
    with pytest.raises(PartitionNotConfirmed) as caught:
        write_partition(plan, [ROW], arrow=False)
    assert str(caught.value) == (
        "failover sink: partition 0 (attempt 0) stopped after 0 rows: AllBrokersFailed: gave "
        "up after 1 reconnect attempt(s): stomp://a:61613: BrokerUnavailable: "
        "stomp://a:61613: connection refused"
    )
    assert caught.value.__cause__ is None  # the engine's frames stay out of Spark's report


def test_writers_pickle_with_plain_values_only() -> None:
    plan = WritePlan.build({"uri": URI, "destination": "/queue/out"}, SCHEMA)
    for writer in (FailoverStreamWriter(plan), FailoverBatchWriter(plan), stream_writer(plan)):
        copy = pickle.loads(pickle.dumps(writer))
        assert copy.plan == plan


def test_stream_writer_uses_arrow_where_pyspark_offers_it() -> None:
    plan = WritePlan.build(options(), SCHEMA)
    assert type(stream_writer(plan, arrow=False)) is FailoverStreamWriter
    chosen = stream_writer(plan)
    assert (type(chosen).__name__ == "FailoverStreamArrowWriter") == _writer.ARROW_STREAM_WRITER


def test_foreach_batch_sink_checks_its_options_at_once() -> None:
    with pytest.raises(SparkOptionError, match="unknown option 'bodycolum'"):
        foreach_batch_sink(URI, destination="/queue/out", bodyColum="value")
    sink = foreach_batch_sink(URI, destination="/queue/out", persistent=False)
    assert sink.options.persistent is False


# --- the public surface -------------------------------------------------------------------------


def test_public_names_are_exactly_these() -> None:
    assert set(failover_client.spark.__all__) == {
        "FORMAT",
        "MARKER_DIRECTORY",
        "OPTIONS",
        "BatchRecord",
        "FailoverDataSource",
        "ForeachBatchSink",
        "OptionInfo",
        "PartitionNotConfirmed",
        "PartitionReport",
        "RowError",
        "SinkOptions",
        "SourceOptions",
        "SparkOptionError",
        "SpoolGap",
        "close_connections",
        "foreach_batch_sink",
        "register",
        "sink_options",
        "source_options",
    }
    assert failover_client.spark.FORMAT == "failover"


def test_datasource_validates_on_the_driver() -> None:
    source = failover_client.spark.FailoverDataSource({"uri": URI, "destination": "/queue/o"})
    assert isinstance(source.streamWriter(SCHEMA, overwrite=False), DataSourceStreamWriter)
    with pytest.raises(SparkOptionError, match="mode overwrite is not possible"):
        source.writer(SCHEMA, overwrite=True)
    bad = failover_client.spark.FailoverDataSource(
        {"uri": URI, "destination": "/queue/o", "bodycolumn": "key"}
    )
    with pytest.raises(SparkOptionError) as caught:
        bad.writer(SCHEMA, overwrite=False)
    # Spark shows the traceback: below the test's frame, writer() and the one line raising.
    assert [entry.name for entry in caught.traceback[1:]] == ["writer", "_plan"]
