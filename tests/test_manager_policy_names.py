"""A URI may name a policy registered at run time; an unknown name is a clear error."""

from __future__ import annotations

import pytest
from failover_client.policies import FirstElementPolicy, register_policy, unregister_policy

from failover_client import FailoverConnection, OptionError
from failover_client.testing import FakeConnector


def _nearest(*, rng, client_id):
    return FirstElementPolicy()


def test_a_registered_policy_name_is_accepted_in_a_uri():
    register_policy("corp-nearest", _nearest)
    try:
        conn = FailoverConnection(
            "failover:(stomp://a:61613,stomp://b:61613)?policy=corp-nearest",
            connector=FakeConnector(),
        )
        assert conn.options.policy == "corp-nearest"
    finally:
        unregister_policy("corp-nearest")


def test_an_unknown_policy_name_names_the_valid_ones():
    with pytest.raises(OptionError) as caught:
        FailoverConnection(
            "failover:(stomp://a:61613)?policy=nearest-first", connector=FakeConnector()
        )
    assert "nearest-first" in str(caught.value)
    assert "round-robin" in str(caught.value)
