"""Telling "this port speaks another protocol" from "the broker is slow or down".

An ``amqp://`` member pointed at a STOMP port fails in one of two ways. A broker that answers
the AMQP header with bytes of its own (a STOMP ERROR frame, an HTTP response, OpenWire's
WireFormatInfo) makes proton report a header mismatch that quotes them: :func:`mismatch_of`
names the protocol they belong to. A STOMP listener that waits silently for a complete frame
(ActiveMQ's) makes the handshake time out with nothing received: then :func:`answers_stomp`
asks the port once, with a STOMP CONNECT on a fresh socket, and a CONNECTED or ERROR back
turns "no AMQP open within 2 s" into "protocol mismatch: answered like a STOMP broker".
"""

from __future__ import annotations

import re
import socket
from contextlib import suppress

from failover_client.uri import BrokerAddress

__all__ = ["STOMP_ANSWER", "answers_stomp", "mismatch_of"]

STOMP_ANSWER = (
    "protocol mismatch: {broker} answered like a STOMP broker{how}; this port speaks STOMP: "
    "write stomp://{authority} for it, or use the broker's AMQP 1.0 port (5672 by default)"
)

_QUOTED = re.compile(r"\[(b?['\"].*)\]")
_PROBE = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
_ANSWER_BYTES = 16


def mismatch_of(description: str, address: BrokerAddress) -> str | None:
    """The message for a proton header mismatch, naming whose bytes came back (None: not one)."""
    if "header mismatch" not in description.lower():
        return None
    quoted = _QUOTED.search(description)
    sample = quoted.group(1) if quoted else description
    if "ERROR" in sample or "CONNECTED" in sample:
        return STOMP_ANSWER.format(
            broker=address, how=" (a STOMP frame back)", authority=address.authority
        )
    if "ActiveMQ" in sample:
        who = "an OpenWire (Java client) port: 61616 by default; AMQP listens on 5672"
    elif "HTTP" in sample:
        who = "an HTTP server (a web console or management port)"
    else:
        return f"protocol mismatch: {address} did not answer with an AMQP header ({description})"
    return f"protocol mismatch: {address} answered like {who} ({description})"


def answers_stomp(address: BrokerAddress, timeout: float) -> bool:
    """Whether ``address`` answers a STOMP CONNECT (CONNECTED or ERROR) within ``timeout``.

    Asked only of a plain (not TLS) member whose AMQP handshake got no answer at all; any
    failure of the probe itself means "not known to be STOMP".
    """
    if address.tls or timeout <= 0:
        return False
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout) as sock:
            sock.settimeout(timeout)  # bounds every read below
            sock.sendall(_PROBE)
            answer = b""
            while len(answer) < _ANSWER_BYTES:
                chunk = sock.recv(_ANSWER_BYTES - len(answer))
                if not chunk:
                    break
                answer += chunk
            with suppress(OSError):
                sock.sendall(b"DISCONNECT\n\n\x00")  # polite, when it let us in
    except OSError:
        return False
    return answer.startswith((b"CONNECTED", b"ERROR"))
