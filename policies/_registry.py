"""Policy names: built-ins, aliases, code-registered and entry-point policies.

A URI (or an option) can name a policy only through this registry, never through an import path,
so a connection string cannot make the library import arbitrary code. Third-party packages add
policies through the ``failover_client.policies`` entry-point group; its names are listed (without
importing anything) the first time a name is looked up that is not built in or registered, and an
entry point is imported only when its policy is created.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from failover_client._errors import PolicyError, PolicyLoadError
from failover_client._registry import EntryPointFailure, NamedRegistry

from ._base import BrokerPolicy
from ._ordered import FirstElementPolicy, RoundRobinPolicy
from ._random import RandomPolicy, RandomStickyPolicy, ShufflePolicy
from ._rendezvous import RendezvousPolicy

if TYPE_CHECKING:
    import importlib.metadata

    from failover_client.uri import FailoverOptions

__all__ = [
    "ENTRY_POINT_GROUP",
    "POLICY_ALIASES",
    "PolicyFactory",
    "PolicyLoadError",
    "canonical_policy_name",
    "create_policy",
    "policy_for_options",
    "register_policy",
    "registered_policies",
    "unregister_policy",
]

ENTRY_POINT_GROUP = "failover_client.policies"


class PolicyFactory(Protocol):
    """Builds a policy; receives the connection's generator and stable client id.

    Both arguments are passed by keyword to every factory, so a factory that needs neither still
    accepts them. The object returned must have ``name``, ``plan()`` and ``first()``; subclassing
    :class:`~failover_client.policies.BrokerPolicy` provides ``first()``.
    """

    def __call__(self, *, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
        """Return a new policy object (one per connection; policies hold per-connection state)."""
        ...


def _entry_point_source(entry_point: importlib.metadata.EntryPoint) -> str:
    return f"entry point {entry_point.value!r} (group {ENTRY_POINT_GROUP!r})"


def _round_robin(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return RoundRobinPolicy(rng=rng)


def _random(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return RandomPolicy(rng=rng)


def _random_sticky(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return RandomStickyPolicy(rng=rng)


def _first_element(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return FirstElementPolicy()


def _shuffle(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return ShufflePolicy(rng=rng)


def _rendezvous(*, rng: random.Random, client_id: str | None) -> BrokerPolicy[Any]:
    return RendezvousPolicy(client_id=client_id, rng=rng)


_BUILTINS: Mapping[str, PolicyFactory] = MappingProxyType(
    {
        "first-element": _first_element,
        "random": _random,
        "random-sticky": _random_sticky,
        "rendezvous": _rendezvous,
        "round-robin": _round_robin,
        "shuffle": _shuffle,
    }
)

_ARTEMIS_PACKAGE = "org.apache.activemq.artemis.api.core.client.loadbalance."
_ARTEMIS_CLASSES = {
    "RoundRobinConnectionLoadBalancingPolicy": "round-robin",
    "RandomConnectionLoadBalancingPolicy": "random",
    "RandomStickyConnectionLoadBalancingPolicy": "random-sticky",
    "FirstElementConnectionLoadBalancingPolicy": "first-element",
}

POLICY_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        **{_ARTEMIS_PACKAGE + cls: name for cls, name in _ARTEMIS_CLASSES.items()},
        # Artemis wants the full class name; the bare one is accepted because people write it.
        **_ARTEMIS_CLASSES,
    }
)
"""Alternative spellings (Artemis load-balancing class names) -> canonical policy name."""


def _broken_entry_point(failure: EntryPointFailure) -> PolicyLoadError:
    problem = (
        f"{failure.loaded!r} is not a callable factory"
        if failure.error is None
        else failure.error_text
    )
    return PolicyLoadError(
        failure.name, _entry_point_source(failure.entry_point), problem, failure.known
    )


_REGISTRY: NamedRegistry[PolicyFactory] = NamedRegistry(
    kind="policy",
    group=ENTRY_POINT_GROUP,
    builtins=_BUILTINS,
    unknown=PolicyError,
    broken=_broken_entry_point,
    # An alias is a built-in name too: registering one would silently change what an Artemis
    # URI means.
    reserved=POLICY_ALIASES,
    # "policy name", because what is refused may be an alias: a name, not a policy.
    builtin_kind="policy name",
    show_rejected_factory=True,
)


def registered_policies() -> list[str]:
    """Every policy name a URI may use, sorted: built-in, registered and entry-point names."""
    return _REGISTRY.names()


def canonical_policy_name(name: str) -> str:
    """Resolve an alias (Artemis class name) to its policy name; PolicyError if unknown."""
    return _REGISTRY.require(POLICY_ALIASES.get(name, name), asked=name)


def register_policy(name: str, factory: PolicyFactory, *, replace: bool = False) -> None:
    """Make ``factory`` available as policy ``name`` (for code that cannot ship an entry point).

    Built-in names and aliases cannot be replaced; another registered name can with
    ``replace=True``. Raises :class:`ConfigurationError` for a bad or taken name.
    """
    _REGISTRY.register(name, factory, replace=replace)


def unregister_policy(name: str) -> None:
    """Remove a policy added with :func:`register_policy`; PolicyError if it is not one."""
    _REGISTRY.unregister(name)


def _factory_for(name: str) -> PolicyFactory:
    # The unknown-name error shows the alias the user wrote; the load error, the policy's name.
    return _REGISTRY.factory(POLICY_ALIASES.get(name, name), asked=name)


def create_policy(
    name: str, *, rng: random.Random | None = None, client_id: str | None = None
) -> BrokerPolicy[Any]:
    """Build a new policy object by name or alias.

    ``rng`` drives every random choice the policy makes (a fresh unseeded generator when None);
    ``client_id`` is the stable id the ``rendezvous`` policy hashes (random when None). Raises
    :class:`PolicyError` naming the registered policies for an unknown name, and
    :class:`PolicyLoadError` when a third-party entry point is broken.
    """
    factory = _factory_for(name)
    policy = factory(rng=rng if rng is not None else random.Random(), client_id=client_id)
    missing = [
        member
        for member, present in (
            ("plan()", callable(getattr(policy, "plan", None))),
            ("first()", callable(getattr(policy, "first", None))),
            ("name", isinstance(getattr(policy, "name", None), str)),
        )
        if not present
    ]
    if missing:
        # Caught here, at configuration time, rather than as an AttributeError inside the
        # reconnect loop. Subclassing BrokerPolicy supplies first().
        raise PolicyLoadError(
            POLICY_ALIASES.get(name, name),
            f"factory {getattr(factory, '__qualname__', repr(factory))}",
            f"it returned {policy!r}, which lacks {', '.join(missing)} "
            "(subclass failover_client.policies.BrokerPolicy)",
            registered_policies(),
        )
    return policy


def policy_for_options(
    options: FailoverOptions, *, rng: random.Random | None = None, client_id: str | None = None
) -> BrokerPolicy[Any]:
    """The policy a connection with ``options`` uses.

    A non-empty ``options.policy`` wins; otherwise ``randomize`` decides the way ActiveMQ Classic
    does: true shuffles the list before every pass (``shuffle``), false keeps it
    (``first-element``). ``client_id`` falls back to ``options.client_id``.
    """
    name = options.policy or ("shuffle" if options.randomize else "first-element")
    return create_policy(
        name, rng=rng, client_id=client_id if client_id is not None else options.client_id
    )


# Tests forget registrations and loaded plugins, and pin the entry points, through this name;
# it is the registry's own reset, under the name both registries have always offered tests.
_reset_for_tests = _REGISTRY.reset
