"""How often ActiveMQ Classic and RabbitMQ really beat, and how late they let a client's beats be.

Run: ``python benchmarks/probe_broker_beats.py [--kinds activemq,rabbitmq] [--receipts 8]``

The facts behind ``failover_client/stomp/_heartbeat.py``'s choice to ask for beats at half the
wanted interval. Over a plain socket (no client library in the way), for each broker:

* asked for beats every T (``heart-beat:0,T``, T = 1 s and 2 s): the gaps between its bytes on
  an idle connection, and the silence after a RECEIPT sent at a random phase of its beat timer,
  both in units of T (a watchdog must not declare a healthy broker lost within them);
* told that we beat every 1 s (``heart-beat:1000,0``) and then beating every k s: whether the
  broker closes the connection within 10 s (how late a client's beat may be).
"""

from __future__ import annotations

import argparse
import itertools
import random
import socket
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import brokers, log

LOGINS = {"rabbitmq": ("guest", "guest")}
PERIODS = (1.0, 1.2, 1.4, 1.6, 2.1)


def connect(
    address: tuple[str, int], heartbeat: str, login: tuple[str, str] | None
) -> socket.socket:
    """A raw STOMP 1.2 connection with ``heartbeat`` asked for; CONNECTED read and dropped."""
    sock = socket.create_connection(address, timeout=10)
    frame = f"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:{heartbeat}\n"
    if login is not None:
        frame += f"login:{login[0]}\npasscode:{login[1]}\n"
    sock.sendall((frame + "\n\0").encode())
    received = b""
    while b"\0" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during CONNECT: {received[:200]!r}")
        received += chunk
    return sock


def idle_gaps(sock: socket.socket, seconds: float) -> list[float]:
    """Seconds between the broker's reads over ``seconds`` of an idle connection."""
    sock.settimeout(0.05)
    start = time.monotonic()
    arrivals: list[float] = []
    while time.monotonic() - start < seconds:
        try:
            if not sock.recv(4096):
                raise ConnectionError("broker closed an idle connection")
            arrivals.append(time.monotonic())
        except TimeoutError:
            continue
    return [b - a for a, b in itertools.pairwise(arrivals)]


def silence_after_receipt(sock: socket.socket, interval: float, tag: int) -> float:
    """Seconds from a RECEIPT (asked for at a random phase) to the broker's next byte."""
    time.sleep(random.uniform(0, interval))  # a phase, not a secret
    frame = f"SEND\ndestination:/queue/probe-beats\nreceipt:r{tag}\n\nx\0"
    sock.sendall(frame.encode())
    sock.settimeout(5.0)
    received = b""
    while b"RECEIPT" not in received:
        received += sock.recv(4096)
    at = time.monotonic()
    sock.settimeout(5 * interval)  # the broker beats within 2 intervals, or it is not beating
    sock.recv(4096)
    return time.monotonic() - at


def tolerated(
    address: tuple[str, int], login: tuple[str, str] | None, period: float
) -> float | None:
    """Beat every ``period`` s after announcing 1 s: when the broker closed (None: never)."""
    sock = connect(address, "1000,0", login)
    sock.settimeout(0.05)
    start = last = time.monotonic()
    try:
        while (now := time.monotonic()) - start < 10.0:
            if now - last >= period:
                sock.sendall(b"\n")
                last = now
            try:
                if not sock.recv(4096):
                    return now - start
            except TimeoutError:
                continue
        return None
    finally:
        sock.close()


def probe(kind: str, address: tuple[str, int], receipts: int) -> None:
    login = LOGINS.get(kind)
    for interval in (1.0, 2.0):
        sock = connect(address, f"0,{int(interval * 1000)}", login)
        try:
            gaps = [g / interval for g in idle_gaps(sock, 12 * interval)]
            after = [silence_after_receipt(sock, interval, n) / interval for n in range(receipts)]
        finally:
            sock.close()
        print(
            f"{kind}, asked for beats every {interval:g} s: idle gaps {min(gaps):.2f}-"
            f"{max(gaps):.2f} T; silence after a RECEIPT {min(after):.2f}-{max(after):.2f} T "
            f"(max {max(after):.2f})",
            flush=True,
        )
    for period in PERIODS:
        closed = tolerated(address, login, period)
        verdict = "kept open 10 s" if closed is None else f"closed after {closed:.2f} s"
        print(f"{kind}, told 1 s, beating every {period:g} s: {verdict}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="activemq,rabbitmq")
    parser.add_argument("--receipts", type=int, default=8)
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        with brokers(1, kind=kind, full_jit=False, label="beats") as cluster:
            host, port = cluster[0].uri("stomp").split("://", 1)[1].rsplit(":", 1)
            log(f"{kind} at {host}:{port}")
            probe(kind, (host, int(port)), args.receipts)


if __name__ == "__main__":
    main()
