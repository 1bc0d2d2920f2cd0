"""Each refusal has its own error: not connected yet, gave up, closed; and the adapter lookup."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions
from test_manager_support import A, B, make, running

from failover_client import (
    AllBrokersFailed,
    ConfigurationError,
    ConnectionClosed,
    ConnectionFailure,
    FailoverClientError,
    FailoverConnection,
    NotConnected,
    ReconnectAttempt,
)
from failover_client._events import GaveUp
from failover_client.engine import _adapters
from failover_client.engine._adapters import connector_for
from failover_client.testing import EventRecorder, FakeClock

AMQP = BrokerAddress("amqp", "a", 5672)


def _ignore(message: object) -> None:
    """A subscription handler that is never called here."""


# --- the three refusals --------------------------------------------------------------------


def test_not_connected_is_its_own_error():
    assert issubclass(NotConnected, FailoverClientError)
    assert issubclass(NotConnected, RuntimeError)
    assert not issubclass(NotConnected, ConnectionClosed)
    assert not issubclass(ConnectionClosed, NotConnected)
    assert not issubclass(AllBrokersFailed, ConnectionClosed)


def test_before_connect_sends_raise_not_connected_but_subscribing_is_allowed():
    rig = make((A,))
    with running(rig, connect=False):
        subscription = rig.conn.subscribe("/queue/q", _ignore)
        with pytest.raises(NotConnected, match=r"call connect\(\) first"):
            rig.conn.send("/queue/q", b"x", confirm=False)
        assert rig.conn.state == "new"
        rig.conn.connect()
        assert rig.connector.session(A).subscriptions[subscription.id].destination == "/queue/q"


def test_after_giving_up_every_call_raises_all_brokers_failed_with_the_same_causes():
    rig = make((A, B), max_reconnect_attempts=1, auto_confirm=False)
    with running(rig):
        pending = rig.conn.send_async("/queue/q", b"1")
        rig.connector.behave(A, "refuse")
        rig.connector.behave(B, "refuse")
        rig.connector.session(A).kill()
        gave_up = rig.events.wait_for(GaveUp)
        assert isinstance(gave_up.error, AllBrokersFailed)
        assert sorted(gave_up.error.causes) == ["stomp://a:61613", "stomp://b:61613"]
        failures: list[AllBrokersFailed] = []
        calls = (
            lambda: rig.conn.send("/queue/q", b"x"),
            lambda: rig.conn.send_async("/queue/q", b"x"),
            lambda: rig.conn.subscribe("/queue/q", _ignore),
            rig.conn.flush,
        )
        for call in calls:
            with pytest.raises(AllBrokersFailed) as info:
                call()
            failures.append(info.value)
        waited = pending.exception(5)
        assert isinstance(waited, AllBrokersFailed)
        for failure in (*failures, waited):
            assert failure.causes == gave_up.error.causes
            assert failure.__cause__ is gave_up.error
            assert str(failure) == str(gave_up.error)
        # Fresh each time: one instance raised again and again would grow its traceback.
        assert len({id(f) for f in failures}) == len(failures)
        assert rig.conn.state == "failed"
    with pytest.raises(ConnectionClosed, match="closed"):
        rig.conn.send("/queue/q", b"x")


def test_after_close_calls_raise_connection_closed_not_not_connected():
    rig = make((A,))
    with running(rig):
        pass
    for call in (
        lambda: rig.conn.send("/queue/q", b"x"),
        lambda: rig.conn.subscribe("/queue/q", _ignore),
        rig.conn.flush,
    ):
        with pytest.raises(ConnectionClosed):
            call()


def test_a_bug_in_the_loop_gives_up_with_an_error_that_names_it():
    rig = make((A,))

    def broken() -> list[BrokerAddress]:
        raise RuntimeError("plan exploded")

    with running(rig):
        rig.conn._dialer._planner = broken
        rig.connector.session(A).kill()
        gave_up = rig.events.wait_for(GaveUp)
        assert isinstance(gave_up.error, RuntimeError)
        with pytest.raises(AllBrokersFailed) as info:
            rig.conn.send("/queue/q", b"x")
        assert str(info.value) == "the reconnect loop gave up on RuntimeError: plan exploded"
        assert info.value.causes == {}
        assert info.value.__cause__ is gave_up.error


def test_a_configuration_error_at_the_first_connect_ends_it_and_is_never_retried(
    tmp_path: Path,
) -> None:
    # A connection whose brokers come from a source picks its adapter at the first dial, so
    # the adapter's settings are checked there; the loop used to take the ConfigurationError
    # for a broker failure ("adapter error ConfigurationError") and retry it for ever.
    key = tmp_path / "client.key"
    key.write_text("unused")
    options = FailoverOptions(
        randomize=False, tls_key_file=str(key), startup_max_reconnect_attempts=3
    )
    events = EventRecorder()
    conn = FailoverConnection(
        (A,),
        options=options,
        connector=_adapters.ProtocolConnector(options),
        clock=FakeClock(autojump=True),
        listeners=[events],
    )
    try:
        with pytest.raises(ConfigurationError, match="tls_key_file") as info:
            conn.connect()
        assert not isinstance(info.value, ConnectionFailure)
        assert [e.broker for e in events.of_type(ReconnectAttempt)] == [str(A)]
    finally:
        conn.close()


# --- which adapter -------------------------------------------------------------------------


def _failing_import(error: ImportError) -> types.FunctionType:
    def import_module(name: str) -> types.ModuleType:
        raise error

    return import_module  # type: ignore[return-value]


def test_a_missing_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = ModuleNotFoundError("No module named 'proton'", name="proton")
    monkeypatch.setattr(_adapters.importlib, "import_module", _failing_import(missing))
    with pytest.raises(ConfigurationError) as info:
        connector_for([AMQP], FailoverOptions())
    assert "pip install 'failover-client[amqp]'" in str(info.value)
    assert "'proton'" in str(info.value)
    assert info.value.__cause__ is missing


def test_an_adapter_this_version_does_not_ship_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = ModuleNotFoundError(
        "No module named 'failover_client.amqp'", name="failover_client.amqp"
    )
    monkeypatch.setattr(_adapters.importlib, "import_module", _failing_import(missing))
    with pytest.raises(ConfigurationError) as info:
        connector_for([AMQP], FailoverOptions())
    assert str(info.value) == "this version of failover-client has no amqp adapter yet"
    assert "pip" not in str(info.value)


@pytest.mark.parametrize(
    "error",
    [
        ModuleNotFoundError(
            "No module named 'failover_client.stomp._x'", name="failover_client.stomp._x"
        ),
        ModuleNotFoundError("No module named 'stomp.protocol'", name="stomp.protocol"),
        ImportError("cannot import name 'Frame' from 'stomp.utils'", name="stomp.utils"),
        ImportError("circular import"),
    ],
)
def test_any_other_import_error_is_a_bug_and_propagates(
    monkeypatch: pytest.MonkeyPatch, error: ImportError
) -> None:
    monkeypatch.setattr(_adapters.importlib, "import_module", _failing_import(error))
    with pytest.raises(ImportError) as info:
        connector_for([A], FailoverOptions())
    assert info.value is error


def test_without_stomp_py_installed_the_stomp_adapter_asks_for_its_extra() -> None:
    # A fresh interpreter in which stomp.py cannot be found, as on a machine without it.
    code = (
        "import importlib.abc, sys\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'stomp' or name.startswith('stomp.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from failover_client import ConfigurationError, FailoverOptions\n"
        "from failover_client.engine import connector_for\n"
        "from failover_client.uri import BrokerAddress\n"
        "try:\n"
        "    connector_for([BrokerAddress('stomp', 'a', 61613)], FailoverOptions())\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "the stomp adapter needs the 'stomp' library, which is not installed: "
        "pip install 'failover-client[stomp]'"
    )


def test_mixed_protocols_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="members speak amqp, stomp"):
        connector_for([A, AMQP], FailoverOptions())


def test_the_installed_stomp_adapter_is_found() -> None:
    connector = connector_for([A], FailoverOptions())
    assert type(connector).__module__.startswith("failover_client.stomp")
    assert type(connector).__name__ == "StompConnector"
