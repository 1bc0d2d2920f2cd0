"""Client-side rebalancing (``rebalance=true``): only the clients that must move, move.

Many connections share one scripted broker group (a FakeConnector): each has a stable client id,
so its rendezvous home is fixed. A broker joins through ``update_brokers`` (as a topology source
pushes it), leaves by dying, and comes back when its quarantine is over.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import FailoverConnection, PriorityRestored, Rebalanced, TopologyChanged
from failover_client.engine._pool import BrokerState
from failover_client.engine._rebalance import Rebalancer
from failover_client.testing import EventRecorder, FakeClock, FakeConnector
from failover_client.topology import FileSource

A, B, C, D = (BrokerAddress("stomp", name, 61613) for name in "abcd")
CLIENTS = 40
SAFETY = 30.0  # real seconds, only against a hung test (40 connections on 2 busy cores)


@contextmanager
def fleet(
    members: tuple[BrokerAddress, ...], clients: int = CLIENTS, **options: object
) -> Iterator[tuple[list[FailoverConnection], FakeConnector, list[EventRecorder]]]:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conns, recorders = [], []
    opts = FailoverOptions(
        rebalance=True,
        initial_reconnect_delay=0,
        reconnect_delay=0,
        rebalance_drain_window=1.0,
        **options,  # type: ignore[arg-type]
    )
    try:
        for n in range(clients):
            events = EventRecorder()
            conn = FailoverConnection(
                members,
                options=opts,
                connector=connector,
                clock=clock,
                client_id=f"client-{n}",
                rng=random.Random(n),
                listeners=[events, CHANGES.heard],
            )
            conns.append(conn)
            recorders.append(events)
            conn.connect()
        yield conns, connector, recorders
    finally:
        for conn in conns:
            conn.close()


def where(conns: list[FailoverConnection]) -> list[str | None]:
    return [conn.broker for conn in conns]


def spread(conns: list[FailoverConnection]) -> Counter[str | None]:
    return Counter(where(conns))


def home_of(client: str, brokers: tuple[BrokerAddress, ...]) -> str:
    rebalancer = Rebalancer(client, 1.0, random.Random(0))
    home = rebalancer.home([[BrokerState(address=b, seed=True) for b in brokers]])
    assert home is not None
    return str(home)


class Changes:
    """A condition every connection's events notify: a test waits on it, never sleeps.

    A connection switches broker before it emits Connected (and Rebalanced / FailedOver), so
    after each event the clients' positions are worth checking again.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()

    def heard(self, event: object) -> None:
        with self.cond:
            self.cond.notify_all()


CHANGES = Changes()


def settle(conns: list[FailoverConnection], expected: list[str]) -> None:
    """Wait until every client is where expected (real time, only against a hung test)."""
    with CHANGES.cond:
        CHANGES.cond.wait_for(lambda: where(conns) == expected, SAFETY)
    for conn, broker in zip(conns, expected, strict=True):
        assert conn.broker == broker, (conn.client_id, conn.broker, broker)


def test_every_client_starts_on_its_home_and_a_join_moves_only_the_new_brokers_share() -> None:
    with fleet((A, B, C)) as (conns, _connector, recorders):
        before = where(conns)
        assert before == [home_of(c.client_id, (A, B, C)) for c in conns]
        assert min(spread(conns).values()) >= CLIENTS // 3 - 8  # rendezvous spreads them
        for conn in conns:
            conn.update_brokers([D], source="test", action="add")
        after = [home_of(c.client_id, (A, B, C, D)) for c in conns]
        settle(conns, after)
        moved = [n for n in range(CLIENTS) if before[n] != after[n]]
        # Only the clients whose home is now D moved, each once, and to D.
        assert all(after[n] == str(D) for n in moved)
        assert 0 < len(moved) < CLIENTS // 2
        for n, events in enumerate(recorders):
            if n in moved:
                event = events.wait_for(Rebalanced)  # events come on the dispatch thread
                assert (event.from_broker, event.to_broker) == (before[n], str(D))
            assert len(events.of_type(Rebalanced)) == (1 if n in moved else 0)


def test_a_dead_broker_moves_only_its_own_clients() -> None:
    with fleet((A, B, C)) as (conns, connector, _):
        before = where(conns)
        connector.behave(B, "refuse")
        for session in [s for s in connector.sessions if s.address == B and s.alive]:
            session.kill()
        after = [
            home_of(c.client_id, (A, C)) if b == str(B) else b
            for c, b in zip(conns, before, strict=True)
        ]
        settle(conns, after)
        assert [n for n in range(CLIENTS) if before[n] != after[n]] == [
            n for n in range(CLIENTS) if before[n] == str(B)
        ]


def test_tiers_balance_inside_the_best_live_tier_and_come_back() -> None:
    options = {"priority_backup": True, "priority_uris": (A.key, B.key)}
    with fleet((A, B, C, D), **options) as (conns, connector, recorders):
        local = [home_of(c.client_id, (A, B)) for c in conns]
        settle(conns, local)
        assert set(spread(conns)) == {str(A), str(B)}  # balanced over the locals only
        connector.behave(A, "refuse")
        connector.behave(B, "refuse")  # both down before any client can flee to the other
        for session in [s for s in connector.sessions if s.address in (A, B) and s.alive]:
            session.kill()
        settle(conns, [home_of(c.client_id, (C, D)) for c in conns])
        connector.behave(A, "accept")
        settle(conns, [str(A)] * CLIENTS)  # the one local back: everyone returns to it
        connector.behave(B, "accept")
        settle(conns, local)  # both back: balanced over the locals again
        assert any(events.of_type(PriorityRestored) for events in recorders)


def test_the_drain_window_spreads_moves_with_the_injected_randomness() -> None:
    rebalancer = Rebalancer("c", 2.0, random.Random(7))
    first = rebalancer.due(D, 10.0)
    assert 10.0 <= first <= 12.0
    assert rebalancer.due(D, 11.0) == first  # the same home keeps its turn
    assert rebalancer.due(C, 11.0) != first  # a new home draws a new one
    rebalancer.settle()
    assert rebalancer.due(C, 20.0) >= 20.0


def test_weights_give_proportional_shares() -> None:
    heavy = [
        BrokerState(address=A, seed=False, weight=3.0),
        BrokerState(address=B, seed=False, weight=1.0),
    ]
    homes = Counter(
        Rebalancer(f"client-{n}", 1.0, random.Random(0)).home([heavy]) for n in range(4000)
    )
    assert homes[A] / homes[B] == pytest.approx(3.0, rel=0.15)


def test_a_topology_source_runs_with_the_connection(tmp_path: Path) -> None:
    listing = tmp_path / "brokers.txt"
    listing.write_text("stomp://d:61613\n")
    clock = FakeClock()
    source = FileSource(listing, interval=60.0, clock=clock)
    events = EventRecorder()
    conn = FailoverConnection(
        (A,),
        options=FailoverOptions(rebalance=True),
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology=[source],
        client_id="client-1",
        listeners=[events],
    )
    try:
        conn.connect()  # starts the source: its first read names D
        changed = events.wait_for(TopologyChanged)
        assert changed.added == (str(D),)
        assert D.key in {s.key for s in conn.pool.states()}
    finally:
        conn.close()  # stops and joins it
    assert not any(t.name.startswith("failover-client-topology") for t in threading.enumerate())
