"""Broker-selection policies: turn the live broker list into an ordered plan.

Installed as ``failover_client.policies``. Pure: no I/O, no third-party imports.

=================  ============================================================================
name               plan
=================  ============================================================================
``round-robin``    random start once, then each plan starts one index after the previous one
``random``         ``len(list)`` independent uniform picks, repeats possible (Artemis random)
``random-sticky``  one random broker kept while it is listed, then the rest in list order
``first-element``  the list as given (Classic ``randomize=false``)
``shuffle``        a fresh uniform permutation every pass (Classic ``randomize=true``)
``rendezvous``     descending highest-random-weight hash of a stable client id
=================  ============================================================================

Artemis's load-balancing class names are aliases (:data:`POLICY_ALIASES`). Third-party policies
register by name through the ``failover_client.policies`` entry-point group or
:func:`register_policy`; a URI can name only a registered policy, never an import path.
"""

from __future__ import annotations

from ._base import BrokerPolicy, distinct_plan
from ._ordered import FirstElementPolicy, RoundRobinPolicy
from ._random import RandomPolicy, RandomStickyPolicy, ShufflePolicy
from ._registry import (
    ENTRY_POINT_GROUP,
    POLICY_ALIASES,
    PolicyFactory,
    PolicyLoadError,
    canonical_policy_name,
    create_policy,
    policy_for_options,
    register_policy,
    registered_policies,
    unregister_policy,
)
from ._rendezvous import RendezvousPolicy, rendezvous_weight, weighted_rendezvous_score

__all__ = [
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
