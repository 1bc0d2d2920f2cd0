"""What a connection does with its topology: pushed lists, rebalance requests, no seeds at all.

A list a broker sent (``pushed=True``) obeys ``updateURIsSupported``; a broker's request to
rebalance obeys ``reconnectSupported`` and turns rendezvous placement on; a connection may start
with no broker and wait for its sources' first list; a broker that joins during a back-off is
tried at once; an entry of another protocol never joins the pool.
"""

from __future__ import annotations

import logging
import random
import threading

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import (
    ConfigurationError,
    Connected,
    FailoverConnection,
    Rebalanced,
    TopologyChanged,
    TopologySourceFailed,
    TopologyTruncated,
)
from failover_client.engine._adapters import ProtocolConnector
from failover_client.engine._connection import FailoverConnection as EngineConnection
from failover_client.engine._pool import BrokerPool, BrokerState
from failover_client.engine._rebalance import Rebalancer
from failover_client.engine._topology import TopologySink
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

A, B, C = (BrokerAddress("stomp", name, 61613) for name in "abc")
AMQP = BrokerAddress("amqp", "q", 5672)
SAFETY = 10.0  # real seconds, only against a hung test


def connection(
    members: tuple[BrokerAddress, ...] = (A, B),
    *,
    client_id: str = "client-1",
    topology: tuple[object, ...] = (),
    **options: object,
) -> tuple[FailoverConnection, FakeConnector, EventRecorder, FakeClock]:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    opts = FailoverOptions(
        randomize=False,
        initial_reconnect_delay=0,
        reconnect_delay=0,
        rebalance_drain_window=1.0,
        **options,  # type: ignore[arg-type]
    )
    conn = FailoverConnection(
        members,
        options=opts,
        connector=connector,
        clock=clock,
        client_id=client_id,
        rng=random.Random(7),
        listeners=[events],
        topology=topology,  # type: ignore[arg-type]
    )
    return conn, connector, events, clock


def home_of(client: str, brokers: tuple[BrokerAddress, ...]) -> BrokerAddress:
    home = Rebalancer(client, 1.0, random.Random(0)).home(
        [[BrokerState(address=b, seed=True) for b in brokers]]
    )
    assert home is not None
    return home


def client_away_from_home() -> str:
    """A client id whose rendezvous home over (A, B) is B (the ordered plan starts on A)."""
    return next(f"client-{n}" for n in range(100) if home_of(f"client-{n}", (A, B)).key == B.key)


# --- pushed lists -------------------------------------------------------------------------------


def test_a_list_a_broker_pushed_is_ignored_under_update_uris_supported_false() -> None:
    conn, _, events, _ = connection(update_uris_supported=False)
    with conn:
        conn.update_brokers([C], source="openwire", pushed=True)
        assert C.key not in conn.pool
        # A list the user configured (a file, a URL, DNS) is not a broker's push: taken.
        conn.update_brokers([C], source="file")
        assert C.key in conn.pool
        change = events.wait_for(TopologyChanged)
        assert (change.added, change.source) == ((str(C),), "file")


def test_a_pushed_list_is_taken_by_default() -> None:
    conn, _, _, _ = connection()
    with conn:
        conn.update_brokers([C], source="openwire", pushed=True)
        assert C.key in conn.pool


# --- rebalance requests -------------------------------------------------------------------------


def test_a_broker_s_rebalance_request_turns_placement_on_and_moves_the_client_home() -> None:
    client = client_away_from_home()
    conn, _, events, _ = connection(client_id=client)
    with conn:
        assert conn.broker == str(A)  # rebalance is off: the ordered plan put it on A
        conn.request_rebalance(source="openwire")
        moved = events.wait_for(Rebalanced)
        assert (moved.from_broker, moved.to_broker) == (str(A), str(B))
        assert conn.broker == str(B)


def test_a_rebalance_request_is_ignored_under_reconnect_supported_false() -> None:
    client = client_away_from_home()
    conn, connector, events, clock = connection(client_id=client, reconnect_supported=False)
    with conn:
        conn.request_rebalance(source="openwire")
        # The loop was not even woken to look; whatever time passes, the client stays.
        clock.advance(60.0)
        conn.update_brokers([C], source="file", action="add")  # wakes the loop on purpose
        events.wait_for(TopologyChanged)
        assert connector.wait_until(lambda: clock.waiters() > 0)
        assert conn.broker == str(A)
        assert events.of_type(Rebalanced) == []


def test_a_client_already_home_does_not_move_on_a_request() -> None:
    client = next(f"client-{n}" for n in range(100) if home_of(f"client-{n}", (A, B)).key == A.key)
    conn, connector, events, clock = connection(client_id=client)
    with conn:
        conn.request_rebalance(source="openwire")
        clock.advance(5.0)
        assert connector.wait_until(lambda: clock.waiters() > 0)
        assert conn.broker == str(A)
        assert events.of_type(Rebalanced) == []


# --- no seeds -----------------------------------------------------------------------------------


class OneShotSource:
    """Pushes one list when started, from its own thread (as a real source does)."""

    name = "url"

    def __init__(self, brokers: list[BrokerAddress]) -> None:
        self.brokers = brokers
        self.stopped = False
        self._thread: threading.Thread | None = None

    def start(self, sink: FailoverConnection) -> None:
        self._thread = threading.Thread(
            target=lambda: sink.update_brokers(self.brokers, source=self.name, action="replace")
        )
        self._thread.start()

    def stop(self) -> None:
        self.stopped = True
        if self._thread is not None:
            self._thread.join(SAFETY)


def test_a_connection_without_seeds_waits_for_its_sources_first_list() -> None:
    source = OneShotSource([B, C])
    conn, connector, events, _ = connection((), topology=(source,))
    with conn:
        assert conn.broker == str(B)
        assert [key for key, _ in connector.attempts] == [B.key]  # nothing spent on nobody
        assert events.wait_for(Connected).broker == str(B)
    assert source.stopped


def test_without_seeds_and_without_sources_the_connection_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least one broker"):
        connection(())


def test_a_seedless_pool_takes_the_first_entry_s_protocol_and_no_tls_upgrade() -> None:
    pool = BrokerPool([], discovered=True)
    delta = pool.merge([A, AMQP], "replace", source="url", now=0.0)
    assert delta.added == (A,)
    assert delta.foreign == (AMQP,)
    state = pool.state(A.key)
    assert (state.address.scheme, state.address.user, state.seed) == ("stomp", None, False)


def test_a_pushed_entry_of_another_protocol_never_joins() -> None:
    pool = BrokerPool([A])
    delta = pool.merge([AMQP, B], "add", source="amqp", now=0.0)
    assert (delta.added, delta.foreign) == ((B,), (AMQP,))
    assert AMQP.key not in pool


# --- back-off cut short -------------------------------------------------------------------------


def test_a_broker_that_joins_during_a_back_off_is_tried_at_once() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "accept", "refuse")
    opts = FailoverOptions(
        randomize=False, initial_reconnect_delay=1000, reconnect_delay=1000, heartbeat=(0, 0)
    )
    conn = FailoverConnection((A,), options=opts, connector=connector, clock=clock)
    with conn:
        connector.session(A).kill()
        # The reconnect loop waits out a (virtual) delay before it tries A again.
        at = clock.monotonic()
        assert clock.wait_for_waiters(timed=True)
        assert min(clock.deadlines()) > at
        conn.update_brokers([B], source="dns", action="add")
        assert connector.wait_until(lambda: conn.broker == str(B))
        assert clock.monotonic() == at  # no virtual time passed: the delay was cut short


# --- the connector of a seedless connection -----------------------------------------------------


def test_the_protocol_connector_keeps_the_first_protocol_it_served() -> None:
    connector = ProtocolConnector(FailoverOptions())
    assert "undecided" in repr(connector)
    stomp = connector.connector("stomp")
    assert connector.connector("stomp") is stomp
    with pytest.raises(ConfigurationError, match="speaks stomp; a amqp broker cannot join"):
        connector.connector("amqp")
    assert repr(connector) == "ProtocolConnector(stomp)"


# --- a broker that comes back, and the tier of a learned broker ---------------------------------


def test_a_source_naming_a_dropped_broker_again_releases_its_quarantine() -> None:
    pool = BrokerPool([A])
    pool.merge([A, B], "replace", source="openwire", now=0.0)
    for n in range(4):
        pool.record_failure(A, ConfigurationError("down"), now=float(n))
    assert pool.state(A.key).quarantined_until is not None
    # Still listed (the bridge is not down yet): the quarantine stands.
    delta = pool.merge([A, B], "replace", source="openwire", now=4.0)
    assert not delta.changed
    assert pool.state(A.key).quarantined_until is not None
    pool.merge([B], "replace", source="openwire", now=5.0)  # its bridges went down
    delta = pool.merge([A, B], "replace", source="openwire", now=6.0)  # and came back up
    assert delta.released == (A,)
    assert delta.changed
    state = pool.state(A.key)
    assert (state.failures, state.quarantined_until) == (0, None)


def test_with_priority_backup_a_learned_broker_is_a_backup_unless_named() -> None:
    conn, _, _, _ = connection(
        (A, B), priority_backup=True, priority_uris=(A.key, BrokerAddress("stomp", "p", 1).key)
    )
    conn.update_brokers([C, BrokerAddress("stomp", "p", 1)], source="openwire")
    assert conn.pool.state(C.key).tier == 1  # a peer in the other data centre, maybe
    assert conn.pool.state("p:1").tier == 0  # named in priorityURIs: preferred when it comes
    assert (conn.pool.state(A.key).tier, conn.pool.state(B.key).tier) == (0, 1)
    conn.close()


# --- a flood of pushed brokers --------------------------------------------------------------------


def test_ten_thousand_pushed_brokers_are_cut_to_the_cap_with_one_event_and_short_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flood = [BrokerAddress("stomp", f"h{n}", 61613) for n in range(10_000)]
    conn, _, events, _ = connection((A,), topology_max_brokers=256)
    caplog.set_level(logging.DEBUG, logger="failover_client")
    with conn:
        for _ in range(3):  # a source that pushes the same oversized list again and again
            conn.update_brokers(flood, source="flood", pushed=True)
        assert len(conn.pool.states()) == 256
    # close() joined the dispatch thread: every event was delivered
    truncated = events.of_type(TopologyTruncated)
    assert truncated == [TopologyTruncated("flood", 10_000 - 255, 256)]
    assert max(len(r.getMessage()) for r in caplog.records) < 2_000


# --- the boundary between a connection and its sources ----------------------------------------


def test_the_pool_is_read_only_from_outside_the_connection() -> None:
    conn, _, _, _ = connection((A,))
    view = conn.pool
    assert [s.key for s in view.states()] == ["a:61613"]
    assert "a:61613" in view
    for mutator in ("merge", "record_failure", "record_success"):
        assert not hasattr(view, mutator)
    with pytest.raises(AttributeError):
        conn.pool = BrokerPool([B])  # type: ignore[misc]
    conn.update_brokers([B], source="s", action="add")
    assert [s.key for s in view.states()] == ["a:61613", "b:61613"]  # a live view


class Recorder:
    """A source that keeps the sink it was started with."""

    name = "recorder"

    def __init__(self) -> None:
        self.sink: TopologySink | None = None

    def start(self, sink: TopologySink) -> None:
        self.sink = sink

    def stop(self) -> None:
        pass


def test_a_source_gets_the_connection_s_sink_with_every_declared_member() -> None:
    source = Recorder()
    conn, _, events, _ = connection((A, B), topology=(source,))
    with conn:
        sink = source.sink
        assert isinstance(sink, TopologySink)
        assert sink is not conn
        assert sink.follows_connection
        assert sink.client_id == "client-1"
        assert sink.options is conn.options
        current = sink.current_broker()
        assert current is not None
        assert str(current) == conn.broker
        sink.update_brokers([C], source="recorder", action="add")
        assert "c:61613" in conn.pool
        sink.source_failed(source="recorder", error="TLSFailure: bad", failures=2, retry_in=4.0)
        failed = events.wait_for(TopologySourceFailed)
    assert failed == TopologySourceFailed("recorder", "TLSFailure: bad", 2, 4.0)


def test_an_engine_connection_without_a_factory_refuses_a_uri_that_asks_for_sources() -> None:
    with pytest.raises(ConfigurationError, match="topology_factory"):
        EngineConnection("failover:(stomp://a:61613)?topology=openwire")
