"""Every option in the table: its default per dialect, its parsing, its bad values."""

from __future__ import annotations

import dataclasses
import math

import pytest
from failover_client.uri import (
    BUILTIN_POLICIES,
    OPTION_TABLE,
    FailoverOptions,
    dialect_defaults,
    option_table_markdown,
    parse,
)

from failover_client import OptionError

ARTEMIS_LB = "org.apache.activemq.artemis.api.core.client.loadbalance."

# A URI skeleton per system, to carry one option under test.
SKELETON = {
    "classic": "failover:(tcp://a:61616,tcp://b:61616)?{}",
    "qpid": "failover:(amqp://a:5672,amqp://b:5672)?{}",
    "artemis": "(tcp://a:61616,tcp://b:61616)?{}",
    "failover-client": "failover:(stomp://a:61613,stomp://b:61613)?{}",
}

# option spelling -> (value as written, the FailoverOptions fields it must produce)
GOOD: dict[str, tuple[str, dict[str, object]]] = {
    # ActiveMQ Classic
    "randomize": ("false", {"randomize": False}),
    "priorityBackup": ("true", {"priority_backup": True}),
    "priorityURIs": (
        "tcp://a:61616,tcp://[::1]",
        {"priority_uris": ("a:61616", "[::1]:61616")},
    ),
    "initialReconnectDelay": ("100", {"initial_reconnect_delay": 0.1}),
    "reconnectDelay": ("250", {"reconnect_delay": 0.25}),
    "maxReconnectDelay": ("5000", {"max_reconnect_delay": 5.0}),
    "useExponentialBackOff": ("false", {"use_exponential_backoff": False}),
    "reconnectDelayExponent": ("3.5", {"backoff_multiplier": 3.5}),
    "backOffMultiplier": ("1.5", {"backoff_multiplier": 1.5}),
    "maxReconnectAttempts": ("7", {"max_reconnect_attempts": 7}),
    "startupMaxReconnectAttempts": ("2", {"startup_max_reconnect_attempts": 2}),
    "warnAfterReconnectAttempts": ("0", {"warn_after_reconnect_attempts": 0}),
    "timeout": ("3000", {"timeout": 3.0}),
    "backup": ("true", {"backup": True}),
    "backupPoolSize": ("3", {"backup_pool_size": 3}),
    "trackMessages": ("true", {"track_messages": True}),
    "maxCacheSize": ("4096", {"max_cache_size": 4096}),
    "updateURIsSupported": ("false", {"update_uris_supported": False}),
    "reconnectSupported": ("false", {"reconnect_supported": False}),
    "updateURIsURL": ("file:///etc/brokers.txt", {"update_uris_url": "file:///etc/brokers.txt"}),
    "rebalanceUpdateURIs": ("false", {"rebalance_update_uris": False}),
    "jms.clientID": ("orders-1", {"client_id": "orders-1"}),
    # Artemis
    "ha": ("true", {"ha": True}),
    "reconnectAttempts": ("-1", {"max_reconnect_attempts": -1}),
    "initialConnectAttempts": ("5", {"startup_max_reconnect_attempts": 5}),
    "failoverAttempts": ("3", {}),
    "retryInterval": ("500", {"reconnect_delay": 0.5}),
    "retryIntervalMultiplier": ("2.0", {"backoff_multiplier": 2.0}),
    "maxRetryInterval": ("10000", {"max_reconnect_delay": 10.0}),
    "useTopologyForLoadBalancing": ("false", {"use_topology_for_load_balancing": False}),
    "connectionLoadBalancingPolicyClassName": (
        ARTEMIS_LB + "RandomStickyConnectionLoadBalancingPolicy",
        {"policy": "random-sticky"},
    ),
    "clientFailureCheckPeriod": ("5000", {"heartbeat": (5000, 5000)}),
    "connectionTTL": ("120000", {}),
    "callTimeout": ("1500", {"timeout": 1.5}),
    "callFailoverTimeout": ("5000", {"failover_timeout": 5.0}),
    "confirmationWindowSize": ("1048576", {}),
    "refreshTimeout": ("5000", {}),
    "discoveryInitialWaitTimeout": ("2000", {}),
    "initialWaitTimeout": ("2000", {}),
    "localAddress": ("10.0.0.1", {}),
    "localBindAddress": ("10.0.0.1", {}),
    "localPort": ("5000", {}),
    "localBindPort": ("5000", {}),
    "HA": ("true", {"ha": True}),
    "clientID": ("app1", {"client_id": "app1"}),
    "user": ("app", {}),
    "password": ("s3cret", {}),
    "trackTransactionProducers": ("false", {}),
    "jms.userName": ("app", {}),
    "jms.username": ("app", {}),
    "jms.password": ("s3cret", {}),
    # Qpid JMS
    "failover.initialReconnectDelay": ("25", {"initial_reconnect_delay": 0.025}),
    "failover.reconnectDelay": ("20", {"reconnect_delay": 0.02}),
    "failover.maxReconnectDelay": ("60000", {"max_reconnect_delay": 60.0}),
    "failover.useReconnectBackOff": ("false", {"use_exponential_backoff": False}),
    "failover.reconnectBackOffMultiplier": ("4", {"backoff_multiplier": 4.0}),
    "failover.maxReconnectAttempts": ("20", {"max_reconnect_attempts": 20}),
    "failover.startupMaxReconnectAttempts": ("3", {"startup_max_reconnect_attempts": 3}),
    "failover.warnAfterReconnectAttempts": ("5", {"warn_after_reconnect_attempts": 5}),
    "failover.randomize": ("true", {"randomize": True}),
    "failover.amqpOpenServerListAction": ("ADD", {"server_list_action": "add"}),
    # failover-client
    "connectTimeout": ("1500", {"connect_timeout": 1.5}),
    "heartbeat": ("500,750", {"heartbeat": (500, 750)}),
    "reconnectJitter": ("0.25", {"reconnect_jitter": 0.25}),
    "confirmWindow": ("64", {"confirm_window": 64}),
    "maxFrameSize": ("1048576", {"max_frame_size": 1_048_576}),
    "confirmMode": ("Transaction", {"confirm_mode": "transaction"}),
    "dedup": ("off", {"dedup": "off"}),
    "policy": ("rendezvous", {"policy": "rendezvous"}),
    "clientId": ("worker-7", {"client_id": "worker-7"}),
    "rebalance": ("true", {"rebalance": True}),
    "rebalanceDrainWindow": ("500", {"rebalance_drain_window": 0.5}),
    "tls.caFile": ("ca.pem", {"tls_ca_file": "ca.pem"}),
    "tls.certFile": ("client.pem", {"tls_cert_file": "client.pem"}),
    "tls.keyFile": ("client.key", {"tls_key_file": "client.key"}),
    "tls.keyPassword": ("hunter2", {"tls_key_password": "hunter2"}),
    "tls.verify": ("false", {"tls_verify": False}),
    "tls.verifyHostname": ("false", {"tls_verify_hostname": False}),
    "topology": ("openwire,advisory", {"topology": ("openwire", "advisory")}),
    "topology.openwirePort": ("61617", {"topology_openwire_port": 61617}),
    "topology.maxBrokers": ("1000", {"topology_max_brokers": 1000}),
    "consumer.prefetch": ("10", {"consumer_prefetch": 10}),
    "consumer.prefetchBytes": ("65536", {"consumer_prefetch_bytes": 65536}),
    "consumer.canaryInterval": ("5000", {"canary_interval": 5.0}),
    "consumer.canaryMisses": ("3", {"canary_misses": 3}),
    "consumer.drainOnMove": ("false", {"drain_on_move": False}),
    "consumer.drainOnStart": ("true", {"drain_on_start": True}),
    "consumer.drainQuiet": ("250", {"drain_quiet": 0.25}),
    "consumer.drainTimeout": ("60000", {"drain_timeout": 60.0}),
    "topology.schemeMap": (
        "tcp:stomp:61613,ssl:stomp+ssl",
        {"topology_scheme_map": (("tcp", "stomp", 61613), ("ssl", "stomp+ssl", None))},
    ),
}

# option spelling -> a value it must reject
BAD: dict[str, str] = {
    "randomize": "maybe",
    "priorityBackup": "yes",
    "priorityURIs": "a:61616",
    "initialReconnectDelay": "abc",
    "reconnectDelay": "-1",
    "maxReconnectDelay": "1.5",
    "useExponentialBackOff": "1",
    "reconnectDelayExponent": "0.5",
    "backOffMultiplier": "fast",
    "maxReconnectAttempts": "-5",
    "startupMaxReconnectAttempts": "many",
    "warnAfterReconnectAttempts": "ten",
    "timeout": "-2",
    "backup": "on",
    "backupPoolSize": "-1",
    "trackMessages": "",
    "maxCacheSize": "-3",
    "updateURIsSupported": "nope",
    "reconnectSupported": "2",
    "updateURIsURL": "",
    "rebalanceUpdateURIs": "x",
    "jms.clientID": "",
    "ha": "sometimes",
    "reconnectAttempts": "-2",
    "initialConnectAttempts": "1.0",
    "failoverAttempts": "-9",
    "retryInterval": "2s",
    "retryIntervalMultiplier": "0.9",
    "maxRetryInterval": "-100",
    "useTopologyForLoadBalancing": "maybe",
    "connectionLoadBalancingPolicyClassName": "com.example.EvilPolicy",
    "clientFailureCheckPeriod": "-7",
    "connectionTTL": "long",
    "callTimeout": "-3",
    "callFailoverTimeout": "soon",
    "confirmationWindowSize": "1MB",
    "refreshTimeout": "-1",
    "discoveryInitialWaitTimeout": "x",
    "initialWaitTimeout": "-5",
    "localAddress": "",
    "localBindAddress": "",
    "localPort": "x",
    "localBindPort": "1.5",
    "HA": "sometimes",
    "clientID": "",
    "user": "",
    "password": "",
    "trackTransactionProducers": "maybe",
    "jms.userName": "",
    "jms.username": "",
    "jms.password": "",
    "failover.initialReconnectDelay": "-10",
    "failover.reconnectDelay": "ten",
    "failover.maxReconnectDelay": "30s",
    "failover.useReconnectBackOff": "0",
    "failover.reconnectBackOffMultiplier": "0",
    "failover.maxReconnectAttempts": "-4",
    "failover.startupMaxReconnectAttempts": "x",
    "failover.warnAfterReconnectAttempts": "1e3",
    "failover.randomize": "random",
    "failover.amqpOpenServerListAction": "MERGE",
    "connectTimeout": "-1",
    "heartbeat": "1,2,3",
    "reconnectJitter": "1.5",
    "confirmWindow": "0",
    "maxFrameSize": "0",
    "confirmMode": "batch",
    "dedup": "sometimes",
    "policy": "my.module:Policy",
    "clientId": "",
    "rebalance": "sometimes",
    "rebalanceDrainWindow": "-1",
    "tls.caFile": "",
    "tls.certFile": "",
    "tls.keyFile": "",
    "tls.keyPassword": "",
    "tls.verify": "no",
    "tls.verifyHostname": "off",
    "topology": "-openwire",
    "topology.openwirePort": "65536",
    "topology.maxBrokers": "0",
    "consumer.prefetch": "0",
    "consumer.prefetchBytes": "-1",
    "consumer.canaryInterval": "soon",
    "consumer.canaryMisses": "0",
    "consumer.drainOnMove": "maybe",
    "consumer.drainOnStart": "always",
    "consumer.drainQuiet": "-5",
    "consumer.drainTimeout": "1.5",
    "topology.schemeMap": "stomp",
}


def _uri_for(name: str, value: str) -> str:
    spec = next(s for s in OPTION_TABLE if name in s.names)
    if spec.applies_to == "discovery":
        return f"udp://231.7.7.7:9876?{name}={value}"
    return SKELETON[spec.system].format(f"{name}={value}")


def test_every_spelling_has_a_good_and_a_bad_case():
    spellings = {n for spec in OPTION_TABLE for n in spec.names}
    assert spellings == set(GOOD) == set(BAD)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_option_parses_to_its_canonical_value(name):
    value, expected = GOOD[name]
    uri = parse(_uri_for(name, value))
    for field, want in expected.items():
        assert getattr(uri.options, field) == want
        assert uri.options.source_of(field) == name


@pytest.mark.parametrize("name", sorted(BAD))
def test_option_rejects_a_bad_value_naming_option_and_position(name):
    text = _uri_for(name, BAD[name])
    with pytest.raises(OptionError) as info:
        parse(text)
    assert info.value.option == name
    assert info.value.position == text.index(f"{name}=") + len(name) + 1
    assert name in str(info.value)


@pytest.mark.parametrize(
    "name",
    sorted(spec.name for spec in OPTION_TABLE if not spec.fields and spec.applies_to == "uri"),
)
def test_recorded_only_options_are_kept_as_passthrough(name):
    value, _ = GOOD[name]
    assert (name, value) in parse(_uri_for(name, value)).passthrough


def test_udp_discovery_parameters_stay_on_the_agent():
    uri = parse("udp://231.7.7.7:9876?refreshTimeout=5000&discoveryInitialWaitTimeout=2000&ha=true")
    (agent,) = uri.agents
    assert agent.params == (("refreshTimeout", "5000"), ("discoveryInitialWaitTimeout", "2000"))
    assert (agent.host, agent.port) == ("231.7.7.7", 9876)
    assert uri.options.ha is True


def test_discovery_parameters_elsewhere_are_errors():
    with pytest.raises(OptionError, match="udp:// discovery group") as info:
        parse("(tcp://a:61616)?refreshTimeout=10")
    assert info.value.position == 16


# --- defaults ----------------------------------------------------------------------------------


def test_classic_defaults_are_activemq_failover_transport_defaults():
    options = parse("failover:(tcp://a:61616,tcp://b:61616)").options
    assert options == FailoverOptions()
    assert (options.randomize, options.priority_backup, options.priority_uris) == (True, False, ())
    assert options.initial_reconnect_delay == 0.01
    assert options.reconnect_delay == 0.01
    assert options.max_reconnect_delay == 30.0
    assert options.use_exponential_backoff is True
    assert options.backoff_multiplier == 2.0
    assert options.max_reconnect_attempts == -1
    assert options.startup_max_reconnect_attempts == -1
    assert options.warn_after_reconnect_attempts == 10
    assert options.timeout is None
    assert (options.backup, options.backup_pool_size) == (False, 1)
    assert (options.track_messages, options.max_cache_size) == (False, 131072)
    assert options.update_uris_supported is True
    assert options.reconnect_supported is True
    assert options.update_uris_url is None
    assert options.rebalance_update_uris is True
    assert options.attempt_unit == "pass"


def test_qpid_defaults_differ_where_qpid_jms_differs():
    uri = parse("failover:(amqp://a:5672,amqp://b:5672)?failover.warnAfterReconnectAttempts=10")
    assert uri.dialect == "qpid"
    o = uri.options
    assert o.randomize is False
    assert o.initial_reconnect_delay == 0.0
    assert o.reconnect_delay == 0.01
    assert o.max_reconnect_delay == 30.0
    assert (o.use_exponential_backoff, o.backoff_multiplier) == (True, 2.0)
    assert (o.max_reconnect_attempts, o.startup_max_reconnect_attempts) == (-1, -1)
    assert o.server_list_action == "replace"
    assert o.attempt_unit == "pass"


def test_artemis_defaults_follow_the_core_client():
    o = parse("(tcp://a:61616,tcp://b:61616)").options
    assert o.ha is False
    assert o.max_reconnect_attempts == 0
    assert o.startup_max_reconnect_attempts == 1
    assert o.reconnect_delay == 2.0
    assert o.initial_reconnect_delay == 0.0
    assert o.backoff_multiplier == 1.0
    assert o.max_reconnect_delay == 2.0
    assert o.use_topology_for_load_balancing is True
    assert o.policy == "round-robin"
    assert o.heartbeat == (30000, 30000)
    assert o.timeout == 30.0
    assert o.attempt_unit == "broker"


def test_failover_client_table_defaults_match_the_options_dataclass():
    defaults = FailoverOptions()
    for spec in OPTION_TABLE:
        if spec.systems != ("failover-client",):
            continue
        field = spec.fields[0]
        if spec.default:
            uri = parse(SKELETON["failover-client"].format(f"{spec.name}={spec.default}"))
            assert getattr(uri.options, field) == getattr(defaults, field), spec.name
        else:
            assert getattr(defaults, field) in (None, "", ()), spec.name


def test_dialect_defaults_build_valid_options():
    for dialect in ("classic", "qpid", "artemis"):
        FailoverOptions(**dialect_defaults(dialect))  # type: ignore[arg-type]


# --- conversions with more than one reading --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("-1", None), ("0", None), ("1", 0.001), ("60000", 60.0)],
)
def test_classic_timeout_minus_one_and_zero_block_forever(text, expected):
    assert parse(f"failover:(tcp://a:61616)?timeout={text}").options.timeout == expected


def test_artemis_call_timeout_minus_one_blocks_forever():
    assert parse("(tcp://a:61616)?callTimeout=-1").options.timeout is None


def test_check_period_minus_one_disables_heartbeats():
    assert parse("(tcp://a:61616)?clientFailureCheckPeriod=-1").options.heartbeat == (0, 0)


def test_heartbeat_single_number_sets_both_directions():
    assert parse("stomp://a:61613?heartbeat=500").options.heartbeat == (500, 500)


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        (ARTEMIS_LB + "RoundRobinConnectionLoadBalancingPolicy", "round-robin"),
        (ARTEMIS_LB + "RandomConnectionLoadBalancingPolicy", "random"),
        (ARTEMIS_LB + "RandomStickyConnectionLoadBalancingPolicy", "random-sticky"),
        (ARTEMIS_LB + "FirstElementConnectionLoadBalancingPolicy", "first-element"),
        ("first-element", "first-element"),
        ("RandomStickyConnectionLoadBalancingPolicy", "random-sticky"),
    ],
)
def test_artemis_policy_class_names_map_to_policy_names(value, policy):
    uri = parse(f"(tcp://a:61616)?connectionLoadBalancingPolicyClassName={value}")
    assert uri.options.policy == policy


def test_unknown_policy_lists_the_valid_names_and_never_imports():
    with pytest.raises(OptionError) as info:
        parse("stomp://a:61613?policy=os.system")
    message = str(info.value)
    for name in (
        "first-element",
        "random",
        "random-sticky",
        "rendezvous",
        "round-robin",
        "shuffle",
    ):
        assert name in message
    assert "RoundRobinConnectionLoadBalancingPolicy" in message


def test_registered_policy_names_are_accepted_when_passed_in():
    uri = parse("stomp://a:61613?policy=least-loaded", policies=["least-loaded"])
    assert uri.options.policy == "least-loaded"


def test_server_list_action_is_case_insensitive():
    uri = parse("failover:(amqp://a:5672)?failover.amqpOpenServerListAction=ignore")
    assert uri.options.server_list_action == "ignore"


def test_the_same_option_twice_is_an_error_naming_both():
    text = "failover:(tcp://a:61616)?reconnectDelayExponent=3&backOffMultiplier=4"
    with pytest.raises(OptionError, match="reconnectDelayExponent") as info:
        parse(text)
    assert info.value.option == "backOffMultiplier"
    assert info.value.position == text.index("backOffMultiplier")


def test_our_spelling_and_theirs_for_one_field_conflict():
    with pytest.raises(OptionError, match="clientFailureCheckPeriod"):
        parse("(tcp://a:61616)?clientFailureCheckPeriod=1000&heartbeat=500")


# --- the table as documentation --------------------------------------------------------------


def test_markdown_lists_every_spelling_with_system_and_default():
    markdown = option_table_markdown()
    lines = markdown.splitlines()
    assert lines[0] == "| Option | System | Default | Maps to | Meaning |"
    assert len(lines) == 2 + len(OPTION_TABLE)
    for spec, line in zip(OPTION_TABLE, lines[2:], strict=True):
        for name in spec.names:
            assert f"`{name}`" in line
        assert (f"`{spec.default}`" if spec.default else "(none)") in line


def test_markdown_rows_name_real_fields():
    names = {f.name for f in dataclasses.fields(FailoverOptions)}
    for spec in OPTION_TABLE:
        assert set(spec.fields) <= names, spec.name


def test_attempt_semantics_per_system():
    for spec in OPTION_TABLE:
        if "max_reconnect_attempts" in spec.fields:
            expected = "one try of one broker" if spec.system == "artemis" else "one pass"
            assert spec.attempts.startswith(expected), spec.name


def test_built_in_policy_names_agree_with_the_policy_registry():
    # Imported here: the URI grammar itself must not depend on the policy package.
    from failover_client.policies import POLICY_ALIASES, registered_policies  # noqa: PLC0415

    assert set(BUILTIN_POLICIES) <= set(registered_policies())
    for alias, name in POLICY_ALIASES.items():
        uri = parse(f"(tcp://a:61616)?connectionLoadBalancingPolicyClassName={alias}")
        assert uri.options.policy == name


def test_call_failover_timeout_defaults_to_artemis_30_s_and_minus_one_is_forever():
    assert parse("(tcp://a:61616)").options.failover_timeout == 30.0
    assert parse("(tcp://a:61616)?callFailoverTimeout=-1").options.failover_timeout == math.inf
    assert parse("(tcp://a:61616)?callFailoverTimeout=0").options.failover_timeout == 0.0
    # Classic and Qpid JMS have no such bound: timeout covers the whole call there.
    assert parse("failover:(tcp://a:61616)").options.failover_timeout is None


def test_call_failover_timeout_round_trips_forever_as_minus_one():
    text = "(tcp://a:61616)?callFailoverTimeout=-1"
    assert str(parse(text)) == text


def test_dedup_defaults_to_auto():
    assert parse("failover:(stomp://a:61613)").options.dedup == "auto"
