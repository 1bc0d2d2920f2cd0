"""Artemis broadcast packets: pinned bytes, built by hand from Artemis' own encoders.

Every vector below is written out byte by byte from the Java source of Artemis 2.x:
``BroadcastGroupImpl.broadcastConnectors`` (node id, unique id, connector count, connectors),
``TransportConfiguration.encode`` / ``encodeMap`` (name, factory class, parameter count; key,
type byte 0 boolean / 1 int / 2 long / 3 string, value), ``ChannelBufferWrapper.writeBoolean``
(-1 / 0) and ``UTF8Util.writeString`` (int length in UTF-16 units; < 9: shorts; < 0xfff: short
byte count + modified UTF-8; else int byte count + UTF-16LE). The harness peer's encoder must
produce the same bytes, and the client's decoder must read them.
"""

from __future__ import annotations

import struct

import pytest
from failover_client.uri import BrokerAddress

from failover_client.testing.brokers._broadcast import (
    encode_artemis_broadcast,
    encode_artemis_connector,
    encode_artemis_string,
)
from failover_client.topology import parse_artemis_broadcast
from failover_client.topology._artemis_udp import NETTY_CONNECTOR_FACTORY, broadcast_address
from failover_client.topology._listening import DecodeError

NODE = "8a7c6f2e-6b1d-11ee-9d2b-0242ac120002"  # a node id as Artemis writes it (UUID, 36 chars)
UNIQUE = "9b8d7f3f-6b1d-11ee-9d2b-0242ac120002"
FACTORY = NETTY_CONNECTOR_FACTORY  # 74 characters


def utf16_shorts(text: str) -> bytes:
    """Each UTF-16 unit as a big-endian short (writeString below 9 units)."""
    return text.encode("utf-16-be")


# A broker made with `artemis create --clustered`: <connector name="artemis">tcp://10.0.0.5:61616
# </connector>, <broadcast-group> with <connector-ref>artemis</connector-ref>. The connector comes
# from a URI, so TCPTransportConfigurationSchema puts host and port as *strings* ("" + value) into
# a HashMap, whose order for these two keys is port (bucket 5) then host (bucket 8).
CREATE_CLUSTERED = b"".join(
    [
        b"\x00\x00\x00\x24",  # node id: 36 UTF-16 units (>= 9, < 0xfff: modified UTF-8)
        b"\x00\x24",  # 36 bytes follow
        NODE.encode("ascii"),
        b"\x00\x00\x00\x24\x00\x24" + UNIQUE.encode("ascii"),  # unique id, the same way
        b"\x00\x00\x00\x01",  # one connector
        b"\x00\x00\x00\x07",  # connector name "artemis": 7 units (< 9: as shorts)
        utf16_shorts("artemis"),  # 00 61 00 72 ...
        b"\x00\x00\x00\x4a\x00\x4a",  # factory class: 74 units, 74 bytes
        FACTORY.encode("ascii"),
        b"\x00\x00\x00\x02",  # two parameters
        b"\x00\x00\x00\x04" + utf16_shorts("port"),  # key "port"
        b"\x03",  # TYPE_STRING
        b"\x00\x00\x00\x05" + utf16_shorts("61616"),
        b"\x00\x00\x00\x04" + utf16_shorts("host"),  # key "host"
        b"\x03",
        b"\x00\x00\x00\x08" + utf16_shorts("10.0.0.5"),  # 8 units: still shorts
    ]
)

# A connector built in code (new TransportConfiguration(factory, map)): port as an Integer,
# sslEnabled as a Boolean, host a name of 9+ characters (modified UTF-8).
IN_CODE_TLS = b"".join(
    [
        b"\x00\x00\x00\x24\x00\x24" + NODE.encode("ascii"),
        b"\x00\x00\x00\x24\x00\x24" + UNIQUE.encode("ascii"),
        b"\x00\x00\x00\x01",
        b"\x00\x00\x00\x03" + utf16_shorts("tls"),
        b"\x00\x00\x00\x4a\x00\x4a" + FACTORY.encode("ascii"),
        b"\x00\x00\x00\x03",  # three parameters
        b"\x00\x00\x00\x04" + utf16_shorts("port"),
        b"\x01",  # TYPE_INT
        b"\x00\x00\xf0\x50",  # 61520
        b"\x00\x00\x00\x0a\x00\x0a" + b"sslEnabled",  # 10 units: modified UTF-8
        b"\x00",  # TYPE_BOOLEAN
        b"\xff",  # writeBoolean(true) writes -1
        b"\x00\x00\x00\x04" + utf16_shorts("host"),
        b"\x03",
        b"\x00\x00\x00\x11\x00\x11" + b"broker1.example.c",  # 17 units
    ]
)


def test_the_clustered_broker_s_broadcast_decodes():
    broadcast = parse_artemis_broadcast(CREATE_CLUSTERED)
    assert (broadcast.node_id, broadcast.unique_id) == (NODE, UNIQUE)
    (connector,) = broadcast.connectors
    assert (connector.name, connector.factory) == ("artemis", FACTORY)
    assert dict(connector.params) == {"port": "61616", "host": "10.0.0.5"}
    assert (connector.host, connector.port, connector.ssl) == ("10.0.0.5", 61616, False)


def test_the_harness_peer_sends_the_same_bytes():
    connector = encode_artemis_connector("artemis", [("port", "61616"), ("host", "10.0.0.5")])
    assert encode_artemis_broadcast(NODE, UNIQUE, [connector]) == CREATE_CLUSTERED
    tls = encode_artemis_connector(
        "tls", [("port", 61520), ("sslEnabled", True), ("host", "broker1.example.c")]
    )
    assert encode_artemis_broadcast(NODE, UNIQUE, [tls]) == IN_CODE_TLS


def test_typed_parameters_decode_and_map_through_the_scheme_map():
    (connector,) = parse_artemis_broadcast(IN_CODE_TLS).connectors
    assert (connector.host, connector.port, connector.ssl) == ("broker1.example.c", 61520, True)
    default = {"tcp": ("stomp", None), "ssl": ("stomp+ssl", None)}
    broadcast = parse_artemis_broadcast(IN_CODE_TLS)
    assert broadcast_address(broadcast, default) == BrokerAddress(
        "stomp+ssl", "broker1.example.c", 61520
    )
    plain = parse_artemis_broadcast(CREATE_CLUSTERED)
    amqp = {"tcp": ("amqp", None)}
    assert broadcast_address(plain, amqp) == BrokerAddress("amqp", "10.0.0.5", 61616)
    assert broadcast_address(plain, {"tcp": ("stomp", 61613)}) == BrokerAddress(
        "stomp", "10.0.0.5", 61613
    )


def test_every_string_form_round_trips():
    long_text = "x" * 0xFFF + "é"  # SimpleString form: int byte count, UTF-16LE
    encoded = encode_artemis_string(long_text)
    assert encoded[:8] == struct.pack(">ii", 0x1000, 0x2000)
    emoji = "node-\U0001f600-id"  # a surrogate pair: two 3-byte units in modified UTF-8
    assert b"\xed\xa0\xbd\xed\xb8\x80" in encode_artemis_string(emoji)
    nul = "a\x00bcdefghij"  # NUL is one byte (calculateUTFSize counts c <= 0x7f as one)
    assert encode_artemis_string(nul)[4:7] == b"\x00\x0b" + b"a"
    for text in (long_text, emoji, nul, "", "short"):
        packet = encode_artemis_broadcast(text or "n", text, [])
        assert parse_artemis_broadcast(packet).unique_id == text


def test_the_last_network_connector_of_a_node_counts_and_in_vm_ones_are_skipped():
    first = encode_artemis_connector("a", [("host", "a.example"), ("port", "61616")])
    second = encode_artemis_connector("b", [("host", "b.example"), ("port", "61617")])
    in_vm = encode_artemis_connector(
        "vm",
        [("serverId", 0)],
        factory="org.apache.activemq.artemis.core.remoting.impl.invm.InVMConnectorFactory",
    )
    broadcast = parse_artemis_broadcast(
        encode_artemis_broadcast(NODE, UNIQUE, [first, second, in_vm])
    )
    assert broadcast_address(broadcast, {"tcp": ("stomp", None)}) == BrokerAddress(
        "stomp", "b.example", 61617
    )
    only_vm = parse_artemis_broadcast(encode_artemis_broadcast(NODE, UNIQUE, [in_vm]))
    with pytest.raises(DecodeError, match="no network connector"):
        broadcast_address(only_vm, {})


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (CREATE_CLUSTERED[:-1], "packet ends"),
        (CREATE_CLUSTERED + b"\x00", "bytes left"),
        (b"\xff\xff\xff\xff", "negative length"),
        (b"", "packet ends"),
        (
            CREATE_CLUSTERED.replace(
                b"\x00\x00\x00\x01\x00\x00\x00\x07", b"\x7f\x00\x00\x01\x00\x00\x00\x07"
            ),
            "connector count",
        ),
        (
            CREATE_CLUSTERED.replace(b"\x03\x00\x00\x00\x05", b"\x09\x00\x00\x00\x05"),
            "unknown value type 9",
        ),
        (b"\x00\x00\x00\x09\x00\x02\xc3\x28" + b"\x00" * 40, "not text"),
    ],
)
def test_a_broken_packet_is_refused_with_where(packet, message):
    with pytest.raises(DecodeError, match=message):
        parse_artemis_broadcast(packet)
