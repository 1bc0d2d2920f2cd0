"""Who holds a broker's port, read from a /proc tree built here (no sockets, no processes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from failover_client.testing.brokers._ownership import (
    Ownership,
    PortState,
    parse_listeners,
    port_owner,
)

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"  # noqa: E501


def _row(local: str, state: str, inode: int) -> str:
    return f"   0: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0000 100 0 0 10 0\n"  # noqa: E501


class FakeProc:
    """A /proc with net/tcp, net/tcp6 and per-process fd links, as the kernel lays them out."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "net").mkdir(parents=True)
        self.tcp = [HEADER]
        self.tcp6 = [HEADER]

    def listen(self, port: int, inode: int, v6: bool = False, state: str = "0A") -> None:
        if v6:
            self.tcp6.append(_row(f"00000000000000000000000001000000:{port:04X}", state, inode))
        else:
            self.tcp.append(_row(f"0100007F:{port:04X}", state, inode))
        self.write()

    def write(self) -> None:
        (self.root / "net" / "tcp").write_text("".join(self.tcp))
        (self.root / "net" / "tcp6").write_text("".join(self.tcp6))

    def process(self, pid: int, argv: list[str], sockets: list[int]) -> None:
        fd = self.root / str(pid) / "fd"
        fd.mkdir(parents=True)
        (self.root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv))
        os.symlink("/dev/null", fd / "0")
        for n, inode in enumerate(sockets, start=3):
            os.symlink(f"socket:[{inode}]", fd / str(n))


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    fake = FakeProc(tmp_path / "proc")
    fake.write()
    return fake


def test_parse_listeners_keeps_only_listening_sockets() -> None:
    table = HEADER + _row("0100007F:4E21", "0A", 111) + _row("0100007F:4E21", "01", 222)
    table += _row("00000000:4E22", "0A", 333)
    assert parse_listeners(table) == {0x4E21: {111}, 0x4E22: {333}}


def test_a_port_nobody_listens_on_is_free(proc: FakeProc) -> None:
    proc.listen(20001, 111, state="06")  # TIME_WAIT: not a listener
    assert port_owner(20001, [42], proc.root) == Ownership(20001, PortState.FREE)


def test_a_port_held_by_the_broker_group_is_ours(proc: FakeProc) -> None:
    proc.listen(20001, 111)
    proc.listen(20001, 112, v6=True)
    proc.process(42, ["java", "-jar", "activemq.jar"], [500])
    proc.process(43, ["java-child"], [111, 112])  # a child of the broker holds the sockets
    assert port_owner(20001, [42, 43], proc.root).state is PortState.OURS


def test_a_stranger_on_the_port_is_named_by_pid_and_command(proc: FakeProc) -> None:
    proc.listen(20001, 111)
    proc.process(42, ["java", "-jar", "activemq.jar"], [])
    proc.process(7, ["java", "-Dactivemq.base=/old/run", "-jar", "activemq.jar"], [111])
    owner = port_owner(20001, [42], proc.root)
    assert owner.state is PortState.FOREIGN
    assert owner.holder == "pid 7 (java -Dactivemq.base=/old/run -jar activemq.jar)"


def test_a_stranger_beside_our_listener_still_makes_the_port_foreign(proc: FakeProc) -> None:
    # A second listener (SO_REUSEPORT) would take a share of the connections.
    proc.listen(20001, 111)
    proc.listen(20001, 999, v6=True)
    proc.process(42, ["broker"], [111])
    proc.process(8, ["stub"], [999])
    assert port_owner(20001, [42], proc.root) == Ownership(20001, PortState.FOREIGN, "pid 8 (stub)")


def test_a_holder_we_cannot_inspect_is_still_foreign(proc: FakeProc) -> None:
    proc.listen(20001, 111)
    proc.process(42, ["broker"], [])
    owner = port_owner(20001, [42], proc.root)
    assert owner.state is PortState.FOREIGN
    assert "cannot inspect" in owner.holder


def test_without_proc_tables_ownership_is_unknown(tmp_path: Path) -> None:
    assert port_owner(20001, [42], tmp_path).state is PortState.UNKNOWN


def test_other_ports_do_not_count(proc: FakeProc) -> None:
    proc.listen(20002, 111)
    proc.process(7, ["stranger"], [111])
    assert port_owner(20001, [42], proc.root).state is PortState.FREE
