"""Group commit of confirmed STOMP sends: the renderer, the writer hook, and the session's use.

No sockets: the session runs over the scripted transport of ``test_stomp_adapter_session``,
here given a "writer" that holds queued items until the test lets it write them in one go.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from failover_client.uri import parse
from stomp import utils as stomp_utils
from stomp.utils import Frame

from failover_client import (
    BrokerRefused,
    BrokerUnavailable,
    ConfigurationError,
    FailoverOptions,
    SendRejected,
)
from failover_client.net._writer import FrameWriter
from failover_client.stomp import _receipts
from failover_client.stomp._batch import GroupCommit, PendingSend, batching_supported
from failover_client.stomp._encode import header_block
from tests.test_stomp_adapter_session import (
    REAL_NONCE,
    Harness,
    ScriptedTransport,
    predictable_ids,  # noqa: F401 - autouse: ids without their nonce
)

ACTIVEMQ = {"version": "1.2", "heart-beat": "0,0", "server": "ActiveMQ/5.17.2"}


def encode(command: str, headers: Any, body: bytes) -> bytes:
    return stomp_utils.pack(stomp_utils.convert_frame(Frame(command, dict(headers), body)))


def frames(data: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """Parse concatenated frames (no NUL inside bodies in these tests)."""
    out = []
    for chunk in data.split(b"\x00"):
        raw = chunk.lstrip(b"\n")
        if not raw:
            continue
        head, _, body = raw.partition(b"\n\n")
        command, *lines = head.decode().split("\n")
        out.append((command, dict(line.split(":", 1) for line in lines), body))
    return out


def send(n: int, *, alone: bool = False) -> PendingSend:
    head = header_block({"destination": "/queue/q", "persistent": "true"}, "1.2")
    return PendingSend(f"fc-{n}", head, b"m%d" % n, alone)


def shape(data: bytes) -> list[str]:
    """Each frame as COMMAND plus its transaction / receipt headers."""
    result = []
    for command, headers, _ in frames(data):
        extra = [f"{k}={headers[k]}" for k in ("transaction", "receipt") if k in headers]
        result.append(" ".join([command, *extra]))
    return result


# --- batching_supported ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "auto"),
    [
        ("ActiveMQ/5.17.2", True),
        ("ActiveMQ/5.14.0", True),
        ("ActiveMQ/6.1.0", True),
        ("ActiveMQ/5.13.4", False),  # before rollbackOnlyOnAsyncException
        ("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine", False),
        ("RabbitMQ/3.10.8", False),
        ("", False),
    ],
)
def test_auto_batches_only_on_activemq_classic_514_and_later(server: str, auto: bool) -> None:
    headers = {"server": server} if server else {}
    assert batching_supported("auto", headers) is auto
    assert batching_supported("transaction", headers) is True
    assert batching_supported("receipt", headers) is False


def test_confirm_mode_is_a_uri_option_and_is_validated() -> None:
    assert parse("failover:(stomp://a:1)?confirmMode=receipt").options.confirm_mode == "receipt"
    assert FailoverOptions().confirm_mode == "auto"
    with pytest.raises(ValueError, match="confirm_mode must be one of auto, receipt, transaction"):
        FailoverOptions(confirm_mode="sometimes")  # type: ignore[arg-type]


# --- GroupCommit.render --------------------------------------------------------------------------


def test_a_lone_send_keeps_its_own_receipt_and_opens_no_transaction() -> None:
    group = GroupCommit(encode, prefix="fx-")
    assert shape(group.render([send(1)])) == ["SEND receipt=fc-1"]
    assert group.unanswered == 0


def test_a_run_of_sends_becomes_one_transaction_with_one_commit_receipt() -> None:
    group = GroupCommit(encode, prefix="fx-")
    data = group.render([send(1), send(2), send(3)])
    assert shape(data) == [
        "BEGIN transaction=fx-t1",
        "SEND transaction=fx-t1",
        "SEND transaction=fx-t1",
        "SEND transaction=fx-t1",
        "COMMIT transaction=fx-t1 receipt=fx-1",
    ]
    assert [body for cmd, _, body in frames(data) if cmd == "SEND"] == [b"m1", b"m2", b"m3"]
    assert group.unanswered == 1


def test_other_frames_split_runs_and_keep_their_place() -> None:
    group = GroupCommit(encode, prefix="fx-")
    ack = encode("ACK", {"id": "a1"}, b"")
    data = group.render([send(1), send(2), ack, send(3), send(4, alone=True), send(5), send(6)])
    assert shape(data) == [
        "BEGIN transaction=fx-t1",
        "SEND transaction=fx-t1",
        "SEND transaction=fx-t1",
        "COMMIT transaction=fx-t1 receipt=fx-1",
        "ACK",
        "SEND receipt=fc-3",
        "SEND receipt=fc-4",
        "BEGIN transaction=fx-t2",
        "SEND transaction=fx-t2",
        "SEND transaction=fx-t2",
        "COMMIT transaction=fx-t2 receipt=fx-2",
    ]


def test_runs_longer_than_max_batch_are_split() -> None:
    group = GroupCommit(encode, prefix="fx-", max_batch=2)
    data = group.render([send(n) for n in range(1, 6)])
    assert [s for s in shape(data) if s.startswith("COMMIT")] == [
        "COMMIT transaction=fx-t1 receipt=fx-1",
        "COMMIT transaction=fx-t2 receipt=fx-2",
    ]
    assert shape(data)[-1] == "SEND receipt=fc-5"
    with pytest.raises(ValueError, match="max_batch must be >= 2"):
        GroupCommit(encode, prefix="fx-", max_batch=1)


def test_render_refuses_what_is_not_a_frame() -> None:
    with pytest.raises(TypeError, match="cannot render int"):
        GroupCommit(encode, prefix="fx-").render([7])  # type: ignore[list-item]


# --- GroupCommit answers -------------------------------------------------------------------------


def test_commit_receipt_confirms_refusal_retries_and_unknown_ids_are_none() -> None:
    group = GroupCommit(encode, prefix="fx-")
    group.render([send(1), send(2)])
    group.render([send(3), send(4)])
    assert group.is_ours("fx-1")
    assert not group.is_ours("fc-1")
    verdict, sends = group.committed("fx-1") or ("none", ())
    assert (verdict, [s.receipt for s in sends]) == ("confirm", ["fc-1", "fc-2"])
    assert group.committed("fx-1") is None  # answered once
    verdict, sends = group.refused("fx-2") or ("none", ())
    assert (verdict, [s.receipt for s in sends]) == ("retry", ["fc-3", "fc-4"])
    assert group.refused("fx-9") is None
    assert group.unanswered == 0


def test_an_unattributed_error_puts_the_oldest_unanswered_transaction_in_doubt() -> None:
    group = GroupCommit(encode, prefix="fx-")
    assert group.unattributed_error() is None  # nothing unanswered: nothing to doubt
    group.render([send(1), send(2)])
    group.render([send(3), send(4)])
    assert group.unattributed_error() == "fx-1"
    assert group.unattributed_error() == "fx-1"  # a second bad send of the same run
    assert (group.committed("fx-1") or ("none",))[0] == "retry"
    assert group.unattributed_error() == "fx-2"  # the next ERROR is about the next run
    group.render([send(5), send(6)])
    assert (group.committed("fx-2") or ("none",))[0] == "retry"
    assert (group.committed("fx-3") or ("none",))[0] == "confirm"
    group.render([send(7), send(8)])
    group.clear()
    assert group.committed("fx-4") is None


# --- FrameWriter with a render function ----------------------------------------------------------


class _Item:
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def nbytes(self) -> int:
        return 10


def test_writer_renders_queued_items_together_in_order() -> None:
    written: list[bytes] = []
    batches: list[list[object]] = []
    gate = threading.Event()

    def write(data: bytes) -> None:
        gate.wait(5)
        written.append(data)

    def render(items: Any) -> bytes:
        batches.append(list(items))
        return b"|".join(i if isinstance(i, bytes) else i.name.encode() for i in items)

    writer = FrameWriter(
        write, on_written=lambda: None, on_failed=lambda e: None, render=render, inline_after=None
    )
    writer.start()
    writer.put(b"first")  # the writer takes it and blocks in write until the gate opens
    assert _wait_until(lambda: writer.buffered == 0)
    writer.put(_Item("a"))
    writer.put(b"frame")
    writer.put(_Item("b"))
    assert writer.buffered == 10 + 5 + 10
    gate.set()
    assert writer.flush(5)
    writer.cancel()
    assert writer.join(5)
    assert written == [b"first", b"a|frame|b"]
    assert [len(b) for b in batches] == [1, 3]


def test_forced_put_never_blocks_on_a_full_buffer_and_default_render_refuses_items() -> None:
    writer = FrameWriter(lambda d: None, on_written=lambda: None, on_failed=lambda e: None, limit=4)
    # Never started: nothing drains the buffer, so an unforced put would block here.
    writer.put(b"12345", force=True)
    writer.put(b"6", force=True)
    assert writer.buffered == 6
    failures: list[BaseException] = []
    writer2 = FrameWriter(
        lambda d: None, on_written=lambda: None, on_failed=failures.append, inline_after=None
    )
    writer2.start()
    writer2.put(_Item("x"))
    assert writer2.join(5)
    assert len(failures) == 1
    assert "without a render function" in str(failures[0])


def _wait_until(check: Any, timeout: float = 5.0) -> bool:
    done = threading.Event()
    for _ in range(int(timeout / 0.001)):
        if check():
            return True
        done.wait(0.001)
    return bool(check())


# --- the session ---------------------------------------------------------------------------------


class WriterTransport(ScriptedTransport):
    """A plain-TCP-like transport: a writer that renders what was queued when told to write."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_connect = lambda t: t.play("connected", ACTIVEMQ)
        self.queued: list[Any] = []
        self.wire: list[tuple[str, dict[str, str], bytes]] = []
        self.render: Any = None
        self.deferred_error: BaseException | None = None

    def start_writer(self, **kwargs: Any) -> bool:
        self.render = kwargs.get("render")
        return True

    def transmit(self, frame: Any) -> None:
        self.queued.append(encode(frame.cmd, frame.headers, frame.body or b""))

    def send_deferred(
        self, item: Any, *, force: bool = False, inline: bool = True, nowait: bool = False
    ) -> None:
        if self.deferred_error is not None:
            raise self.deferred_error
        self.queued.append(item)

    def write_all(self) -> list[str]:
        """Let the writer take everything queued in one write; returns the frames' shapes."""
        items, self.queued = self.queued, []
        if not items:
            return []
        data = self.render(items) if self.render is not None else b"".join(items)
        self.wire.extend(frames(data))
        return shape(data)


class Outcomes:
    def __init__(self) -> None:
        self.results: dict[int, BaseException | None] = {}

    def callback(self, n: int) -> Any:
        def done(error: BaseException | None) -> None:
            assert n not in self.results, f"send {n} called back twice"
            self.results[n] = error

        return done


def _session(**kwargs: Any) -> tuple[Harness, WriterTransport, Any]:
    h = Harness(**kwargs)
    created: list[WriterTransport] = []

    def factory(*args: Any, **kw: Any) -> WriterTransport:
        transport = WriterTransport(*args, **kw)
        created.append(transport)
        return transport

    h.connector._transport_factory = factory  # the seam the connector offers tests
    session = h.connect()
    return h, created[-1], session


def test_session_on_activemq_group_commits_a_burst_and_the_commit_confirms_each() -> None:
    _h, t, session = _session()
    assert session.batching
    out = Outcomes()
    for n in range(1, 4):
        session.send("/queue/q", b"m%d" % n, {"failover-message-id": f"id-{n}"}, out.callback(n))
    assert t.write_all() == [
        "BEGIN transaction=fx-t1",
        "SEND transaction=fx-t1",
        "SEND transaction=fx-t1",
        "SEND transaction=fx-t1",
        "COMMIT transaction=fx-t1 receipt=fx-1",
    ]
    sends = [headers for cmd, headers, _ in t.wire if cmd == "SEND"]
    assert [s["failover-message-id"] for s in sends] == ["id-1", "id-2", "id-3"]
    assert all(s["persistent"] == "true" and "receipt" not in s for s in sends)
    assert session.outstanding == 3
    t.play("receipt", {"receipt-id": "fx-1"})
    assert out.results == {1: None, 2: None, 3: None}
    assert session.outstanding == 0


def test_a_send_in_the_callers_own_transaction_is_written_alone_with_its_receipt() -> None:
    _h, t, session = _session()
    out = Outcomes()
    session.send("/queue/q", b"m1", {}, out.callback(1))
    session.send("/queue/q", b"mine", {"transaction": "app-tx"}, out.callback(2))
    session.send("/queue/q", b"m3", {}, out.callback(3))
    t.write_all()
    # The caller's transaction is theirs to commit: its SEND is written as it is, with its
    # own receipt, and the batch around it takes in only the other two.
    [(command, headers, body)] = t.frames
    assert (command, body, headers["transaction"]) == ("SEND", b"mine", "app-tx")
    assert headers["receipt"]
    batched = [(h["transaction"], b) for cmd, h, b in t.wire if cmd == "SEND"]
    assert [b for _, b in batched] == [b"m1", b"m3"]
    assert "app-tx" not in {tx for tx, _ in batched}


def test_session_escapes_headers_of_batched_sends_like_stomp_py() -> None:
    _h, t, session = _session()
    session.send("/queue/q", b"x", {"note": "a:b"}, Outcomes().callback(1))
    t.write_all()
    assert t.wire[0][1]["note"] == r"a\cb"


def test_refused_commit_sends_each_again_alone_and_only_the_bad_one_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _h, t, session = _session()
    out = Outcomes()
    for n in range(1, 4):
        session.send("/queue/q", b"m%d" % n, {}, out.callback(n))
    t.write_all()
    t.play("error", {"message": "dest does not exist"}, b"")  # the bad SEND, unattributed
    t.play("error", {"receipt-id": "fx-1", "message": "COMMIT FAILED: rollback only"}, b"")
    assert out.results == {}
    assert t.write_all() == ["SEND receipt=fc-1", "SEND receipt=fc-2", "SEND receipt=fc-3"]
    t.play("receipt", {"receipt-id": "fc-1"})
    t.play("error", {"receipt-id": "fc-2", "message": "does not exist"}, b"")
    assert out.results[1] is None
    assert isinstance(out.results[2], SendRejected)
    # An ERROR naming a send answers that send only; the session goes on until the broker
    # closes it. A close after an ERROR that named nothing is the broker refusing a frame.
    assert 3 not in out.results
    assert session.is_open
    t.play("disconnected")
    assert isinstance(out.results[3], BrokerUnavailable)
    (cause,) = _h.listener.lost
    assert isinstance(cause, BrokerRefused)
    assert "after an ERROR: stomp://b1:61613: broker sent ERROR: dest does not exist" in str(cause)
    # The unattributed ERROR is logged once, as a warning (the broker's, not our failure).
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "failover_client.stomp" and r.levelno == logging.WARNING
    ]
    assert warnings == ["stomp://b1:61613: broker sent ERROR: dest does not exist"]


def test_commit_after_an_unattributed_error_confirms_nothing_and_resends_alone() -> None:
    _h, t, session = _session()
    out = Outcomes()
    session.send("/queue/q", b"a", {}, out.callback(1))
    session.send("/queue/q", b"b", {}, out.callback(2))
    t.write_all()
    t.play("error", {"message": "bad destination"}, b"")
    t.play("receipt", {"receipt-id": "fx-1"})  # committed, but one send may have been dropped
    assert out.results == {}
    assert t.write_all() == ["SEND receipt=fc-1", "SEND receipt=fc-2"]
    t.play("receipt", {"receipt-id": "fc-1"})
    t.play("receipt", {"receipt-id": "fc-2"})
    assert out.results == {1: None, 2: None}


def test_loss_fails_every_queued_and_batched_send_once_and_late_receipts_are_ignored() -> None:
    h, t, session = _session()
    out = Outcomes()
    session.send("/queue/q", b"a", {}, out.callback(1))
    session.send("/queue/q", b"b", {}, out.callback(2))
    t.write_all()
    session.send("/queue/q", b"c", {}, out.callback(3))  # queued, never written
    t.play("disconnected")
    assert sorted(out.results) == [1, 2, 3]
    assert all(isinstance(e, BrokerUnavailable) for e in out.results.values())
    t.play("receipt", {"receipt-id": "fx-1"})  # would be a bug to call back again
    assert len(h.listener.lost) == 1
    with pytest.raises(BrokerUnavailable, match="session was lost"):
        session.send("/queue/q", b"d", {}, out.callback(4))


def test_a_failed_queue_raises_and_never_calls_back() -> None:
    _h, t, session = _session()
    t.deferred_error = ConnectionError("writer failed")
    out = Outcomes()
    with pytest.raises(BrokerUnavailable):
        session.send("/queue/q", b"a", {}, out.callback(1))
    assert out.results == {}
    assert session.outstanding == 0


def test_receipt_mode_and_tls_sessions_keep_one_receipt_per_send() -> None:
    _h, _t, session = _session(confirm_mode="receipt")
    assert not session.batching
    h2 = Harness()  # the plain scripted transport has no writer, like a TLS socket
    h2.script = lambda tr: tr.play("connected", ACTIVEMQ)
    assert not h2.connect().batching
    with pytest.raises(ConfigurationError, match="confirm_mode must be auto, receipt or tr"):
        Harness(confirm_mode="maybe")


@pytest.mark.parametrize("destination", ["", "/queue/", "/topic/", "/amq/queue/"])
def test_empty_or_bare_prefix_destinations_are_refused_before_writing(destination: str) -> None:
    _h, t, session = _session()
    with pytest.raises(ConfigurationError, match="SEND: "):
        session.send(destination, b"x", {}, Outcomes().callback(1))
    assert t.queued == []
    assert session.outstanding == 0


def test_after_a_refusal_only_the_run_in_doubt_may_hold_the_culprit() -> None:
    h, t, session = _session()
    out = Outcomes()
    for n in range(1, 3):
        session.send("/queue/q", b"a%d" % n, {}, out.callback(n))
    t.write_all()  # run fx-1: 1, 2
    for n in range(3, 5):
        session.send("/queue/q", b"b%d" % n, {}, out.callback(n))
    t.write_all()  # run fx-2: 3, 4 (written after the first: never read if the first was bad)
    t.play("error", {"message": "maximum header length exceeded"}, b"")
    t.play("disconnected")
    assert {n: type(e) for n, e in out.results.items()} == {
        1: BrokerRefused,
        2: BrokerRefused,
        3: BrokerUnavailable,
        4: BrokerUnavailable,
    }
    assert "never read by the broker" in str(out.results[3])
    (cause,) = h.listener.lost
    assert isinstance(cause, BrokerRefused)


# --- receipts the broker cannot have meant -----------------------------------------------------


def test_a_receipt_naming_a_batched_send_confirms_nothing_until_it_went_out_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A batched send's own receipt id is not on the wire: its transaction's COMMIT answers
    # for it. A peer naming it (ahead of the SEND, or inside a transaction not committed yet)
    # would otherwise confirm a message the broker never stored: a silent loss.
    h, t, session = _session()
    out = Outcomes()
    for n in range(1, 4):
        session.send("/queue/q", b"m%d" % n, {}, out.callback(n))
    t.play("receipt", {"receipt-id": "fc-2"})  # before anything was written
    assert t.write_all()[0] == "BEGIN transaction=fx-t1"
    t.play("receipt", {"receipt-id": "fc-2"})  # written, but inside the uncommitted transaction
    assert out.results == {}
    assert session.premature_receipts == 2
    assert "premature_receipts=2" in repr(session)
    t.play("disconnected")  # the COMMIT never came: nothing of the run was stored
    assert {n: type(e) for n, e in out.results.items()} == {
        1: BrokerUnavailable,
        2: BrokerUnavailable,
        3: BrokerUnavailable,
    }
    lines = [r.getMessage() for r in caplog.records if "RECEIPT for 'fc-2'" in r.getMessage()]
    assert len(lines) == 1  # the repeat is counted, not logged again within the interval
    assert "not written yet" in lines[0]
    assert len(h.listener.lost) == 1


def test_a_send_written_alone_is_confirmed_by_its_own_receipt() -> None:
    _h, t, session = _session()
    out = Outcomes()
    session.send("/queue/q", b"a", {}, out.callback(1))
    assert t.write_all() == ["SEND receipt=fc-1"]
    t.play("receipt", {"receipt-id": "fc-1"})
    assert out.results == {1: None}
    assert session.premature_receipts == 0


def test_commit_ids_are_unguessable_so_a_made_up_commit_receipt_confirms_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_receipts, "new_nonce", REAL_NONCE)
    _h, t, session = _session()
    out = Outcomes()
    for n in range(1, 3):
        session.send("/queue/q", b"m%d" % n, {}, out.callback(n))
    t.write_all()
    commit = t.wire[-1][1]["receipt"]
    assert commit.startswith("fx-")
    assert commit != "fx-1"
    for guess in ("fx-1", "fc-1", "fc-2"):
        t.play("receipt", {"receipt-id": guess})
    assert out.results == {}
    assert session.unknown_receipts == 3
    t.play("receipt", {"receipt-id": commit})
    assert out.results == {1: None, 2: None}
    _h2, t2, _session2 = _session()
    _session2.send("/queue/q", b"x", {}, Outcomes().callback(1))
    _session2.send("/queue/q", b"y", {}, Outcomes().callback(2))
    t2.write_all()
    assert t2.wire[-1][1]["receipt"] != commit  # a new nonce per session
