"""``send``, ``receive`` and ``probe`` against the scripted fake connector (no sockets)."""

from __future__ import annotations

import io
import json
import threading

from failover_client.cli import Environment, ExitCode, run
from failover_client.cli._probe_cmd import Peer, latest_peers, parse_advisory
from failover_client.testing import FakeClock, FakeConnector

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
SAFETY = 5.0


class Call:
    """One CLI run on a background thread (for tests that play the broker meanwhile)."""

    def __init__(self, argv: list[str], env: Environment) -> None:
        self.code: int | None = None
        self._thread = threading.Thread(target=self._run, args=(argv, env), daemon=True)
        self._thread.start()

    def _run(self, argv: list[str], env: Environment) -> None:
        self.code = run(argv, env)

    def join(self) -> int:
        self._thread.join(SAFETY)
        assert self.code is not None, "the command did not finish"
        return self.code


def make_env(
    connector: FakeConnector,
    clock: FakeClock,
    stdin: str = "",
    environ: dict[str, str] | None = None,
) -> tuple[Environment, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        stdin=io.StringIO(stdin),
        stdout=out,
        stderr=err,
        environ=environ or {},
        clock=clock,
        connector=connector,
        styled=False,
    )
    return env, out, err


def rig(*, autojump: bool = True, auto_confirm: bool = True) -> tuple[FakeClock, FakeConnector]:
    clock = FakeClock(autojump=autojump)
    return clock, FakeConnector(clock=clock, auto_confirm=auto_confirm)


# --- send ---------------------------------------------------------------------------------


def test_send_turns_stdin_lines_into_confirmed_messages() -> None:
    clock, connector = rig()
    env, out, err = make_env(connector, clock, stdin="one\ntwo\r\nthree\n")
    code = run(["send", URI, "/queue/x", "-H", "kind:test"], env)
    assert code == ExitCode.OK
    sent = connector.session("a:61613").sent
    assert [m.body for m in sent] == [b"one", b"two", b"three"]
    assert [m.state for m in sent] == ["confirmed"] * 3
    assert {m.headers["kind"] for m in sent} == {"test"}
    assert out.getvalue() == ""
    assert err.getvalue().startswith(
        "failover-client send: 3 sent, 3 confirmed, 0 not confirmed in 0.00 s"
    )
    assert err.getvalue().endswith("to /queue/x via stomp://a:61613 (0 failovers)\n")


def test_send_count_limits_stdin_lines() -> None:
    clock, connector = rig()
    env, _, _ = make_env(connector, clock, stdin="1\n2\n3\n")
    assert run(["send", URI, "/queue/x", "--count", "2"], env) == ExitCode.OK
    assert [m.body for m in connector.session("a:61613").sent] == [b"1", b"2"]


def test_send_body_with_count_sends_copies() -> None:
    clock, connector = rig()
    env, _, _ = make_env(connector, clock, stdin="ignored\n")
    assert run(["send", URI, "/queue/x", "--body", "hi", "--count", "3"], env) == ExitCode.OK
    assert [m.body for m in connector.session("a:61613").sent] == [b"hi"] * 3


def test_send_without_receipts_writes_and_forgets() -> None:
    clock, connector = rig()
    env, _, err = make_env(connector, clock, stdin="x\ny\n")
    assert run(["send", URI, "/queue/x", "--no-receipt"], env) == ExitCode.OK
    assert [m.state for m in connector.session("a:61613").sent] == ["untracked", "untracked"]
    assert err.getvalue().startswith("failover-client send: 2 written without confirmation")


def test_send_exits_4_when_a_message_is_rejected() -> None:
    clock, connector = rig(autojump=False, auto_confirm=False)
    env, _, err = make_env(connector, clock)
    call = Call(["send", URI, "/queue/x", "--body", "b", "--count", "2"], env)
    assert connector.wait_until(
        lambda: len(connector.sessions) == 1 and len(connector.sessions[0].unconfirmed()) == 2
    )
    session = connector.session("a:61613")
    session.confirm(1)
    session.reject(1, reason="queue full")
    assert call.join() == ExitCode.UNCONFIRMED
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("failover-client send: not confirmed: SendRejected: queue full")
    assert lines[1].startswith("failover-client send: 2 sent, 1 confirmed, 1 not confirmed")


def test_send_exits_3_when_no_broker_answers() -> None:
    clock, connector = rig()
    connector.behave("a:61613", "refuse")
    connector.behave("b:61613", "refuse")
    env, _, err = make_env(connector, clock, stdin="x\n")
    uri = URI + "&startupMaxReconnectAttempts=1&maxReconnectAttempts=1"
    assert run(["send", uri, "/queue/x"], env) == ExitCode.CONNECTION
    text = err.getvalue()
    assert "failover-client send: AllBrokersFailed: " in text
    assert "connection refused" in text
    assert "0 sent, 0 confirmed, 0 not confirmed" in text


def test_send_passcode_comes_from_the_environment_and_is_never_printed() -> None:
    clock, connector = rig()
    connector.behave("a:61613", "auth-fail")
    connector.behave("b:61613", "auth-fail")
    env, out, err = make_env(connector, clock, stdin="x\n", environ={"MY_PASS": "t0ps3cret"})
    code = run(["send", URI, "/queue/x", "--login", "app", "--passcode-env", "MY_PASS"], env)
    assert code == ExitCode.CONNECTION
    assert "AuthenticationFailed" in err.getvalue()
    assert "t0ps3cret" not in out.getvalue() + err.getvalue()


# --- receive ------------------------------------------------------------------------------


def _deliver_when_subscribed(connector: FakeConnector, bodies: list[bytes]) -> None:
    assert connector.wait_until(
        lambda: bool(connector.sessions) and bool(connector.sessions[0].subscriptions)
    )
    session = connector.sessions[0]
    (sub_id,) = session.subscriptions
    for number, body in enumerate(bodies):
        session.deliver(sub_id, body, headers={"failover-message-id": f"id-{number}"})


def test_receive_prints_count_messages_and_acks_them_after_printing() -> None:
    clock, connector = rig(autojump=False)
    env, out, err = make_env(connector, clock)
    call = Call(["receive", URI, "/queue/x", "--count", "2"], env)
    _deliver_when_subscribed(connector, [b"first", b"second\n", b"third"])
    assert call.join() == ExitCode.OK
    assert out.getvalue() == "first\nsecond\n"
    session = connector.sessions[0]
    assert [a.body for a in session.acks] == [b"first", b"second\n"]
    assert session.subscriptions == {} or session.closed
    assert err.getvalue().startswith("failover-client receive: 2 messages from /queue/x in ")


def test_receive_json_lines() -> None:
    clock, connector = rig(autojump=False)
    env, out, _ = make_env(connector, clock)
    call = Call(["receive", URI, "/queue/x", "--count", "1", "--json", "--ack", "auto"], env)
    _deliver_when_subscribed(connector, [b"hello"])
    assert call.join() == ExitCode.OK
    document = json.loads(out.getvalue())
    assert document == {
        "body": "hello",
        "destination": "/queue/x",
        "headers": {"failover-message-id": "id-0"},
        "message_id": "id-0",
        "redelivered": False,
    }
    # auto: the engine acknowledged it once handled (the broker's prefetch bounds the client).
    session = connector.sessions[0]
    assert connector.wait_until(lambda: [a.body for a in session.acks] == [b"hello"])


def test_receive_timeout_before_count_exits_5() -> None:
    clock, connector = rig(autojump=True)
    env, out, _ = make_env(connector, clock)
    code = run(["receive", URI, "/queue/x", "--count", "3", "--timeout", "2"], env)
    assert code == ExitCode.INCOMPLETE
    assert out.getvalue() == ""


# --- probe --------------------------------------------------------------------------------


def test_probe_reports_each_member_and_exits_5_when_some_are_silent() -> None:
    clock, connector = rig()
    connector.behave("b:61613", "refuse")
    env, out, _ = make_env(connector, clock)
    assert run(["probe", URI], env) == ExitCode.INCOMPLETE
    assert out.getvalue() == (
        "members:\n"
        "  member           answered  ms   version  server  heart-beat\n"
        "  stomp://a:61613  yes       0.0  -        -       -\n"
        "  stomp://b:61613  no        -    -        -       -\n"
        "      BrokerUnavailable: stomp://b:61613: connection refused\n"
    )
    assert [s.closed for s in connector.sessions] == [True]


def test_probe_json_and_exit_3_when_none_answers() -> None:
    clock, connector = rig()
    connector.behave("a:61613", "refuse")
    connector.behave("b:61613", "auth-fail")
    env, out, _ = make_env(connector, clock)
    assert run(["probe", "--json", URI], env) == ExitCode.CONNECTION
    members = json.loads(out.getvalue())["members"]
    assert [(m["member"], m["answered"]) for m in members] == [
        ("stomp://a:61613", False),
        ("stomp://b:61613", False),
    ]
    assert members[1]["error"] == "AuthenticationFailed: stomp://b:61613: credentials refused"


def test_probe_skips_members_it_cannot_speak_to() -> None:
    clock, connector = rig()
    env, out, _ = make_env(connector, clock)
    assert run(["probe", "failover:(tcp://a:61616)"], env) == ExitCode.CONNECTION
    assert "OpenWire members cannot be probed (no OpenWire client)" in out.getvalue()


def advisory(name: str, url: str) -> bytes:
    return json.dumps({"BrokerInfo": {"brokerName": name, "brokerURL": url}}).encode()


def test_probe_peers_lists_bridges_from_advisories() -> None:
    _, connector = rig()
    out = io.StringIO()
    command_clock = FakeClock()
    done = threading.Event()

    def broker_side() -> None:
        assert connector.wait_until(
            lambda: bool(connector.sessions) and bool(connector.sessions[0].subscriptions)
        )
        session = connector.sessions[0]
        (sub_id,) = session.subscriptions
        session.deliver(sub_id, advisory("b1", "stomp://b:61613"), headers={"started": "true"})
        session.deliver(sub_id, advisory("c1", "stomp://c:61613"), headers={"started": "true"})
        session.deliver(sub_id, advisory("c1", "stomp://c:61613"), headers={"started": "false"})
        done.set()

    helper = threading.Thread(target=broker_side, daemon=True)
    helper.start()
    # The listening window runs on a clock without autojump: deliver first, then end it.
    env = Environment(
        stdin=io.StringIO(),
        stdout=out,
        stderr=io.StringIO(),
        environ={},
        clock=command_clock,
        connector=connector,
        styled=False,
    )
    call = Call(["probe", "--peers", "--peers-wait", "5", "failover:(stomp://a:61613)"], env)
    assert done.wait(SAFETY)
    assert command_clock.wait_for_waiters(1, timed=True)
    command_clock.advance(5)
    assert call.join() == ExitCode.OK
    text = out.getvalue()
    assert "network-bridge peers:" in text
    assert "  stomp://a:61613  b1    stomp://b:61613  up" in text
    assert "  stomp://a:61613  c1    stomp://c:61613  down" in text


def test_parse_advisory_finds_broker_info() -> None:
    body = json.dumps({"BrokerInfo": {"brokerName": "n", "brokerURL": "stomp://h:1"}}).encode()
    assert parse_advisory(body, {"started": "false"}) == Peer("n", "stomp://h:1", False)
    assert parse_advisory(b"not json", {}) is None
    assert parse_advisory(b'{"other": {}}', {}) is None


def test_latest_peers_keeps_the_last_word_per_peer() -> None:
    peers = [Peer("b", "u1", True), Peer("a", "u2", True), Peer("b", "u1", False)]
    assert latest_peers(peers) == (Peer("a", "u2", True), Peer("b", "u1", False))
