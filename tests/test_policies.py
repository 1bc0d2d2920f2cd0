"""Built-in broker-selection policies: exact plans from seeded generators."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from failover_client.policies import (
    BrokerPolicy,
    FirstElementPolicy,
    RandomPolicy,
    RandomStickyPolicy,
    RendezvousPolicy,
    RoundRobinPolicy,
    ShufflePolicy,
    distinct_plan,
    rendezvous_weight,
)

BROKERS = ["a", "b", "c", "d", "e"]

ALL_POLICIES: list[Callable[[random.Random], BrokerPolicy[Any]]] = [
    lambda rng: FirstElementPolicy(),
    lambda rng: RoundRobinPolicy(rng=rng),
    lambda rng: RandomPolicy(rng=rng),
    lambda rng: RandomStickyPolicy(rng=rng),
    lambda rng: ShufflePolicy(rng=rng),
    lambda rng: RendezvousPolicy(client_id="app-1"),
]
IDS = ["first-element", "round-robin", "random", "random-sticky", "shuffle", "rendezvous"]


# --- first-element -------------------------------------------------------------------------


def test_first_element_keeps_the_list_order() -> None:
    policy: FirstElementPolicy[str] = FirstElementPolicy()
    assert policy.plan(BROKERS) == BROKERS
    assert policy.plan(BROKERS) == BROKERS
    assert policy.first(BROKERS) == "a"
    assert policy.plan(["x"]) == ["x"]


def test_first_element_plan_is_a_copy() -> None:
    brokers = [1, 2, 3]
    plan = FirstElementPolicy[int]().plan(brokers)
    plan.append(4)
    assert brokers == [1, 2, 3]


# --- round-robin ---------------------------------------------------------------------------


def test_round_robin_starts_at_a_random_index_then_moves_one_per_plan() -> None:
    policy: RoundRobinPolicy[str] = RoundRobinPolicy(rng=random.Random(7))
    assert random.Random(7).randrange(5) == 2  # the random start: "c"
    assert policy.plan(BROKERS) == ["c", "d", "e", "a", "b"]
    assert policy.plan(BROKERS) == ["d", "e", "a", "b", "c"]
    assert policy.plan(BROKERS) == ["e", "a", "b", "c", "d"]
    assert policy.plan(BROKERS) == ["a", "b", "c", "d", "e"]  # wraps
    assert policy.plan(BROKERS) == ["b", "c", "d", "e", "a"]


def test_round_robin_draws_randomness_only_once() -> None:
    rng = random.Random(7)
    policy: RoundRobinPolicy[int] = RoundRobinPolicy(rng=rng)
    policy.plan([1, 2, 3])
    state = rng.getstate()
    for _ in range(10):
        policy.plan([1, 2, 3])
    assert rng.getstate() == state


def test_round_robin_restarts_at_zero_when_the_list_shrinks_under_the_cursor() -> None:
    # Artemis: pos++ and "if (pos >= max) pos = 0" -- a restart at 0, not a modulo.
    policy: RoundRobinPolicy[str] = RoundRobinPolicy(rng=random.Random(7))
    assert policy.plan(BROKERS)[0] == "c"  # index 2
    assert policy.plan(BROKERS)[0] == "d"  # index 3
    assert policy.plan(["a", "b", "c"]) == ["a", "b", "c"]  # 4 >= 3 -> 0
    assert policy.plan(["a", "b", "c"]) == ["b", "c", "a"]
    assert policy.plan(BROKERS) == ["c", "d", "e", "a", "b"]  # the index carries on


def test_round_robin_first_matches_plan_and_advances_the_same() -> None:
    by_plan: RoundRobinPolicy[str] = RoundRobinPolicy(rng=random.Random(11))
    by_first: RoundRobinPolicy[str] = RoundRobinPolicy(rng=random.Random(11))
    assert [by_plan.plan(BROKERS)[0] for _ in range(7)] == [
        by_first.first(BROKERS) for _ in range(7)
    ]


def test_round_robin_repr_shows_the_cursor() -> None:
    policy: RoundRobinPolicy[str] = RoundRobinPolicy(rng=random.Random(7))
    assert repr(policy) == "RoundRobinPolicy(pos=None)"
    policy.plan(BROKERS)
    assert repr(policy) == "RoundRobinPolicy(pos=2)"


# --- random ----------------------------------------------------------------------------------


def test_random_picks_with_replacement() -> None:
    policy: RandomPolicy[str] = RandomPolicy(rng=random.Random(1))
    assert policy.plan(BROKERS) == ["a", "e", "d", "b", "c"]
    # Repeats and omissions are Artemis's semantics: each select() is an independent nextInt().
    assert policy.plan(BROKERS) == ["c", "d", "d", "a", "a"]


def test_random_plan_through_distinct_plan_tries_every_broker_once() -> None:
    policy: RandomPolicy[str] = RandomPolicy(rng=random.Random(1))
    policy.plan(BROKERS)
    plan = policy.plan(BROKERS)
    assert distinct_plan(plan, BROKERS) == ["c", "d", "a", "b", "e"]


def test_random_first_is_the_first_pick_of_a_plan() -> None:
    by_plan: RandomPolicy[str] = RandomPolicy(rng=random.Random(5))
    by_first: RandomPolicy[str] = RandomPolicy(rng=random.Random(5))
    assert by_plan.plan(BROKERS)[0] == by_first.first(BROKERS) == "d"


# --- random-sticky ---------------------------------------------------------------------------


def test_random_sticky_keeps_its_broker_first_while_it_is_listed() -> None:
    policy: RandomStickyPolicy[str] = RandomStickyPolicy(rng=random.Random(5))
    assert policy.plan(BROKERS) == ["e", "a", "b", "c", "d"]
    assert policy.plan(BROKERS) == ["e", "a", "b", "c", "d"]
    assert policy.plan(["a", "b", "d", "e"]) == ["e", "a", "b", "d"]
    assert repr(policy) == "RandomStickyPolicy(sticky='e')"


def test_random_sticky_chooses_again_only_when_its_broker_left() -> None:
    rng = random.Random(5)
    policy: RandomStickyPolicy[str] = RandomStickyPolicy(rng=rng)
    policy.plan(BROKERS)
    state = rng.getstate()
    policy.plan(["e", "a"])
    assert rng.getstate() == state  # still listed: no new draw
    assert policy.plan(["a", "b", "c"]) == ["b", "a", "c"]  # "e" left: drawn again
    assert policy.first(["a", "b", "c"]) == "b"
    assert policy.plan(BROKERS) == ["b", "a", "c", "d", "e"]  # "e" is back, "b" stays


def test_random_sticky_first_matches_plan() -> None:
    assert RandomStickyPolicy[str](rng=random.Random(5)).first(BROKERS) == "e"


# --- shuffle ---------------------------------------------------------------------------------


def test_shuffle_draws_a_new_permutation_every_plan() -> None:
    policy: ShufflePolicy[str] = ShufflePolicy(rng=random.Random(3))
    assert policy.plan(BROKERS) == ["b", "c", "d", "e", "a"]
    assert policy.plan(BROKERS) == ["e", "b", "a", "d", "c"]


def test_shuffle_first_is_the_first_element_of_the_plan() -> None:
    for seed in range(20):
        by_plan: ShufflePolicy[str] = ShufflePolicy(rng=random.Random(seed))
        by_first: ShufflePolicy[str] = ShufflePolicy(rng=random.Random(seed))
        assert by_plan.plan(BROKERS)[0] == by_first.first(BROKERS)


def test_shuffle_of_one_broker_draws_nothing() -> None:
    rng = random.Random(3)
    state = rng.getstate()
    policy: ShufflePolicy[str] = ShufflePolicy(rng=rng)
    assert policy.plan(["a"]) == ["a"]
    assert policy.first(["a"]) == "a"
    assert rng.getstate() == state


# --- rendezvous ------------------------------------------------------------------------------


def test_rendezvous_orders_by_a_stable_weight() -> None:
    assert RendezvousPolicy[str](client_id="app-1").plan(BROKERS) == ["d", "e", "c", "a", "b"]
    assert RendezvousPolicy[str](client_id="app-2").plan(BROKERS) == ["d", "e", "a", "c", "b"]
    # A keyed BLAKE2b digest: the same in every process, unlike hash().
    assert rendezvous_weight("app-1", "a") == 9860795967905299767


def test_rendezvous_plan_does_not_depend_on_list_order() -> None:
    policy: RendezvousPolicy[str] = RendezvousPolicy(client_id="app-1")
    assert policy.plan(list(reversed(BROKERS))) == ["d", "e", "c", "a", "b"]
    assert policy.first(["b", "a"]) == "a"
    assert policy.weight("a") == rendezvous_weight("app-1", "a")


def test_rendezvous_int_keys_hash_their_text() -> None:
    policy: RendezvousPolicy[int] = RendezvousPolicy(client_id="app-1")
    assert policy.plan([1, 2, 3]) == sorted(
        [1, 2, 3], key=lambda k: rendezvous_weight("app-1", str(k)), reverse=True
    )


def test_rendezvous_without_client_id_draws_one_from_rng() -> None:
    policy: RendezvousPolicy[str] = RendezvousPolicy(rng=random.Random(9))
    assert policy.client_id == f"{random.Random(9).getrandbits(64):016x}"
    assert repr(policy) == f"RendezvousPolicy(client_id={policy.client_id!r})"


def _winners(ids: Sequence[str], brokers: Sequence[str]) -> dict[str, str | None]:
    return {c: RendezvousPolicy[str](client_id=c).first(brokers) for c in ids}


CLIENTS = [f"client-{i}" for i in range(1000)]
TEN = [f"b{i}" for i in range(10)]


def test_rendezvous_a_joining_broker_takes_about_one_in_n_and_only_its_own() -> None:
    before = _winners(CLIENTS, TEN)
    after = _winners(CLIENTS, [*TEN, "b10"])
    moved = [c for c in CLIENTS if before[c] != after[c]]
    # Exact for this fixed set of ids: 88 of 1000 (1/11 would be 91), and every one of them moved
    # to the new broker -- nobody was reshuffled between the old ones.
    assert len(moved) == 88
    assert {after[c] for c in moved} == {"b10"}


def test_rendezvous_a_leaving_broker_moves_only_its_clients() -> None:
    before = _winners(CLIENTS, TEN)
    after = _winners(CLIENTS, [b for b in TEN if b != "b3"])
    moved = {c for c in CLIENTS if before[c] != after[c]}
    assert moved == {c for c in CLIENTS if before[c] == "b3"}
    assert len(moved) == 96


def test_rendezvous_spreads_clients_over_brokers() -> None:
    counts: dict[str | None, int] = {}
    for winner in _winners(CLIENTS, TEN).values():
        counts[winner] = counts.get(winner, 0) + 1
    assert counts == {
        "b0": 77,
        "b1": 105,
        "b2": 115,
        "b3": 96,
        "b4": 92,
        "b5": 99,
        "b6": 103,
        "b7": 104,
        "b8": 94,
        "b9": 115,
    }


def test_rendezvous_cached_plan_is_not_shared_with_callers() -> None:
    policy: RendezvousPolicy[str] = RendezvousPolicy(client_id="app-1")
    plan = policy.plan(BROKERS)
    plan.clear()
    assert policy.plan(BROKERS) == ["d", "e", "c", "a", "b"]
    assert policy.first(BROKERS) == "d"


# --- every policy ----------------------------------------------------------------------------


@pytest.mark.parametrize("make", ALL_POLICIES, ids=IDS)
def test_empty_list_gives_empty_plan_and_no_first(
    make: Callable[[random.Random], BrokerPolicy[Any]],
) -> None:
    policy = make(random.Random(0))
    assert policy.plan([]) == []
    assert policy.first([]) is None


@pytest.mark.parametrize("make", ALL_POLICIES, ids=IDS)
def test_plan_is_a_permutation_except_random(
    make: Callable[[random.Random], BrokerPolicy[Any]],
) -> None:
    policy = make(random.Random(0))
    for _ in range(5):
        plan = policy.plan(BROKERS)
        assert len(plan) == len(BROKERS)
        if policy.name != "random":
            assert sorted(plan) == BROKERS
        assert sorted(distinct_plan(plan, BROKERS)) == BROKERS


@pytest.mark.parametrize("make", ALL_POLICIES, ids=IDS)
def test_policies_satisfy_the_protocol(make: Callable[[random.Random], BrokerPolicy[Any]]) -> None:
    policy = make(random.Random(0))
    assert isinstance(policy, BrokerPolicy)
    assert policy.name in IDS


@pytest.mark.parametrize("make", ALL_POLICIES, ids=IDS)
def test_policies_are_thread_safe(make: Callable[[random.Random], BrokerPolicy[Any]]) -> None:
    # No timing involved: many threads share one policy; every plan must stay well formed.
    policy = make(random.Random(0))
    brokers = list(range(50))
    errors: list[str] = []

    def worker() -> None:
        for _ in range(200):
            plan = policy.plan(brokers)
            if len(plan) != 50 or sorted(distinct_plan(plan, brokers)) != brokers:
                errors.append(repr(plan))
            if policy.first(brokers) not in brokers:
                errors.append("first")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_round_robin_is_exact_under_threads() -> None:
    # 4 threads x 100 plans advance the cursor exactly 400 times.
    policy: RoundRobinPolicy[int] = RoundRobinPolicy(rng=random.Random(0))
    start = random.Random(0).randrange(7)

    def worker() -> None:
        for _ in range(100):
            policy.plan(range(7))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert policy.first(range(7)) == (start + 400) % 7


# --- distinct_plan ---------------------------------------------------------------------------


def test_distinct_plan_drops_repeats_and_appends_missing_in_list_order() -> None:
    assert distinct_plan(["c", "c", "a", "c", "a"], BROKERS) == ["c", "a", "b", "d", "e"]
    assert distinct_plan(["b", "a"], ["a", "b"]) == ["b", "a"]
    assert distinct_plan([], ["a", "b"]) == ["a", "b"]
    assert distinct_plan([], []) == []


def test_a_custom_policy_inherits_first_from_the_protocol() -> None:
    class Reverse(BrokerPolicy[int]):
        name = "reverse"

        def plan(self, candidates: Sequence[int]) -> list[int]:
            return list(reversed(candidates))

    assert Reverse().first([1, 2, 3]) == 3
    assert Reverse().first([]) is None
