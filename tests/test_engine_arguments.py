"""Public entry points refuse wrong arguments with a ConfigurationError and change nothing."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from failover_client.uri import FailoverOptions, parse
from test_manager_support import A, Rig, make, running

from failover_client import ConfigurationError, FailoverConnection, OptionError, SendTimeout
from failover_client.testing import FakeClock, FakeConnector


def unchanged(rig: Rig, call: Callable[[], object], *words: str) -> ConfigurationError:
    """Run ``call``, expect a ConfigurationError mentioning ``words``, and no state change."""
    before = (rig.conn.state, rig.conn.stats(), repr(rig.conn))
    written = {s.address.key: len(s.sent) for s in rig.connector.sessions}
    with pytest.raises(ConfigurationError) as caught:
        call()
    for word in words:
        assert word in str(caught.value)
    assert (rig.conn.state, rig.conn.stats(), repr(rig.conn)) == before
    assert {s.address.key: len(s.sent) for s in rig.connector.sessions} == written
    return caught.value


# --- 1. bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [7, True, 2.5, None, [1, 2], {"a": 1}, object()])
def test_send_refuses_bodies_that_are_neither_bytes_like_nor_str(body: Any) -> None:
    rig = make((A,))
    with running(rig):
        error = unchanged(rig, lambda: rig.conn.send("/queue/q", body), "body")
        assert type(body).__name__ in str(error)
        unchanged(rig, lambda: rig.conn.send("/queue/q", body, confirm=False), "body")
        unchanged(rig, lambda: rig.conn.send_async("/queue/q", body), "body")


def test_bytes_like_and_str_bodies_are_sent_as_their_bytes() -> None:
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"ab")
        rig.conn.send("/queue/q", bytearray(b"cd"))
        rig.conn.send("/queue/q", memoryview(b"ef"))
        rig.conn.send_async("/queue/q", "gh").result(5)
        assert [m.body for m in rig.connector.session(A).sent] == [b"ab", b"cd", b"ef", b"gh"]


# --- 2. timeouts --------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [-1, -0.5, math.nan, "5", True])
def test_bad_timeouts_are_refused_before_anything_is_written(timeout: Any) -> None:
    rig = make((A,))
    with running(rig):
        send = rig.conn.send
        unchanged(rig, lambda: send("/queue/q", b"x", timeout=timeout), "timeout", "None")
        unchanged(rig, lambda: send("/queue/q", b"x", timeout=timeout, confirm=False), "timeout")
        unchanged(rig, lambda: rig.conn.send_async("/queue/q", b"x", timeout=timeout), "timeout")
        unchanged(rig, lambda: rig.conn.flush(timeout=timeout), "timeout")


def test_a_confirmed_send_refuses_timeout_zero_because_it_cannot_wait_for_the_broker() -> None:
    rig = make((A,))
    with running(rig):
        error = unchanged(rig, lambda: rig.conn.send("/queue/q", b"x", timeout=0), "timeout")
        assert "send_async" in str(error)


def test_timeout_zero_elsewhere_means_do_not_wait_and_fails_only_unwritten_sends() -> None:
    rig = make((A,), auto_confirm=False, confirm_window=1)
    with running(rig):
        first = rig.conn.send_async("/queue/q", b"1", timeout=0)  # written at once
        with pytest.raises(SendTimeout, match="window full"):
            rig.conn.send_async("/queue/q", b"2", timeout=0)  # no room: not written
        with pytest.raises(SendTimeout, match="outstanding"):
            rig.conn.flush(timeout=0)
        assert rig.connector.session(A).message_ids() == ["c-1"]
        rig.connector.session(A).confirm()
        first.result(5)
        rig.conn.flush(timeout=0)


def test_an_infinite_timeout_waits_forever() -> None:
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"x", timeout=math.inf)
        rig.conn.send_async("/queue/q", b"y", timeout=math.inf).result(5)
        rig.conn.send("/queue/q", b"z", timeout=math.inf, confirm=False)
        rig.conn.flush(timeout=math.inf)
        assert len(rig.connector.session(A).sent) == 3


def test_an_options_timeout_of_zero_is_refused_at_construction() -> None:
    clock = FakeClock()
    with pytest.raises(ConfigurationError, match="timeout"):
        FailoverConnection(
            (A,),
            options=FailoverOptions(timeout=0.0),
            connector=FakeConnector(clock=clock),
            clock=clock,
        )


# --- 3. the other entry points ------------------------------------------------------------------


def test_subscribe_refuses_bad_arguments_without_registering_anything() -> None:
    rig = make((A,))
    with running(rig):
        subscribe = rig.conn.subscribe
        error = unchanged(
            rig, lambda: subscribe("/queue/q", print, ack="bogus"), "ack", "client-individual"
        )
        assert "'bogus'" in str(error)
        unchanged(rig, lambda: subscribe("/queue/q", "f"), "handler", "callable")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", 42), "handler", "int")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("", print), "destination")
        unchanged(rig, lambda: subscribe(7, print), "destination")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", print, id=""), "id")
        unchanged(rig, lambda: subscribe("/queue/q", print, durable_name=3), "durable_name")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", print, headers=[("a", "b")]), "headers")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", print, prefetch=0), "prefetch", ">= 1")
        unchanged(rig, lambda: subscribe("/queue/q", print, prefetch=True), "prefetch", "bool")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", print, prefetch=2.5), "prefetch", "float")  # type: ignore[arg-type]
        unchanged(rig, lambda: subscribe("/queue/q", print, prefetch_bytes=-1), "prefetch_bytes")
        assert rig.connector.session(A).subscriptions == {}
        # The refused calls used no generated id.
        assert subscribe("/queue/q", print).id == "sub-1"


def test_send_refuses_a_bad_destination_headers_or_message_id() -> None:
    rig = make((A,))
    with running(rig):
        send = rig.conn.send
        unchanged(rig, lambda: send("", b"x"), "destination")
        unchanged(rig, lambda: send(None, b"x"), "destination")  # type: ignore[arg-type]
        unchanged(rig, lambda: send("/queue/q", b"x", headers=["k"]), "headers")  # type: ignore[arg-type]
        unchanged(rig, lambda: send("/queue/q", b"x", message_id=5), "message_id")  # type: ignore[arg-type]
        unchanged(rig, lambda: rig.conn.send_async(b"/queue/q", b"x"), "destination")  # type: ignore[arg-type]


def test_add_listener_refuses_what_cannot_be_called() -> None:
    rig = make((A,))
    unchanged(rig, lambda: rig.conn.add_listener(None), "listener", "callable")  # type: ignore[arg-type]
    unchanged(rig, lambda: rig.conn.add_listener("print"), "listener", "str")  # type: ignore[arg-type]
    assert rig.conn.stats()["listener_errors"] == 0


def test_update_brokers_refuses_an_unknown_action() -> None:
    rig = make((A,))
    update = rig.conn.update_brokers
    unchanged(rig, lambda: update([A], source="s", action="merge"), "action", "replace")  # type: ignore[arg-type]
    unchanged(rig, lambda: update([A], source=None), "source")  # type: ignore[arg-type]
    unchanged(rig, lambda: update([A], source="s", tiers={A.key: -1}), "tiers", "int >= 0")
    unchanged(rig, lambda: update([A], source="s", tiers={A.key: 1.5}), "tiers", "int >= 0")  # type: ignore[dict-item]
    unchanged(rig, lambda: update([A], source="s", weights={A.key: 0}), "weights", "> 0")
    unchanged(rig, lambda: update([A], source="s", weights=[1.0]), "weights", "map")  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [None, 42, b"stomp://a:61613", 1.5])
def test_the_constructor_refuses_a_target_that_is_no_failover_uri(target: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        FailoverConnection(target, connector=FakeConnector(clock=FakeClock()))
    assert "target" in str(caught.value)
    assert type(target).__name__ in str(caught.value)


@pytest.mark.parametrize(
    ("keyword", "value", "words"),
    [
        ("options", {"timeout": 1}, ("options", "FailoverOptions")),
        ("listeners", [None], ("listener", "callable")),
        ("client_id", 5, ("client_id",)),
        ("tiers", [("a:61613", 0)], ("tiers",)),
    ],
)
def test_the_constructor_names_a_bad_keyword(
    keyword: str, value: object, words: tuple[str]
) -> None:
    clock = FakeClock()
    kwargs: dict[str, Any] = {keyword: value}
    with pytest.raises(ConfigurationError) as caught:
        FailoverConnection((A,), connector=FakeConnector(clock=clock), clock=clock, **kwargs)
    for word in words:
        assert word in str(caught.value)


def test_a_parsed_uri_is_still_a_valid_target() -> None:
    clock = FakeClock()
    target = parse("failover:(stomp://a:61613)")
    conn = FailoverConnection(target, connector=FakeConnector(clock=clock), clock=clock)
    assert conn.state == "new"


@pytest.mark.parametrize(
    ("text", "spelling"),
    [
        ("failover:(stomp://a:61613)?connectTimeout=0", "connectTimeout"),
        ("(tcp://a:61616)?connectTimeout=0", "connectTimeout"),
    ],
)
def test_a_connect_timeout_of_zero_is_an_option_error(text: str, spelling: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse(text)
    assert caught.value.option in ("connect_timeout", spelling)
    assert spelling in str(caught.value)


def test_a_connect_timeout_of_zero_is_refused_in_python_too() -> None:
    with pytest.raises(OptionError, match="connect_timeout"):
        FailoverOptions(connect_timeout=0)
