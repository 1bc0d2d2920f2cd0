"""A discovery peer: sends what an Artemis 2.x broker's broadcast group sends, byte for byte.

Artemis runs here only in a container; the client's UDP discovery is tested against this peer,
which encodes a broadcast exactly as ``BroadcastGroupImpl.broadcastConnectors`` does (see
:mod:`failover_client.topology._artemis_udp` for the layout) and repeats it every broadcast
period on a multicast group, as the broker does. The same peer repeats any datagram (an
ActiveMQ Classic announcement, a hostile packet).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Sequence

__all__ = [
    "NETTY_CONNECTOR_FACTORY",
    "DatagramPeer",
    "encode_artemis_broadcast",
    "encode_artemis_connector",
    "encode_artemis_string",
]

NETTY_CONNECTOR_FACTORY = (
    "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
)

Param = tuple[str, bool | int | str]


def encode_artemis_string(text: str) -> bytes:
    """``UTF8Util.writeString``: int length in UTF-16 units, then shorts (< 9 units), modified
    UTF-8 with a short byte count (< 0xfff) or a SimpleString (int byte count, UTF-16LE)."""
    units = text.encode("utf-16-be", "surrogatepass")
    length = len(units) // 2
    head = struct.pack(">i", length)
    if length < 9:
        return head + units
    if length < 0xFFF:
        # Java's writeUTF encodes each UTF-16 unit on its own (a surrogate in 3 bytes); NUL
        # in one byte (calculateUTFSize counts c <= 0x7f as one).
        body = b"".join(
            chr(unit).encode("utf-8", "surrogatepass")
            for (unit,) in struct.iter_unpack(">H", units)
        )
        return head + struct.pack(">H", len(body)) + body
    little = text.encode("utf-16-le", "surrogatepass")
    return head + struct.pack(">i", len(little)) + little


def _value(value: bool | int | str) -> bytes:
    if isinstance(value, bool):
        return b"\x00" + (b"\xff" if value else b"\x00")  # TYPE_BOOLEAN; writeBoolean: -1 / 0
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return b"\x01" + struct.pack(">i", value)  # TYPE_INT
        return b"\x02" + struct.pack(">q", value)  # TYPE_LONG
    return b"\x03" + encode_artemis_string(value)  # TYPE_STRING


def encode_artemis_connector(
    name: str, params: Sequence[Param], *, factory: str = NETTY_CONNECTOR_FACTORY
) -> bytes:
    """``TransportConfiguration.encode``: name, factory, count, then each parameter in the
    order given (Java writes its HashMap's order; extra properties carry ``$.EP.``)."""
    out = [
        encode_artemis_string(name),
        encode_artemis_string(factory),
        struct.pack(">i", len(params)),
    ]
    for key, value in params:
        out += [encode_artemis_string(key), _value(value)]
    return b"".join(out)


def encode_artemis_broadcast(node_id: str, unique_id: str, connectors: Sequence[bytes]) -> bytes:
    """``BroadcastGroupImpl.broadcastConnectors``: node id, unique id, count, connectors."""
    return b"".join(
        [
            encode_artemis_string(node_id),
            encode_artemis_string(unique_id),
            struct.pack(">i", len(connectors)),
            *connectors,
        ]
    )


class DatagramPeer:
    """Sends ``packet`` to ``group:port`` now and every ``period`` seconds until stopped."""

    def __init__(
        self,
        group: str,
        port: int,
        packet: bytes,
        *,
        period: float = 2.0,
        interface: str | None = None,
    ) -> None:
        self.group, self.port, self.period = group, port, period
        self._packet = packet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        if interface is not None:
            self._sock.setsockopt(
                socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface)
            )
        self._thread = threading.Thread(target=self._run, name="datagram-peer", daemon=True)
        self.sent = 0

    def set_packet(self, packet: bytes) -> None:
        """Send ``packet`` from the next period on (a broker that changed its connectors)."""
        with self._lock:
            self._packet = packet

    def start(self) -> DatagramPeer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                packet = self._packet
            self._sock.sendto(packet, (self.group, self.port))
            self.sent += 1
            self._stop.wait(self.period)  # ends by the period or stop()

    def stop(self) -> None:
        """Stop sending (a broker killed: no more broadcasts) and close the socket."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self._sock.close()

    def __enter__(self) -> DatagramPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
