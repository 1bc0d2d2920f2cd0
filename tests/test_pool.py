"""BrokerPool: seeds, tiers, quarantine, resurrection, merges of pushed updates."""

from __future__ import annotations

import pytest
from failover_client.uri import BrokerAddress

from failover_client import BrokerUnavailable, ConfigurationError, TopologyTruncated
from failover_client.engine._pool import BrokerPool, BrokerState, TopologyDelta

A = BrokerAddress("stomp", "a", 61613, user="app", password="s3cr3t")
B = BrokerAddress("stomp", "b", 61613)
C = BrokerAddress("stomp", "c", 61613)


def refused(broker: BrokerAddress) -> BrokerUnavailable:
    return BrokerUnavailable("connection refused", broker=str(broker))


def test_seeds_keep_uri_order_and_a_repeated_member_counts_once():
    pool = BrokerPool([A, B, A])
    assert [s.key for s in pool.states()] == ["a:61613", "b:61613"]
    assert all(s.seed and s.source == "uri" for s in pool.states())
    assert pool.by_tier(0.0) == [[A, B]]


def test_a_pool_needs_a_broker_and_sane_quarantine():
    with pytest.raises(ConfigurationError, match="at least one broker"):
        BrokerPool([])
    with pytest.raises(ConfigurationError, match="quarantine"):
        BrokerPool([A], quarantine_base=5.0, quarantine_max=1.0)


def test_tiers_group_brokers_best_first():
    pool = BrokerPool([A, B, C], tiers={"c:61613": 0}, default_tier=1)
    assert pool.by_tier() == [[C], [A, B]]
    assert pool.tier_of(A) == 1
    assert pool.tier_of(BrokerAddress("stomp", "z", 1)) == 1


def test_quarantine_grows_with_consecutive_failures_up_to_the_cap():
    pool = BrokerPool([A, B], quarantine_base=1.0, quarantine_max=3.0)
    untils = [pool.record_failure(B, refused(B), now=10.0).quarantined_until for _ in range(4)]
    assert untils == [11.0, 12.0, 13.0, 13.0]
    state = pool.state("b:61613")
    assert state.failures == 4
    assert state.last_error == "BrokerUnavailable: stomp://b:61613: connection refused"
    assert pool.by_tier(12.9) == [[A]]
    assert pool.quarantined(12.9) == [B]
    assert pool.by_tier(13.0) == [[A, B]]


def test_success_resets_failures_and_quarantine():
    pool = BrokerPool([A])
    pool.record_failure(A, refused(A), now=0.0)
    state = pool.record_success(A)
    assert (state.failures, state.quarantined_until) == (0, None)
    assert state.last_error is not None  # kept for diagnosis


def test_quarantined_brokers_are_released_soonest_first():
    pool = BrokerPool([A, B, C])
    pool.record_failure(A, refused(A), now=0.0)
    pool.record_failure(A, refused(A), now=0.0)  # until 2.0
    pool.record_failure(B, refused(B), now=0.5)  # until 1.5
    assert pool.by_tier(0.6) == [[C]]
    assert pool.quarantined(0.6) == [B, A]


def test_merge_add_and_replace_never_remove_seeds():
    pool = BrokerPool([A, B])
    delta = pool.merge([C], "add", source="amqp", now=5.0)
    assert delta == TopologyDelta(added=(pool.state("c:61613").address,))
    discovered = pool.state("c:61613")
    assert (discovered.seed, discovered.source, discovered.age(7.0)) == (False, "amqp", 2.0)
    delta = pool.merge([], "replace", source="amqp", now=6.0)
    assert [a.key for a in delta.removed] == ["c:61613"]
    assert [s.key for s in pool.states()] == ["a:61613", "b:61613"]


def test_replace_only_touches_the_same_sources_discoveries():
    pool = BrokerPool([A])
    d = BrokerAddress("stomp", "d", 61613)
    pool.merge([C], "add", source="dns", now=0.0)
    pool.merge([d], "replace", source="amqp", now=0.0)
    assert [s.key for s in pool.states()] == ["a:61613", "c:61613", "d:61613"]


def test_ignore_changes_nothing():
    pool = BrokerPool([A])
    assert not pool.merge([C], "ignore", source="amqp", now=0.0).changed
    assert "c:61613" not in pool


def test_pushed_entries_lose_options_and_take_the_seeds_credentials():
    pool = BrokerPool([A])
    pushed = BrokerAddress(
        "stomp", "c", 61613, user="evil", password="x", params=(("randomize", "false"),)
    )
    pool.merge([pushed], "add", source="amqp", now=0.0)
    address = pool.state("c:61613").address
    assert (address.user, address.password, address.params) == ("app", "s3cr3t", ())


def test_pushed_entries_never_downgrade_tls():
    tls_seed = BrokerAddress("stomp+ssl", "a", 61612)
    pool = BrokerPool([tls_seed])
    pool.merge([BrokerAddress("stomp", "a", 61612)], "add", source="amqp", now=0.0)
    assert pool.state("a:61612").address.scheme == "stomp+ssl"
    # Every seed uses TLS: a plain pushed entry is upgraded.
    pool.merge([BrokerAddress("stomp", "n", 61612)], "add", source="amqp", now=0.0)
    assert pool.state("n:61612").address.scheme == "stomp+ssl"


def test_a_known_tls_discovery_stays_tls_when_pushed_plain_again():
    pool = BrokerPool([BrokerAddress("amqp", "b", 5672)])
    pool.merge([BrokerAddress("amqps", "x", 5671)], "add", source="amqp", now=0.0)
    pool.merge([BrokerAddress("amqp", "x", 5671)], "add", source="amqp", now=1.0)
    assert pool.state("x:5671").address.scheme == "amqps"


def test_address_map_rewrites_or_drops_pushed_entries():
    def reachable(address: BrokerAddress) -> BrokerAddress | None:
        if address.host.startswith("10."):
            return BrokerAddress(address.scheme, "gw.example", address.port + 1000)
        if address.host == "hidden":
            return None
        return address

    pool = BrokerPool([B], address_map=reachable)
    delta = pool.merge(
        [BrokerAddress("stomp", "10.0.0.5", 61613), BrokerAddress("stomp", "hidden", 1)],
        "replace",
        source="amqp",
        now=0.0,
    )
    assert [a.key for a in delta.added] == ["gw.example:62613"]


def test_entry_for_names_the_known_broker_an_advertised_address_maps_to():
    def reachable(address: BrokerAddress) -> BrokerAddress | None:
        if address.host == "hidden":
            return None
        return BrokerAddress(address.scheme, f"gw-{address.host}", address.port)

    pool = BrokerPool([A, B], address_map=reachable)
    internal = BrokerAddress("stomp", "node1", 61613)
    assert pool.entry_for(internal) is None  # not merged yet
    pool.merge([internal], "add", source="amqp", now=0.0)
    entry = pool.entry_for(internal)
    assert entry is not None
    assert entry.key == "gw-node1:61613"
    assert entry.user == "app"  # the pool's entry, with the seeds' credentials
    assert pool.entry_for(BrokerAddress("stomp", "hidden", 61613)) is None


def test_repr_shows_state_and_no_secret():
    pool = BrokerPool([A, B], tiers={"b:61613": 1})
    pool.record_failure(B, refused(B), now=0.0)
    pool.merge([C], "add", source="dns", now=0.0)
    text = repr(pool)
    assert text == (
        "<BrokerPool [a:61613 seed tier=0, b:61613 seed tier=1 failures=1 quarantined_until=1"
        " last_error='BrokerUnavailable: stomp://b:61613: connection refused',"
        " c:61613 discovered(dns) tier=0]>"
    )
    assert "s3cr3t" not in text


def test_state_validates_itself():
    with pytest.raises(ConfigurationError, match="negative tier"):
        BrokerState(address=A, seed=True, tier=-1)
    with pytest.raises(KeyError, match="no broker 'z:1'"):
        BrokerPool([A]).state("z:1")


def test_a_discovery_stays_while_any_source_vouches_for_it():
    pool = BrokerPool([A])
    pool.merge([B], "replace", source="dns", now=1.0)
    pool.merge([B, C], "replace", source="file", now=2.0)
    delta = pool.merge([], "replace", source="dns", now=3.0)
    assert delta.removed == ()  # the file still names B
    assert pool.state(B.key).vouchers == frozenset({"file"})
    delta = pool.merge([C], "replace", source="file", now=4.0)
    assert [a.key for a in delta.removed] == [B.key]
    assert [s.key for s in pool.states()] == [A.key, C.key]


def test_sources_place_discovered_brokers_but_not_seeds():
    pool = BrokerPool([A], tiers={A.key: 1})
    delta = pool.merge(
        [A, B, C],
        "replace",
        source="dns",
        now=1.0,
        tiers={A.key: 0, B.key: 0, C.key: 1},
        weights={A.key: 9.0, B.key: 3.0},
    )
    assert [a.key for a in delta.added] == [B.key, C.key]
    assert (pool.state(A.key).tier, pool.state(A.key).weight) == (1, 1.0)  # the user's
    assert (pool.state(B.key).tier, pool.state(B.key).weight) == (0, 3.0)
    assert (pool.state(C.key).tier, pool.state(C.key).weight) == (1, 1.0)
    moved = pool.merge([B, C], "replace", source="dns", now=2.0, tiers={B.key: 2, C.key: 1})
    assert [a.key for a in moved.retiered] == [B.key]
    assert moved.changed
    assert moved.event("dns") is None  # no broker came or went: nothing to announce
    assert [[a.key for a in tier] for tier in pool.by_tier()] == [[A.key, C.key], [B.key]]


def test_tiers_name_the_advertised_address_when_a_map_rewrites_it():
    internal = BrokerAddress("stomp", "10.0.0.9", 61613)
    public = BrokerAddress("stomp", "broker9.example.com", 61613)
    pool = BrokerPool([A], address_map=lambda a: public if a.key == internal.key else a)
    pool.merge([internal], "add", source="dns", now=1.0, weights={internal.key: 5.0})
    assert pool.state(public.key).weight == 5.0


def test_a_delta_announces_brokers_that_came_and_went():
    pool = BrokerPool([A])
    event = pool.merge([B], "replace", source="dns", now=1.0).event("dns")
    assert event is not None
    assert (event.added, event.removed, event.source) == (("stomp://app:***@b:61613",), (), "dns")


def test_a_broker_that_fails_for_days_stays_quarantined_at_the_cap():
    pool = BrokerPool([A, B], quarantine_base=1.0, quarantine_max=30.0)
    state = pool.state(B.key)
    for n in range(5000):  # far past 2 ** 1024, which no float holds
        state = pool.record_failure(B, refused(B), now=float(n))
    assert state.failures == 5000
    assert state.quarantined_until == 4999.0 + 30.0


# --- the cap on the pool --------------------------------------------------------------------


def test_a_push_past_max_brokers_is_cut_to_the_cap_and_counts_what_it_dropped():
    pool = BrokerPool([A, B], max_brokers=5)
    pushed = [BrokerAddress("stomp", f"h{n}", 61613) for n in range(10_000)]
    delta = pool.merge(pushed, "add", source="flood", now=0.0)
    assert [s.key for s in pool.states()] == [
        "a:61613",
        "b:61613",
        "h0:61613",
        "h1:61613",
        "h2:61613",
    ]
    assert delta.dropped == 9_997
    assert delta.truncated("flood") == TopologyTruncated("flood", 9_997, 5)
    assert len(repr(delta)) < 2_000  # a delta of a huge push stays small


def test_a_replaced_list_makes_room_before_its_new_brokers_are_counted():
    pool = BrokerPool([A], max_brokers=3)
    old = [BrokerAddress("stomp", f"old{n}", 61613) for n in range(2)]
    new = [BrokerAddress("stomp", f"new{n}", 61613) for n in range(2)]
    pool.merge(old, "replace", source="s", now=0.0)
    delta = pool.merge(new, "replace", source="s", now=1.0)
    assert [s.key for s in pool.states()] == ["a:61613", "new0:61613", "new1:61613"]
    assert delta.dropped == 0
    assert delta.truncated("s") is None


def test_max_brokers_must_be_a_positive_count():
    with pytest.raises(ConfigurationError, match="max_brokers"):
        BrokerPool([A], max_brokers=0)


def test_the_merge_leaves_out_hosts_no_client_can_reach():
    pool = BrokerPool([A])
    bad = [BrokerAddress("stomp", host, 61613) for host in ("0.0.0.0", "224.0.0.1", "a b")]
    delta = pool.merge([*bad, C], "add", source="s", now=0.0)
    assert [s.key for s in pool.states()] == ["a:61613", "c:61613"]
    assert len(delta.rejected) == 3
