"""What each header of a group-committed SEND costs ActiveMQ Classic, apart from the client.

Run: ``python benchmarks/probe_send_headers.py [--reps 6] [--messages 8000] [--store memory]``

One ActiveMQ Classic broker (full-JIT flags, store in memory by default, where the broker's
CPU is the rate). A plain socket writes pre-encoded transactions of 256 persistent SENDs
(BEGIN, SENDs, COMMIT with a receipt; all receipts awaited at the end), so the client's cost is
the same small one for every variant and what differs is only what the broker parses and
keeps. ActiveMQ turns every SEND header it does not know into a message property, so the
variants add or reshape one header at a time:

* ``plain``: ``content-length``, ``destination``, ``persistent``, ``transaction:t<n>``, as
  hand-written stomp.py transactions write them;
* ``plain, long transaction id``: the same with the transaction ids failover-client wrote
  before (``fc-<12 hex>-tx-<n>``);
* ``+ failover-message-id``: plain plus ``failover-message-id:<12 hex>-<n>``, the id a
  confirmed send carries;
* ``+ short id name``, ``+ short id value``, ``+ short id name and value``: that header with
  a shorter name (``fmid``), value (a hex counter) or both;
* ``+ two id headers``: ``failover-message-id`` and ``_AMQ_DUPL_ID`` (what a SEND to a broker
  that may drop copies by it carries).

Each repetition runs every variant twice with half the messages (down the list, then back
up), each on a fresh existing queue purged afterwards. Printed: messages per second and the
broker's CPU per message (``/proc``, clock ticks: 8,000 messages resolve 1.25 us), medians
over repetitions, and each variant's rate relative to ``plain`` paired per repetition.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, precreate, table, warm
from benchmarks._consume_io import cpu_seconds
from benchmarks._raw import purge

BODY = b"x" * 128
STORES = {"disk": None, "memory": "/dev/shm"}
NONCE = uuid.uuid4().hex[:12]

Headers = Callable[[str, int], str]
"""(transaction id, message number) -> the SEND's header lines after ``destination``."""

VARIANTS: dict[str, tuple[str, Headers]] = {
    # name -> (transaction id prefix, extra header lines)
    "plain": ("t", lambda tx, n: ""),
    "plain, long transaction id": (f"fc-{NONCE}-tx-", lambda tx, n: ""),
    "+ failover-message-id": ("t", lambda tx, n: f"failover-message-id:{NONCE}-{n}\n"),
    "+ short id name": ("t", lambda tx, n: f"fmid:{NONCE}-{n}\n"),
    "+ short id value": ("t", lambda tx, n: f"failover-message-id:{n:x}\n"),
    "+ short id name and value": ("t", lambda tx, n: f"fmid:{n:x}\n"),
    "+ two id headers": (
        "t",
        lambda tx, n: f"_AMQ_DUPL_ID:{NONCE}-{n}\nfailover-message-id:{NONCE}-{n}\n",
    ),
}


class Client:
    """One STOMP 1.2 connection on a plain socket; RECEIPTs counted by a reader thread."""

    def __init__(self, host: tuple[str, int]) -> None:
        self.sock = socket.create_connection(host)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cond = threading.Condition()
        self.receipts = 0
        self.sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        self.buffer = b""
        while b"\0" not in self.buffer:  # ends with CONNECTED (or the socket's timeout)
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed before CONNECTED")
            self.buffer += chunk
        if not self.buffer.lstrip(b"\n").startswith(b"CONNECTED"):
            raise ConnectionError(self.buffer.decode(errors="replace"))
        self.buffer = self.buffer.split(b"\0", 1)[1]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        data = self.buffer
        while True:  # ends when the socket closes
            data += self.sock.recv(65536)
            if not data:
                return
            frames = data.split(b"\0")
            data = frames.pop()
            if any(f.lstrip(b"\n").startswith(b"ERROR") for f in frames):
                raise RuntimeError(b"\n".join(frames).decode(errors="replace"))
            counted = sum(1 for f in frames if f.lstrip(b"\n").startswith(b"RECEIPT"))
            if counted:
                with self.cond:
                    self.receipts += counted
                    self.cond.notify_all()

    def run(self, frames: list[bytes], commits: int) -> None:
        with self.cond:
            target = self.receipts + commits
        for chunk in frames:
            self.sock.sendall(chunk)
        with self.cond:
            if not self.cond.wait_for(lambda: self.receipts >= target, 120.0):
                raise TimeoutError("receipts missing after 120 s")

    def close(self) -> None:
        self.sock.close()


_numbers = itertools.count(1)


def encode(variant: str, destination: str, count: int) -> tuple[list[bytes], int]:
    """Transactions of 256 for ``count`` messages: (one bytes per transaction, commits)."""
    prefix, extra = VARIANTS[variant]
    out = []
    for start in range(0, count, 256):
        tx = f"{prefix}{next(_numbers)}"
        parts = [f"BEGIN\ntransaction:{tx}\n\n\0".encode()]
        for _ in range(min(256, count - start)):
            head = (
                f"SEND\ncontent-length:{len(BODY)}\ndestination:{destination}\npersistent:true\n"
                f"transaction:{tx}\n{extra(tx, next(_numbers))}\n"
            )
            parts.append(head.encode() + BODY + b"\0")
        parts.append(f"COMMIT\nreceipt:r{next(_numbers)}\ntransaction:{tx}\n\n\0".encode())
        out.append(b"".join(parts))
    return out, len(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--messages", type=int, default=8000, help="per variant per repetition")
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    args = parser.parse_args(argv)
    names = list(VARIANTS)
    rates: dict[str, list[float]] = {n: [] for n in names}
    broker_us: dict[str, list[float]] = {n: [] for n in names}
    with brokers(1, label="headers", full_jit=True, store=STORES[args.store]) as cluster:
        broker = cluster[0]
        host = (broker.endpoint("stomp").host, broker.endpoint("stomp").port)
        warm(broker, "/queue/bench.warmup", 5000)
        client = Client(host)
        try:
            for rep in range(args.reps + 1):  # round 0 warms up every variant, not recorded
                totals = {n: [0.0, 0.0] for n in names}
                for half in (names, names[::-1]):
                    for name in half:
                        dest = f"/queue/bench.hdr.{uuid.uuid4().hex[:8]}"
                        precreate(cluster, dest)
                        frames, commits = encode(name, dest, args.messages // 2)
                        cpu0 = cpu_seconds(broker.pid) or 0.0
                        start = time.perf_counter()
                        client.run(frames, commits)
                        elapsed = time.perf_counter() - start
                        cpu = (cpu_seconds(broker.pid) or 0.0) - cpu0
                        purge(host, dest)
                        totals[name][0] += elapsed
                        totals[name][1] += cpu
                if rep == 0:
                    continue
                for name, (elapsed, cpu) in totals.items():
                    rates[name].append(args.messages / elapsed)
                    broker_us[name].append(cpu / args.messages * 1e6)
                    log(
                        f"rep {rep}: {name:28} {args.messages / elapsed:9,.0f} msg/s "
                        f"broker {cpu / args.messages * 1e6:5.1f} us/msg"
                    )
        finally:
            client.close()
    rows = []
    for name in names:
        paired = statistics.median(a / b for a, b in zip(rates[name], rates["plain"], strict=True))
        rows.append(
            [
                name,
                f"{statistics.median(rates[name]):,.0f}",
                f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}",
                f"{statistics.median(broker_us[name]):.1f}",
                f"{min(broker_us[name]):.1f}-{max(broker_us[name]):.1f}",
                f"{paired:.3f}x",
            ]
        )
    print(
        table(
            f"Transactions of 256 on a plain socket, store {args.store}, 128-byte bodies, "
            f"{args.messages} messages x {args.reps} reps; load {os.getloadavg()[0]:.2f}",
            [
                "variant",
                "msg/s median",
                "min-max",
                "broker CPU us/msg",
                "min-max",
                "rate vs plain, paired",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
