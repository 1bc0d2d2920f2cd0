"""The policy registry: names, aliases, options mapping, code and entry-point registration."""

from __future__ import annotations

import importlib.metadata
import random
from collections.abc import Iterator, Sequence
from typing import Any

import failover_client.policies as policies
import pytest
from failover_client.policies import (
    ENTRY_POINT_GROUP,
    POLICY_ALIASES,
    BrokerPolicy,
    FirstElementPolicy,
    PolicyLoadError,
    RandomPolicy,
    RandomStickyPolicy,
    RendezvousPolicy,
    RoundRobinPolicy,
    ShufflePolicy,
    _registry,
    canonical_policy_name,
    create_policy,
    policy_for_options,
    register_policy,
    registered_policies,
    unregister_policy,
)

from failover_client import ConfigurationError, FailoverOptions, PolicyError

BUILTINS = ["first-element", "random", "random-sticky", "rendezvous", "round-robin", "shuffle"]


class ReversePolicy(BrokerPolicy[Any]):
    """A third-party style policy used by these tests."""

    name = "reverse"

    def plan(self, candidates: Sequence[Any]) -> list[Any]:
        return list(reversed(candidates))


def make_reverse(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return ReversePolicy()


def _entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    # No installed distribution is consulted: the entry points are pinned per test.
    _registry._reset_for_tests(entry_points={})
    yield
    _registry._reset_for_tests()


def test_public_names_are_exactly_these() -> None:
    assert sorted(policies.__all__) == sorted(
        [
            "ENTRY_POINT_GROUP",
            "POLICY_ALIASES",
            "BrokerPolicy",
            "FirstElementPolicy",
            "PolicyFactory",
            "PolicyLoadError",
            "RandomPolicy",
            "RandomStickyPolicy",
            "RendezvousPolicy",
            "RoundRobinPolicy",
            "ShufflePolicy",
            "canonical_policy_name",
            "create_policy",
            "distinct_plan",
            "policy_for_options",
            "register_policy",
            "registered_policies",
            "rendezvous_weight",
            "unregister_policy",
            "weighted_rendezvous_score",
        ]
    )
    for name in policies.__all__:
        assert hasattr(policies, name)


def test_builtins_are_registered() -> None:
    assert registered_policies() == BUILTINS


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("first-element", FirstElementPolicy),
        ("random", RandomPolicy),
        ("random-sticky", RandomStickyPolicy),
        ("rendezvous", RendezvousPolicy),
        ("round-robin", RoundRobinPolicy),
        ("shuffle", ShufflePolicy),
    ],
)
def test_create_builtin_by_name(name: str, cls: type) -> None:
    policy = create_policy(name, rng=random.Random(0), client_id="c")
    assert isinstance(policy, cls)
    assert policy.name == name


def test_create_uses_the_given_rng() -> None:
    policy = create_policy("round-robin", rng=random.Random(7))
    assert policy.plan(["a", "b", "c", "d", "e"])[0] == "c"


def test_create_rendezvous_uses_the_client_id() -> None:
    policy = create_policy("rendezvous", client_id="app-1")
    assert isinstance(policy, RendezvousPolicy)
    assert policy.client_id == "app-1"


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        (
            "org.apache.activemq.artemis.api.core.client.loadbalance."
            "RoundRobinConnectionLoadBalancingPolicy",
            "round-robin",
        ),
        (
            "org.apache.activemq.artemis.api.core.client.loadbalance."
            "RandomConnectionLoadBalancingPolicy",
            "random",
        ),
        (
            "org.apache.activemq.artemis.api.core.client.loadbalance."
            "RandomStickyConnectionLoadBalancingPolicy",
            "random-sticky",
        ),
        (
            "org.apache.activemq.artemis.api.core.client.loadbalance."
            "FirstElementConnectionLoadBalancingPolicy",
            "first-element",
        ),
        ("RoundRobinConnectionLoadBalancingPolicy", "round-robin"),
        ("FirstElementConnectionLoadBalancingPolicy", "first-element"),
    ],
)
def test_artemis_class_names_are_aliases(alias: str, name: str) -> None:
    assert POLICY_ALIASES[alias] == name
    assert canonical_policy_name(alias) == name
    assert create_policy(alias, rng=random.Random(0)).name == name


def test_every_alias_points_at_a_builtin() -> None:
    assert set(POLICY_ALIASES.values()) <= set(BUILTINS)
    assert len(POLICY_ALIASES) == 8


def test_canonical_name_of_a_canonical_name_is_itself() -> None:
    for name in BUILTINS:
        assert canonical_policy_name(name) == name


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(PolicyError) as caught:
        create_policy("round_robin")
    assert caught.value.name == "round_robin"
    assert caught.value.known == tuple(BUILTINS)
    assert str(caught.value) == (
        "unknown broker-selection policy 'round_robin'; registered policies: "
        "first-element, random, random-sticky, rendezvous, round-robin, shuffle"
    )


def test_an_import_path_is_not_a_policy() -> None:
    with pytest.raises(PolicyError):
        canonical_policy_name("os:system")
    with pytest.raises(PolicyError):
        create_policy("tests.test_policies_registry.ReversePolicy")


# --- options ---------------------------------------------------------------------------------


def test_randomize_true_means_shuffle_like_classic() -> None:
    policy = policy_for_options(FailoverOptions(randomize=True), rng=random.Random(3))
    assert isinstance(policy, ShufflePolicy)
    assert policy.plan(["a", "b", "c", "d", "e"]) == ["b", "c", "d", "e", "a"]


def test_randomize_false_means_first_element() -> None:
    policy = policy_for_options(FailoverOptions(randomize=False), rng=random.Random(0))
    assert isinstance(policy, FirstElementPolicy)


def test_named_policy_wins_over_randomize() -> None:
    options = FailoverOptions(randomize=False, policy="round-robin")
    assert isinstance(policy_for_options(options, rng=random.Random(0)), RoundRobinPolicy)


def test_policy_option_may_be_an_alias() -> None:
    options = FailoverOptions(policy="RandomStickyConnectionLoadBalancingPolicy")
    assert isinstance(policy_for_options(options, rng=random.Random(0)), RandomStickyPolicy)


def test_client_id_comes_from_options_unless_given() -> None:
    options = FailoverOptions(policy="rendezvous", client_id="from-options")
    from_options = policy_for_options(options, rng=random.Random(0))
    given = policy_for_options(options, rng=random.Random(0), client_id="given")
    assert isinstance(from_options, RendezvousPolicy)
    assert isinstance(given, RendezvousPolicy)
    assert from_options.client_id == "from-options"
    assert given.client_id == "given"


def test_unknown_policy_in_options_is_a_policy_error() -> None:
    with pytest.raises(PolicyError):
        policy_for_options(FailoverOptions(policy="nope"), rng=random.Random(0))


# --- registration in code ----------------------------------------------------------------------


def test_register_and_create_a_custom_policy() -> None:
    register_policy("reverse", make_reverse)
    assert "reverse" in registered_policies()
    assert canonical_policy_name("reverse") == "reverse"
    assert create_policy("reverse").plan([1, 2, 3]) == [3, 2, 1]
    unregister_policy("reverse")
    assert "reverse" not in registered_policies()


def test_register_twice_needs_replace() -> None:
    register_policy("reverse", make_reverse)
    with pytest.raises(ConfigurationError, match="already registered"):
        register_policy("reverse", make_reverse)
    register_policy("reverse", make_reverse, replace=True)


@pytest.mark.parametrize(
    "name",
    [
        "round-robin",
        "org.apache.activemq.artemis.api.core.client.loadbalance."
        "RandomConnectionLoadBalancingPolicy",
    ],
)
def test_builtins_and_aliases_cannot_be_replaced(name: str) -> None:
    with pytest.raises(ConfigurationError, match="built in"):
        register_policy(name, make_reverse, replace=True)


@pytest.mark.parametrize("name", ["", " reverse", "a b", "pkg:factory", "a/b", "-x"])
def test_register_rejects_bad_names(name: str) -> None:
    with pytest.raises(ConfigurationError, match="policy name"):
        register_policy(name, make_reverse)


def test_register_rejects_a_non_callable() -> None:
    with pytest.raises(ConfigurationError, match="not callable"):
        register_policy("reverse", "not a factory")  # type: ignore[arg-type]


def test_unregister_unknown_is_a_policy_error() -> None:
    with pytest.raises(PolicyError):
        unregister_policy("round-robin")


def test_a_factory_that_builds_no_policy_is_reported() -> None:
    def bad(*, rng: random.Random, client_id: str | None) -> Any:
        return 42

    register_policy("bad", bad)
    with pytest.raises(PolicyLoadError) as caught:
        create_policy("bad")
    assert str(caught.value) == (
        "broker-selection policy 'bad' from factory "
        "test_a_factory_that_builds_no_policy_is_reported.<locals>.bad could not be used: "
        "it returned 42, which lacks plan(), first(), name "
        "(subclass failover_client.policies.BrokerPolicy)"
    )


def test_a_policy_without_first_is_reported() -> None:
    class PlanOnly:
        name = "plan-only"

        def plan(self, candidates: Sequence[Any]) -> list[Any]:
            return list(candidates)

    def make(*, rng: random.Random, client_id: str | None) -> Any:
        return PlanOnly()

    register_policy("plan-only", make)
    with pytest.raises(PolicyLoadError, match=r"lacks first\(\) \(subclass"):
        create_policy("plan-only")


# --- entry points ------------------------------------------------------------------------------


def test_entry_point_names_are_listed_without_importing() -> None:
    _registry._reset_for_tests(
        entry_points={"zone-aware": _entry_point("zone-aware", "no_such_module_xyz:factory")}
    )
    # Listing and validating a name must not import the plugin (it would fail here).
    assert registered_policies() == sorted([*BUILTINS, "zone-aware"])
    assert canonical_policy_name("zone-aware") == "zone-aware"


def test_entry_point_is_loaded_on_first_use() -> None:
    _registry._reset_for_tests(
        entry_points={"reverse": _entry_point("reverse", f"{__name__}:make_reverse")}
    )
    assert create_policy("reverse").plan(["a", "b"]) == ["b", "a"]
    assert create_policy("reverse").plan([1, 2]) == [2, 1]  # cached factory


def test_broken_entry_point_names_itself() -> None:
    _registry._reset_for_tests(
        entry_points={"zone-aware": _entry_point("zone-aware", "no_such_module_xyz:factory")}
    )
    with pytest.raises(PolicyLoadError) as caught:
        create_policy("zone-aware")
    message = str(caught.value)
    assert message.startswith(
        "broker-selection policy 'zone-aware' from entry point 'no_such_module_xyz:factory' "
        "(group 'failover_client.policies') could not be used: ModuleNotFoundError:"
    )
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    assert isinstance(caught.value, PolicyError)


def test_entry_point_that_is_not_callable_is_reported() -> None:
    _registry._reset_for_tests(
        entry_points={"consts": _entry_point("consts", f"{__name__}:BUILTINS")}
    )
    with pytest.raises(PolicyLoadError, match="is not a callable factory"):
        create_policy("consts")


def test_builtin_wins_over_an_entry_point_of_the_same_name() -> None:
    _registry._reset_for_tests(
        entry_points={"shuffle": _entry_point("shuffle", "no_such_module_xyz:factory")}
    )
    assert isinstance(create_policy("shuffle", rng=random.Random(0)), ShufflePolicy)


def test_entry_points_are_discovered_from_metadata_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        calls.append(group)
        return [_entry_point("reverse", f"{__name__}:make_reverse")]

    _registry._reset_for_tests()
    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    create_policy("round-robin")  # built in: metadata is not read
    assert calls == []
    assert create_policy("reverse").plan([1, 2]) == [2, 1]
    assert "reverse" in registered_policies()
    assert calls == [ENTRY_POINT_GROUP]
