"""The fault proxy's frame filters (``drop_deliveries()``), as pure functions over byte chunks.

Each stream is fed in chunks split at arbitrary points: what comes out must not depend on
where the network cut it, only on whether the filter was dropping when each frame began.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover_client.testing.brokers._frame_filter import (
    AmqpDeliveryFilter,
    DeliveryFilter,
    StompDeliveryFilter,
    delivery_filter_for,
)

PROPERTY = settings(derandomize=True, database=None, max_examples=300, deadline=None)

CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:1000,1000\n\n\x00\n"
RECEIPT = b"RECEIPT\nreceipt-id:7\n\n\x00"
MESSAGE = b"MESSAGE\ndestination:/queue/a\nmessage-id:1\nsubscription:s\n\nhello\x00\n"
# A body with NULs and blank lines in it: only its content-length tells where it ends.
BINARY = b"MESSAGE\r\nsubscription:s\r\ncontent-length:9\r\n\r\na\x00\n\nb\x00\r\nc\x00"
ERROR = b"ERROR\nmessage:queue deleted\n\nbye\x00"
HEARTBEAT = b"\n"


def feed_split(filt: DeliveryFilter, stream: bytes, cuts: list[int], *, drop: bool) -> bytes:
    out = b""
    edges = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    for start, end in itertools.pairwise(edges):
        out += filt.feed(stream[start:end], drop=drop)
    return out


cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@PROPERTY
@given(cuts)
def test_stomp_passes_everything_when_not_dropping(split: list[int]) -> None:
    stream = CONNECTED + MESSAGE + HEARTBEAT + BINARY + RECEIPT + HEARTBEAT * 3 + ERROR
    filt = StompDeliveryFilter()
    assert feed_split(filt, stream, split, drop=False) == stream
    assert filt.dropped == 0


@PROPERTY
@given(cuts)
def test_stomp_drops_messages_whole_and_keeps_heartbeats_and_receipts(split: list[int]) -> None:
    stream = CONNECTED + MESSAGE + HEARTBEAT + BINARY + RECEIPT + HEARTBEAT * 3 + ERROR
    filt = StompDeliveryFilter()
    out = feed_split(filt, stream, split, drop=True)
    # The EOLs after a dropped frame are heart-beats of a kind: they pass.
    assert out == CONNECTED + b"\n" + HEARTBEAT + RECEIPT + HEARTBEAT * 3 + ERROR
    assert filt.dropped == 2


def test_stomp_a_frame_begun_before_the_drop_still_arrives_whole() -> None:
    filt = StompDeliveryFilter()
    assert filt.feed(MESSAGE[:10], drop=False) == MESSAGE[:10]
    assert filt.feed(MESSAGE[10:] + MESSAGE, drop=True) == MESSAGE[10:] + b"\n"  # its EOL
    assert filt.dropped == 1
    assert filt.feed(RECEIPT, drop=False) == RECEIPT  # heal(): everything passes again


def test_stomp_a_frame_held_until_its_command_is_known() -> None:
    filt = StompDeliveryFilter()
    assert filt.feed(b"RECEI", drop=True) == b""
    assert filt.feed(b"PT\nreceipt-id:1\n\n\x00", drop=True) == RECEIPT.replace(b"7", b"1")


def test_stomp_filter_steps_aside_for_a_stream_that_is_not_stomp() -> None:
    filt = StompDeliveryFilter()
    assert filt.feed(b"HTTP/1.1 400 Bad Request\r\n\r\n", drop=True) == (
        b"HTTP/1.1 400 Bad Request\r\n\r\n"
    )
    assert filt.feed(MESSAGE, drop=True) == MESSAGE  # no longer following frames
    assert filt.feed(b"before", drop=False) == b"before"  # short bytes are never held


def amqp_frame(performative: int, payload: bytes = b"", *, doff: int = 2, kind: int = 0) -> bytes:
    body = b"\x00\x53" + bytes([performative]) + b"\xc0\x01\x00" + payload if performative else b""
    size = doff * 4 + len(body)
    return struct.pack(">IBBH", size, doff, kind, 0) + b"\x00" * (doff * 4 - 8) + body


SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_OUTCOME = amqp_frame(0x44, kind=1)
OPEN = amqp_frame(0x10, b"x" * 40)
FLOW = amqp_frame(0x13)
TRANSFER = amqp_frame(0x14, b"m" * 300)
TRANSFER_WIDE = amqp_frame(0x14, b"n" * 20, doff=4)  # an extended header
DISPOSITION = amqp_frame(0x15)
EMPTY = amqp_frame(0)  # a heart-beat
# A ulong descriptor (0x80 + 8 bytes) names a transfer too.
TRANSFER_LONG = struct.pack(">IBBH", 8 + 14, 2, 0, 0) + b"\x00\x80" + (0x14).to_bytes(8) + b"zzzz"
AMQP_STREAM = (
    SASL_HEADER
    + SASL_OUTCOME
    + AMQP_HEADER
    + OPEN
    + FLOW
    + TRANSFER
    + EMPTY
    + TRANSFER_WIDE
    + DISPOSITION
    + TRANSFER_LONG
    + EMPTY
)


@PROPERTY
@given(cuts)
def test_amqp_passes_everything_when_not_dropping(split: list[int]) -> None:
    filt = AmqpDeliveryFilter()
    assert feed_split(filt, AMQP_STREAM, split, drop=False) == AMQP_STREAM


@PROPERTY
@given(cuts)
def test_amqp_drops_transfers_whole_and_keeps_the_rest(split: list[int]) -> None:
    filt = AmqpDeliveryFilter()
    out = feed_split(filt, AMQP_STREAM, split, drop=True)
    assert out == (
        SASL_HEADER + SASL_OUTCOME + AMQP_HEADER + OPEN + FLOW + EMPTY + DISPOSITION + EMPTY
    )
    assert filt.dropped == 3


def test_amqp_filter_steps_aside_for_a_stream_that_is_not_amqp() -> None:
    filt = AmqpDeliveryFilter()
    assert filt.feed(b"CONNECTED\n\n\x00", drop=True) == b"CONNECTED\n\n\x00"
    assert filt.feed(TRANSFER, drop=True) == TRANSFER


@pytest.mark.parametrize(
    ("scheme", "kind"),
    [("stomp", StompDeliveryFilter), ("amqp", AmqpDeliveryFilter), ("stomp+ssl", type(None))],
)
def test_a_filter_only_for_plain_streams(scheme: str, kind: type) -> None:
    assert isinstance(delivery_filter_for(scheme), kind)
