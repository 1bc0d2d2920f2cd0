"""Properties every built-in policy keeps, for any broker list and any seed.

Hypothesis runs derandomized and without a database, so the examples are the same on every run.
"""

from __future__ import annotations

import random

from failover_client.policies import create_policy, distinct_plan, registered_policies
from hypothesis import given, settings
from hypothesis import strategies as st

PROPERTY = settings(derandomize=True, database=None, max_examples=200, deadline=None)

brokers = st.lists(st.integers(min_value=0, max_value=10_000), max_size=30, unique=True)
policy_names = st.sampled_from(registered_policies())
seeds = st.integers(min_value=0, max_value=2**32)


@PROPERTY
@given(name=policy_names, seed=seeds, candidates=brokers, rounds=st.integers(1, 5))
def test_plan_covers_every_candidate(
    name: str, seed: int, candidates: list[int], rounds: int
) -> None:
    policy = create_policy(name, rng=random.Random(seed), client_id=f"client-{seed}")
    for _ in range(rounds):
        plan = policy.plan(candidates)
        assert len(plan) == len(candidates)
        assert set(plan) <= set(candidates)
        if name != "random":
            assert sorted(plan) == sorted(candidates)
        assert sorted(distinct_plan(plan, candidates)) == sorted(candidates)


@PROPERTY
@given(name=policy_names, seed=seeds, candidates=brokers, rounds=st.integers(1, 5))
def test_first_is_what_plan_would_start_with(
    name: str, seed: int, candidates: list[int], rounds: int
) -> None:
    # Two policies with identical state: one asked for plans, one for first choices only.
    by_plan = create_policy(name, rng=random.Random(seed), client_id=f"client-{seed}")
    by_first = create_policy(name, rng=random.Random(seed), client_id=f"client-{seed}")
    if name in ("random", "shuffle"):
        # A full plan draws len(candidates) numbers, first() one: only the first call lines up.
        rounds = 1
    for _ in range(rounds):
        plan = by_plan.plan(candidates)
        assert by_first.first(candidates) == (plan[0] if plan else None)


@PROPERTY
@given(
    name=st.sampled_from(["first-element", "rendezvous"]),
    candidates=brokers,
    rounds=st.integers(1, 4),
)
def test_deterministic_policies_repeat_themselves(
    name: str, candidates: list[int], rounds: int
) -> None:
    policy = create_policy(name, client_id="fixed")
    first = policy.plan(candidates)
    for _ in range(rounds):
        assert policy.plan(candidates) == first


@PROPERTY
@given(
    candidates=st.lists(st.integers(0, 10_000), min_size=2, max_size=30, unique=True),
    client=st.integers(0, 2**64).map(lambda i: f"client-{i}"),
)
def test_rendezvous_only_the_new_broker_can_win_a_client(
    candidates: list[int], client: str
) -> None:
    new_broker = max(candidates) + 1
    before = create_policy("rendezvous", client_id=client).first(candidates)
    after = create_policy("rendezvous", client_id=client).first([*candidates, new_broker])
    assert after in (before, new_broker)
