"""A batch of deliveries as the spool's table, built column by column.

The table must be the one the per-message path built (``tests/spool_support.py``, how the
source did it before): same rows, same types, same files on disk for the readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from failover_client.uri import BrokerAddress
from hypothesis import given, settings
from hypothesis import strategies as st

from failover_client.adapter import Received
from failover_client.engine._slot import Slot as EngineSlot
from failover_client.engine._subscriptions import Message
from failover_client.spark._partitions import write_parts
from failover_client.spark._rows import PER_DELIVERY_HEADERS, spool_table, timestamp_ms
from failover_client.spark._spool import MESSAGE_SCHEMA, SPOOL_SCHEMA, Spool, read_batch
from tests.spool_support import rows_of, table_of
from tests.test_spark_source_pure import IDENTITY, Delivery, Slot

A, B = Slot("stomp://a:61613"), Slot("stomp://b:61613")


@dataclass
class Bare:
    """A session that names no broker (the shape of a test double's)."""

    number: int = 0


@dataclass
class Odd:
    """A delivery on a session without a ``broker``."""

    message_id: str | None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    destination: str = "/topic/t"
    redelivered: bool = False
    session: object = field(default_factory=Bare)

    @property
    def received(self) -> Received:
        return Received(
            "s", self.destination, self.body, self.headers, redelivered=self.redelivered
        )


def reference(messages: list[Delivery] | list[Odd]) -> pa.Table:
    return table_of(rows_of(messages))


def mixed() -> list[Delivery]:
    stomp = {"ack": "x", "subscription": "1", "content-length": "3", "persistent": "true"}
    return [
        Delivery("id-1", body=b"abc", headers={**stomp, "timestamp": "1700000000123"}),
        Delivery(None, body=b"\xff\xfe\x00", headers={"timestamp": "1700000000"}, session=B),
        Delivery("id-3", body=b"", headers={}, redelivered=True),
        Delivery("id-4", headers={"ack": "only per-delivery ones"}, session=B),
        Delivery("caf\u00e9", body="caf\u00e9".encode(), headers={"k\u00e9y": "v\u00e4lue\n2"}),
        Delivery("id-6", headers={"timestamp": "soon", "x": ""}, destination="/topic/t"),
        Delivery("id-7", headers={"timestamp": " 42 ", "subscription": "2"}, session=A),
        Delivery("id-8", headers={"timestamp": "1_700"}),
        Delivery("id-9", headers={"timestamp": "0"}),
        Delivery("id-10", headers={"timestamp": "-5"}),
        Delivery("id-11", headers={"timestamp": ""}),
        Delivery("id-12", headers={"timestamp": "+1700000000000"}),
        Delivery("id-13", headers={"timestamp": "\u0661\u0667"}),  # Arabic-Indic digits
        Delivery("id-14", headers={"timestamp": "99999999999"}),  # the first in milliseconds
    ]


def test_the_table_is_the_one_the_per_message_path_built() -> None:
    messages = mixed()
    table = spool_table(messages)
    assert table.schema.equals(MESSAGE_SCHEMA)
    assert table.equals(reference(messages))
    # The driver passes the ids the ledger read: the same table.
    assert spool_table(messages, [m.message_id for m in messages]).equals(table)


def test_a_delivery_becomes_a_spool_row_without_its_delivery_headers() -> None:
    message = Delivery(
        "p-1",
        body=b"hello",
        headers={"ack": "7", "subscription": "sub-1", "content-length": "5", "timestamp": "1700"},
        redelivered=True,
    )
    (row,) = spool_table([message]).to_pylist()
    assert row["headers"] == [("timestamp", "1700")]
    assert (row["message_id"], row["broker"], row["redelivered"]) == ("p-1", A.broker, True)
    assert row["timestamp"].timestamp() == 1_700  # seconds: RabbitMQ's
    assert row["body"] == b"hello"


def test_each_row_names_the_broker_of_its_own_session() -> None:
    table = spool_table([Delivery("1", session=A), Delivery("2", session=B), Delivery("3")])
    assert table.column("broker").to_pylist() == [A.broker, B.broker, A.broker]


def test_a_session_without_a_broker_leaves_it_empty() -> None:
    alone = [Odd("a"), Odd("b", headers={"timestamp": "5"})]
    assert spool_table(alone).column("broker").to_pylist() == [None, None]
    assert spool_table(alone).equals(reference(alone))
    # One such session beside sessions that name their broker.
    both = [Odd("a"), Odd("b", session=A), Odd("c", session=Bare(1))]
    assert spool_table(both).column("broker").to_pylist() == [None, A.broker, None]
    assert spool_table(both).equals(reference(both))


def test_the_broker_is_the_engine_slot_address_without_its_password() -> None:
    address = BrokerAddress("stomp", "a", 61613, user="app", password="hush")
    slot = EngineSlot(1, address)
    received = Received("s1", "/queue/in", b"x", {"message-id": "m-1"}, "m-1", "m-1")
    table = spool_table([Message(received, None, slot, None)])  # type: ignore[arg-type]
    assert table.column("broker").to_pylist() == ["stomp://app:***@a:61613"]
    assert table.column("message_id").to_pylist() == ["m-1"]


def test_an_empty_batch_is_an_empty_table() -> None:
    assert spool_table([]).equals(reference([]))
    assert spool_table([]).num_rows == 0


def test_headers_that_are_all_per_delivery_leave_empty_maps() -> None:
    messages = [
        Delivery(str(n), headers=dict.fromkeys(PER_DELIVERY_HEADERS, "v")) for n in range(3)
    ]
    table = spool_table(messages)
    assert table.column("headers").to_pylist() == [[], [], []]
    assert table.equals(reference(messages))


def test_broker_timestamps_in_seconds_and_milliseconds() -> None:
    assert timestamp_ms("1700000000123") == 1_700_000_000_123
    assert timestamp_ms("1700000000") == 1_700_000_000_000  # RabbitMQ: seconds
    assert timestamp_ms(None) is None
    assert timestamp_ms("soon") is None
    assert timestamp_ms("0") is None
    assert timestamp_ms("9" * 19) is None  # beyond an Arrow timestamp: not a crash


def test_the_timestamp_column_follows_the_same_rules() -> None:
    texts = ["1700000000123", "1700000000", "soon", "0", " 7 ", "9" * 19, "9" * 18, ""]
    messages = [Delivery(str(n), headers={"timestamp": t}) for n, t in enumerate(texts)]
    stamps = spool_table(messages).column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [timestamp_ms(t) for t in texts]
    assert stamps[4] == 7000


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.text(max_size=8),
            st.binary(max_size=8),
            st.dictionaries(
                st.sampled_from(["ack", "subscription", "timestamp", "a", "\u00e9"]) | st.text(),
                st.text(max_size=12) | st.integers(-(10**20), 10**20).map(str),
                max_size=5,
            ),
            st.booleans(),
            st.sampled_from([A, B]),
        ),
        max_size=20,
    )
)
def test_any_batch_builds_the_reference_table(
    drawn: list[tuple[str | None, bytes, dict[str, str], bool, Slot]],
) -> None:
    messages = [Delivery(i, body=b, headers=h, redelivered=r, session=s) for i, b, h, r, s in drawn]
    assert spool_table(messages).equals(reference(messages))


@pytest.mark.parametrize("parts", [1, 3, 4])
def test_the_files_hold_what_the_per_message_path_wrote(tmp_path: Path, parts: int) -> None:
    messages = mixed()
    spool = Spool.open(str(tmp_path), IDENTITY)
    batch = write_parts(spool, 100, spool_table(messages), parts)
    assert (batch.start, batch.end) == (100, 100 + len(messages))
    files = spool.state().batches
    assert len(files) == parts
    read = pa.concat_tables([read_batch(spool.url, f.name) for f in files])
    assert read.schema.equals(SPOOL_SCHEMA)
    expected = reference(messages)
    offsets = pa.array(range(100, 100 + len(messages)), type=pa.int64())
    assert read.equals(expected.add_column(0, SPOOL_SCHEMA.field("offset"), offsets))
    # What a restart reads back: each file's ids, in offset order.
    ids = [i for f in files for i in spool.ids(f)]
    assert ids == [m.message_id for m in messages]


def test_a_table_of_another_shape_is_refused(tmp_path: Path) -> None:
    spool = Spool.open(str(tmp_path), IDENTITY)
    with pytest.raises(ValueError, match="spool rows must have the schema"):
        spool.write(0, pa.table({"body": pa.array([b"x"])}))
    assert spool.state().batches == ()


@pytest.mark.parametrize(
    "texts",
    [
        ["1700000000123", None, "1700000000124"],  # milliseconds or none: taken as written
        ["1700000000", "1700000000123", None],  # a second among them: the rules per row
        [None, None],
        ["0001700000000123"],
    ],
)
def test_plain_timestamps_take_the_short_way_to_the_same_column(texts: list[str | None]) -> None:
    messages = [
        Delivery(str(n), headers={} if t is None else {"timestamp": t}) for n, t in enumerate(texts)
    ]
    table = spool_table(messages)
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [
        timestamp_ms(t) for t in texts
    ]
    assert table.equals(reference(messages))
