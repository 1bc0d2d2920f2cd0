"""Is a broker ready? The protocol has to answer: an open port alone proves nothing.

A broker binds its ports before (RabbitMQ) or after (ActiveMQ) the parts that serve a client
are up, and a SIGSTOPped broker still completes TCP handshakes from its listen backlog. So
readiness here is a protocol exchange with a short socket timeout:

* STOMP: CONNECT, then a CONNECTED frame (raw socket, so a probe cannot hang on a library that
  has no handshake timeout, such as stomp.py's ``connect(wait=True)``);
* AMQP 1.0: a proton ``BlockingConnection`` that completes the open.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

__all__ = [
    "Deadline",
    "amqp_open",
    "stomp_connect_frame",
    "stomp_connected",
    "tcp_accepts",
    "wait_until",
]


class Deadline:
    """A point in monotonic time; ``remaining()`` never goes below zero."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at


def wait_until(
    condition: Callable[[], bool],
    deadline: Deadline,
    step: float = 0.05,
    give_up: Callable[[], str | None] = lambda: None,
) -> str | None:
    """Poll ``condition`` until it holds; return None, or why it never will.

    A bounded poll is used only for things outside this process that offer nothing to wait
    on (a port that a JVM has not bound yet refuses at once; there is no event for "it has
    now"). ``give_up`` returns a reason to stop early, e.g. "the process exited".
    """
    while True:
        if condition():
            return None
        reason = give_up()
        if reason is not None:
            return reason
        if deadline.expired():
            return "no answer before the deadline"
        time.sleep(min(step, deadline.remaining()))


def tcp_accepts(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a TCP connection to ``host:port`` is accepted (not proof of readiness alone)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def stomp_connect_frame(
    login: str | None = None, passcode: str | None = None, vhost: str = "/"
) -> bytes:
    """A STOMP 1.2 CONNECT frame; ``login`` / ``passcode`` only when a login is given.

    STOMP 1.2 does not escape CONNECT headers, so a value with a line break or NUL cannot be
    sent: it would end the header (or the frame) and let the rest pass for other headers.
    """
    values = {"host": vhost, "login": login or "", "passcode": passcode or ""}
    for name, value in values.items():
        if any(c in value for c in "\r\n\0"):
            # Never the value itself: it may be the passcode.
            raise ValueError(f"STOMP CONNECT: the {name} holds a line break or NUL")
    headers = ["accept-version:1.2", f"host:{vhost}", "heart-beat:0,0"]
    if login is not None:
        headers += [f"login:{login}", f"passcode:{passcode or ''}"]
    return ("CONNECT\n" + "\n".join(headers) + "\n\n").encode() + b"\0"


def stomp_connected(
    host: str,
    port: int,
    timeout: float = 1.0,
    *,
    login: str | None = None,
    passcode: str | None = None,
    vhost: str = "/",
) -> bool:
    """True when a raw STOMP 1.2 CONNECT on ``host:port`` is answered with CONNECTED.

    An ERROR answer (a refused login, say) is False, like no answer.
    """
    frame = stomp_connect_frame(login, passcode, vhost)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            reply = b""
            # Read up to the end of the first frame; stop early on a clear answer.
            while b"\0" not in reply and len(reply) < 8192:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            if reply.lstrip(b"\r\n").startswith(b"CONNECTED"):
                # Polite close so the broker does not log an abrupt disconnect per probe.
                sock.sendall(b"DISCONNECT\n\n\0")
                return True
            return False
    except OSError:
        return False


def amqp_open(
    host: str,
    port: int,
    timeout: float = 2.0,
    user: str | None = None,
    password: str | None = None,
) -> bool:
    """True when an AMQP 1.0 connection to ``host:port`` completes its open (needs proton)."""
    from proton import ProtonException  # noqa: PLC0415 - optional; the harness imports without it
    from proton.utils import BlockingConnection  # noqa: PLC0415 - optional

    url = f"amqp://{host}:{port}"
    try:
        conn = BlockingConnection(
            url,
            timeout=timeout,
            user=user,
            password=password,
            allowed_mechs="PLAIN ANONYMOUS" if user else "ANONYMOUS",
        )
    except (ProtonException, OSError):
        return False
    try:
        conn.close()
    except (ProtonException, OSError):
        # The open succeeded; a failed close does not make the broker less ready.
        return True
    return True
