"""The ``dns`` topology source against a real DNS server: dnsmasq on loopback, records changed live.

Each test starts its own dnsmasq in the foreground on a free port of 127.0.0.1, answering only
for ``test.internal`` (other names get NXDOMAIN, never a forwarded query) with a TTL of one
second. How a test changes records while dnsmasq runs:

- A/AAAA: host files in a ``--hostsdir`` directory, which dnsmasq watches with inotify and
  re-reads as soon as one is replaced (no signal needed);
- SRV: ``srv-host`` lines live only in the configuration file, which dnsmasq reads at start
  (SIGHUP re-reads host files, not the configuration), so the test restarts dnsmasq on the same
  port. The source sees the restart as a few failed queries and keeps its last list meanwhile.

dnsmasq comes from the Debian package ``dnsmasq`` (``.ci/install-brokers`` installs it and keeps
its service off); without it these tests fail and say so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from failover_client.uri import BrokerAddress, ServerListAction, broker_key

from failover_client import FailoverConnection, TopologyChanged
from failover_client.testing.brokers import Broker, Cluster
from failover_client.topology import (
    ZERO_WEIGHT,
    BaseSink,
    DnsAnswer,
    DnsLookupError,
    DnsSource,
    _dns,
)
from integration.test_failover_common import FAST, SAFETY, Events, failover_uri

pytestmark = pytest.mark.integration

ZONE = "test.internal"
SRV_NAME = f"_stomp._tcp.{ZONE}"
LOG_LINES = 200


def dnsmasq_binary() -> str:
    """The dnsmasq program (in /usr/sbin, often not on a user's PATH); fails the test without it."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which("dnsmasq", path=path)
    if found is None:
        pytest.fail(
            "dnsmasq is not installed: the DNS topology tests need the Debian package 'dnsmasq' "
            "(bash .ci/install-brokers installs it and keeps its service off)"
        )
    return found


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (dnsmasq listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port: int = udp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no port free for both UDP and TCP on 127.0.0.1")


@dataclass(frozen=True)
class Srv:
    """One ``srv-host`` record."""

    target: str
    port: int
    priority: int
    weight: int

    def line(self) -> str:
        return f"srv-host={SRV_NAME},{self.target},{self.port},{self.priority},{self.weight}"


class Dnsmasq:
    """A dnsmasq process this test owns: started, restarted with new SRV records, stopped."""

    def __init__(self, workdir: Path) -> None:
        self.binary = dnsmasq_binary()
        self.workdir = workdir
        self.hostsdir = workdir / "hosts"
        self.hostsdir.mkdir()
        self.port = free_port()
        self.log: list[str] = []
        self._log_lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self, records: Iterable[Srv] = ()) -> None:
        """Start answering with ``records`` (and the host files); returns once it listens."""
        assert self._process is None, "already running"
        conf = self.workdir / "dnsmasq.conf"
        conf.write_text(
            "\n".join([f"local=/{ZONE}/", *(r.line() for r in records)]) + "\n",
            encoding="utf-8",
        )
        user = _user_name()
        command = [
            self.binary,
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            f"--port={self.port}",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            f"--conf-file={conf}",
            f"--hostsdir={self.hostsdir}",
            "--local-ttl=1",
            f"--pid-file={self.workdir / 'dnsmasq.pid'}",
            "--log-facility=-",
            "--log-queries",
            # Stay the user who owns the files (as root dnsmasq would switch to "nobody", who
            # cannot read the test's host files).
            f"--user={user}",
        ]
        started = threading.Event()
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self._process = process
        self._reader = threading.Thread(
            target=self._read_log, args=(process, started), name="dnsmasq-log", daemon=True
        )
        self._reader.start()
        # dnsmasq logs "started" after it bound its sockets, or exits with the reason.
        if not started.wait(SAFETY) or process.poll() is not None:
            self.stop()
            pytest.fail(f"dnsmasq did not start on port {self.port}:\n{self.log_tail()}")

    def restart(self, records: Iterable[Srv]) -> None:
        """Stop and start again on the same port: the only way to change SRV records."""
        self.stop()
        self.start(records)

    def write_hosts(self, name: str, lines: Sequence[str]) -> None:
        """Replace host file ``name`` at once (dnsmasq re-reads it on the inotify event)."""
        scratch = self.workdir / f".{name}.new"
        scratch.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        os.replace(scratch, self.hostsdir / name)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(SAFETY)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._reader is not None:
            self._reader.join(SAFETY)

    def _read_log(self, process: subprocess.Popen[str], started: threading.Event) -> None:
        assert process.stderr is not None
        with process.stderr:
            for line in process.stderr:
                with self._log_lock:
                    self.log.append(line.rstrip("\n"))
                    del self.log[:-LOG_LINES]
                if "started, version" in line:
                    started.set()
        started.set()  # exited: the waiter looks at the process

    def log_tail(self) -> str:
        with self._log_lock:
            return "\n".join(self.log)


def _user_name() -> str:
    import pwd  # noqa: PLC0415 - POSIX only, like dnsmasq itself

    return pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def dnsmasq(tmp_path: Path) -> Iterator[Dnsmasq]:
    server = Dnsmasq(tmp_path)
    try:
        yield server
    finally:
        server.stop()
        print(f"dnsmasq log (last {LOG_LINES} lines):\n{server.log_tail()}")  # shown on failure


@dataclass(frozen=True)
class Update:
    brokers: tuple[BrokerAddress, ...]
    source: str
    action: ServerListAction | None
    tiers: dict[str, int]
    weights: dict[str, float]

    @property
    def keys(self) -> list[str]:
        return [b.key for b in self.brokers]


class RecordingSink(BaseSink):
    """A sink that records every update and lets the test wait for the n-th one."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[Update] = []

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append(
                Update(tuple(update), source, action, dict(tiers or {}), dict(weights or {}))
            )
            self.cond.notify_all()

    def wait_for(self, count: int) -> list[Update]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.updates) >= count, SAFETY):
                pytest.fail(f"no update #{count} within {SAFETY}s; got {self.updates}")
            return list(self.updates)


def source_for(server: Dnsmasq, name: str = SRV_NAME, **settings: object) -> DnsSource:
    # TTLs are 1s; a restart's failed queries are retried from 0.1s on.
    return DnsSource(
        name,
        resolver_address="127.0.0.1",
        resolver_port=server.port,
        min_interval=0.1,
        max_interval=1.0,
        timeout=1.0,
        **settings,
    )


def test_srv_records_arrive_with_tiers_and_weights_and_a_change_follows(dnsmasq: Dnsmasq) -> None:
    dnsmasq.start(
        [
            Srv(f"b1.{ZONE}", 61613, 10, 60),
            Srv(f"b2.{ZONE}", 61614, 10, 40),
            Srv(f"b3.{ZONE}", 61615, 20, 0),
        ]
    )
    sink = RecordingSink()
    source = source_for(dnsmasq)
    source.start(sink)
    try:
        (first,) = sink.wait_for(1)
        assert first.keys == [f"b1.{ZONE}:61613", f"b2.{ZONE}:61614", f"b3.{ZONE}:61615"]
        assert first.source == f"dns:{SRV_NAME}"
        assert first.action == "replace"
        assert first.tiers == {f"b1.{ZONE}:61613": 0, f"b2.{ZONE}:61614": 0, f"b3.{ZONE}:61615": 1}
        assert first.weights == {
            f"b1.{ZONE}:61613": 60.0,
            f"b2.{ZONE}:61614": 40.0,
            f"b3.{ZONE}:61615": ZERO_WEIGHT,
        }
        # b2 leaves, b3 moves up a tier and gains weight, b4 joins in front of everyone.
        dnsmasq.restart(
            [
                Srv(f"b1.{ZONE}", 61613, 10, 60),
                Srv(f"b3.{ZONE}", 61615, 10, 20),
                Srv(f"b4.{ZONE}", 61616, 5, 1),
            ]
        )
        _, second = sink.wait_for(2)
    finally:
        source.stop()
    assert second.keys == [f"b4.{ZONE}:61616", f"b1.{ZONE}:61613", f"b3.{ZONE}:61615"]
    assert second.tiers == {f"b4.{ZONE}:61616": 0, f"b1.{ZONE}:61613": 1, f"b3.{ZONE}:61615": 1}
    assert second.weights == {
        f"b4.{ZONE}:61616": 1.0,
        f"b1.{ZONE}:61613": 60.0,
        f"b3.{ZONE}:61615": 20.0,
    }
    # The restart's failed queries pushed nothing: no empty list, no half list.
    assert sink.updates == [first, second]


def test_a_and_aaaa_records_follow_the_hosts_directory(dnsmasq: Dnsmasq) -> None:
    dnsmasq.write_hosts("brokers", [f"127.0.0.2 brokers.{ZONE}", f"::1 brokers.{ZONE}"])
    dnsmasq.start()
    sink = RecordingSink()
    source = source_for(dnsmasq, f"brokers.{ZONE}", srv=False, port=61613)
    source.start(sink)
    try:
        (first,) = sink.wait_for(1)
        assert first.keys == ["127.0.0.2:61613", "[::1]:61613"]
        assert first.tiers == {"127.0.0.2:61613": 0, "[::1]:61613": 0}
        assert first.weights == {"127.0.0.2:61613": 1.0, "[::1]:61613": 1.0}
        dnsmasq.write_hosts("brokers", [f"127.0.0.2 brokers.{ZONE}", f"127.0.0.3 brokers.{ZONE}"])
        _, second = sink.wait_for(2)
    finally:
        source.stop()
    assert second.keys == ["127.0.0.2:61613", "127.0.0.3:61613"]


def test_the_dnspython_boundary_maps_real_answers(dnsmasq: Dnsmasq) -> None:
    dnsmasq.write_hosts("v4", [f"127.0.0.2 v4.{ZONE}"])
    dnsmasq.start([Srv(f"b1.{ZONE}", 61613, 10, 60)])
    resolve = _dns._dnspython_resolve("127.0.0.1", dnsmasq.port, 1.0)
    assert resolve(SRV_NAME, "SRV") == DnsAnswer((f"10 60 61613 b1.{ZONE}.",), 1)
    assert resolve(f"v4.{ZONE}", "A") == DnsAnswer(("127.0.0.2",), 1)
    assert resolve(f"v4.{ZONE}", "AAAA") == DnsAnswer(())  # NODATA
    with pytest.raises(DnsLookupError) as info:
        resolve(f"_amqp._tcp.{ZONE}", "SRV")
    assert info.value.reason == "NXDOMAIN"
    dnsmasq.stop()
    with pytest.raises(DnsLookupError) as info:
        resolve(SRV_NAME, "SRV")  # nobody listens: refused at once, or no answer in time
    assert info.value.reason in {"SERVFAIL", "timeout"}


def _stomp_port(broker: Broker) -> int:
    return broker.endpoint("stomp").port


def _key(broker: Broker) -> str:
    return broker_key("127.0.0.1", _stomp_port(broker))


def test_a_connection_takes_in_the_brokers_dns_names_and_fails_over_to_them(
    activemq_cluster: Cluster, dnsmasq: Dnsmasq, unique_queue: str
) -> None:
    seed, named, renamed = activemq_cluster
    # The harness's brokers listen on 127.0.0.1. An all-numeric target is a legal DNS name,
    # and the one the connection's dialer reaches without asking this test's DNS server.
    dnsmasq.start([Srv("127.0.0.1", _stomp_port(named), 10, 5)])
    events = Events()
    source = source_for(dnsmasq)
    with FailoverConnection(
        failover_uri(activemq_cluster, FAST, order=[0]), listeners=[events], topology=[source]
    ) as conn:
        conn.connect()  # starts the source with the connection's sink
        try:
            joined = events.wait_for(TopologyChanged, lambda e: e.source == source.name)
            assert joined.added == (f"stomp://127.0.0.1:{_stomp_port(named)}",)
            assert joined.removed == ()
            states = {s.address.key: s for s in conn.pool.states()}
            assert list(states) == [_key(seed), _key(named)]
            assert not states[_key(named)].seed
            assert states[_key(named)].weight == 5.0
            assert states[_key(named)].tier == 0

            mark = events.mark()
            dnsmasq.restart([Srv("127.0.0.1", _stomp_port(renamed), 10, 1)])
            moved = events.wait_for(TopologyChanged, lambda e: e.source == source.name, after=mark)
            assert moved.added == (f"stomp://127.0.0.1:{_stomp_port(renamed)}",)
            assert moved.removed == (f"stomp://127.0.0.1:{_stomp_port(named)}",)
            assert [s.address.key for s in conn.pool.states()] == [_key(seed), _key(renamed)]

            # The seed dies: the only other broker the connection knows came from DNS.
            seed.kill()
            conn.send(unique_queue, b"through a broker DNS named", timeout=SAFETY)
            assert activemq_cluster.broker_at(conn.broker) is renamed
        finally:
            source.stop()
    assert [m.body for m in renamed.drain(unique_queue, expect=1)] == [
        b"through a broker DNS named"
    ]
