"""Reading a received message from its bytes gives what proton's decoding gives."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from proton import (
    Data,
    Message,
    byte,
    char,
    decimal32,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from failover_client.adapter import Received
from failover_client.amqp import _decode
from failover_client.amqp._convert import encode_message, received
from failover_client.amqp._decode import decode_received


def both(raw: bytes, *, marks_first: bool = False) -> tuple[Received, Received]:
    """(proton's reading, ours) of ``raw``."""
    message = Message()
    message.decode(raw)
    theirs = received(
        message,
        subscription_id="s",
        destination="d",
        ack_id="7",
        first_acquirer_marks_first=marks_first,
    )
    ours = decode_received(
        raw,
        subscription_id="s",
        destination="d",
        ack_id="7",
        first_acquirer_marks_first=marks_first,
    )
    return theirs, ours


def read_here(raw: bytes, *, marks_first: bool = False) -> Received:
    """Ours without proton (raises ``_Unread`` where it would need it)."""
    return _decode._read(
        raw,
        subscription_id="s",
        destination="d",
        ack_id="7",
        first_acquirer_marks_first=marks_first,
    )


SIMPLE_VALUES: list[Any] = [
    "text",
    "ünïcode " * 40,
    symbol("sym"),
    True,
    False,
    None,
    0,
    7,
    -3,
    2**40,
    -(2**40),
    ulong(0),
    ulong(9),
    ulong(2**63),
    uint(0),
    uint(200),
    uint(2**31),
    int32(-5),
    int32(70000),
    short(-2),
    ushort(65535),
    byte(-7),
    ubyte(250),
    1.25,
    float32(1.1),
    char("é"),
    timestamp(1_700_000_000_123),
    uuid.UUID(int=12345),
    b"binary\xff",
    b"x" * 300,
]


@pytest.mark.parametrize("value", SIMPLE_VALUES, ids=repr)
def test_an_application_property_reads_as_proton_shows_it(value: Any) -> None:
    message = Message(body=b"b", properties={"p": value, "q": "after"})
    theirs, ours = both(bytes(message.encode()))
    assert ours == theirs
    assert read_here(bytes(message.encode())).headers == theirs.headers  # not through proton


def test_the_messages_this_library_sends_are_read_here() -> None:
    raw = encode_message(b"payload" * 200, {"failover-message-id": "m-1", "k": "v"})
    theirs, ours = both(raw)
    assert ours == theirs
    assert read_here(raw) == theirs
    assert ours.message_id == "m-1"


def test_a_broker_s_sections_are_read_here() -> None:
    """What RabbitMQ sends: a header with first-acquirer, message annotations, properties."""
    for first, count in ((True, 0), (False, 0), (True, 2)):
        message = Message(
            body=b"x" * 1024,
            id="id-1",
            correlation_id="c-1",
            subject="s",
            reply_to="/queue/r",
            properties={"bench-id": "12", "subject": "mine"},
            annotations={symbol("x-exchange"): "", symbol("x-routing-key"): "q"},
            instructions={symbol("x-opt"): [1, 2, {"a": 1}]},
            durable=True,
            first_acquirer=first,
            delivery_count=count,
            content_type="application/octet-stream",
            creation_time=1.5,
            group_id="g",
        )
        raw = bytes(message.encode())
        for marks_first in (True, False):
            theirs, ours = both(raw, marks_first=marks_first)
            assert ours == theirs
        assert read_here(raw, marks_first=True).redelivered is (not first or count > 0)


@pytest.mark.parametrize(
    "body", [b"", b"bytes", b"y" * 70000, "a string body", None], ids=lambda b: repr(b)[:20]
)
def test_an_amqp_value_body_of_binary_a_string_or_null_is_read_here(body: Any) -> None:
    raw = bytes(Message(body=body, properties={"k": "v"}).encode())
    theirs, ours = both(raw)
    assert ours == theirs
    assert read_here(raw) == theirs


@pytest.mark.parametrize(
    "message",
    [
        Message(body={"a": 1}),
        Message(body=[1, 2]),
        Message(body=42),
        Message(body=b"x", id=ulong(5)),
        Message(body=b"x", id=uuid.UUID(int=3), correlation_id=b"corr"),
        Message(body=b"x", properties={"d": decimal32(3)}),
    ],
    ids=lambda m: repr(m.body)[:10] + repr(m.id) + repr(m.properties),
)
def test_other_shapes_are_left_to_proton_with_the_same_result(message: Message) -> None:
    raw = bytes(message.encode())
    with pytest.raises(_decode._Unread):
        read_here(raw)
    theirs, ours = both(raw)
    assert ours == theirs


@pytest.mark.parametrize(
    "raw",
    [
        encode_message(b"one", {}) + b"\x00\x53\x75\xa0\x03two",  # two data sections
        # an application property with a symbol key (proton will not encode one)
        b"\x00\x53\x74\xc1\x07\x02\xa3\x01s\xa1\x01v\x00\x53\x75\xa0\x01x",
        # a section with a symbolic descriptor
        b"\x00\xa3\x10amqp:header:list\xc0\x02\x01\x41\x00\x53\x75\xa0\x01x",
    ],
    ids=["two data sections", "symbol key", "symbolic descriptor"],
)
def test_hand_built_shapes_are_left_to_proton(raw: bytes) -> None:
    with pytest.raises(_decode._Unread):
        read_here(raw)
    assert outcome(lambda: both(raw)[1]) == outcome(lambda: both(raw)[0])


def outcome(read: Any) -> Any:
    """What ``read()`` gives, or the type of what it raised."""
    try:
        return read()
    except Exception as exc:  # the type is what is compared
        return type(exc)


def test_a_cut_message_gives_what_proton_gives_or_raises_what_it_raises() -> None:
    raw = encode_message(b"payload", {"k": "v", "failover-message-id": "m"})
    for cut in range(len(raw)):

        def theirs(part: bytes = raw[:cut]) -> Received:
            message = Message()
            message.decode(part)
            return received(message, subscription_id="s", destination="d", ack_id="7")

        def ours(part: bytes = raw[:cut]) -> Received:
            return decode_received(part, subscription_id="s", destination="d", ack_id="7")

        assert outcome(ours) == outcome(theirs), cut


def test_random_property_maps_read_as_proton_reads_them() -> None:
    rng = random.Random(20)
    for _ in range(200):
        properties = {f"k{n}": rng.choice(SIMPLE_VALUES) for n in range(rng.randrange(0, 12))}
        message = Message(
            body=rng.choice([b"b" * rng.randrange(0, 600), "text", None]),
            properties=properties or None,
            id=rng.choice([None, "m", "m" * 300]),
            durable=rng.choice([True, False]),
            first_acquirer=rng.choice([True, False]),
            delivery_count=rng.choice([0, 1, 300]),
        )
        theirs, ours = both(bytes(message.encode()), marks_first=rng.choice([True, False]))
        assert ours == theirs


def test_the_skip_covers_every_width() -> None:
    data = Data()
    data.put_map()
    data.enter()
    for value in [*SIMPLE_VALUES, [1, "two"], {"nested": {"m": [1]}}, decimal32(1)]:
        data.put_object(symbol("k"))
        data.put_object(value)
    data.exit()
    encoded = bytes(data.encode())
    assert _decode._skip(encoded + b"tail", 0) == len(encoded)
