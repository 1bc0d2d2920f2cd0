"""URIs as the ActiveMQ Classic, Artemis and Qpid JMS documentation writes them."""

from __future__ import annotations

import pytest
from failover_client.uri import FailoverURI, format_uri, parse

ARTEMIS_LB = "org.apache.activemq.artemis.api.core.client.loadbalance."


def keys(uri: FailoverURI) -> list[str]:
    return [m.key for m in uri.members]


# --- ActiveMQ Classic: failover transport reference ----------------------------------------------


def test_classic_primary_secondary_without_randomize():
    uri = parse("failover:(tcp://primary:61616,tcp://secondary:61616)?randomize=false")
    assert keys(uri) == ["primary:61616", "secondary:61616"]
    assert uri.options.randomize is False


def test_classic_initial_reconnect_delay_example_both_spellings():
    for text in (
        "failover:(tcp://localhost:61616,tcp://remotehost:61616)?initialReconnectDelay=100",
        "failover://(tcp://localhost:61616,tcp://remotehost:61616)?initialReconnectDelay=100",
    ):
        uri = parse(text)
        assert keys(uri) == ["localhost:61616", "remotehost:61616"]
        assert uri.options.initial_reconnect_delay == 0.1


def test_classic_send_timeout_example():
    uri = parse("failover:(tcp://primary:61616)?timeout=3000")
    assert uri.options.timeout == 3.0


def test_classic_automatic_reconnection_faq_example():
    uri = parse("failover:tcp://host1:61616,tcp://host2:61617")
    assert keys(uri) == ["host1:61616", "host2:61617"]


def test_classic_priority_backup_examples():
    uri = parse(
        "failover:(tcp://local:61616,tcp://remote:61616)?randomize=false&priorityBackup=true"
    )
    assert (uri.options.randomize, uri.options.priority_backup) == (False, True)
    uri = parse(
        "failover:(tcp://local1:61616,tcp://local2:61616,tcp://remote:61616)"
        "?randomize=false&priorityBackup=true&priorityURIs=tcp://local1:61616,tcp://local2:61616"
    )
    assert uri.options.priority_uris == ("local1:61616", "local2:61616")


def test_classic_nested_options_example():
    uri = parse(
        "failover:(tcp://broker1:61616,tcp://broker2:61616,tcp://broker3:61616)"
        "?nested.wireFormat.maxInactivityDuration=1000"
    )
    assert all(m.param("wireFormat.maxInactivityDuration") == "1000" for m in uri.members)


def test_classic_backup_and_update_examples():
    uri = parse(
        "failover:(tcp://a:61616,tcp://b:61616)?backup=true&backupPoolSize=2"
        "&updateURIsURL=file:/home/me/brokers.txt&rebalanceUpdateURIs=false"
    )
    o = uri.options
    assert (o.backup, o.backup_pool_size) == (True, 2)
    assert o.update_uris_url == "file:/home/me/brokers.txt"
    assert o.rebalance_update_uris is False


def test_classic_master_slave_pair_for_a_network_connector():
    uri = parse("static:(failover:(tcp://a:61616,tcp://b:61616)?maxReconnectAttempts=0)"
                "?useExponentialBackOff=false")  # fmt: skip
    assert keys(uri) == ["a:61616", "b:61616"]
    assert uri.options.use_exponential_backoff is False


def test_classic_masterslave_and_discovery_examples():
    assert keys(parse("masterslave:(tcp://host1:61616,tcp://host2:61616,tcp://host3:61616)")) == [
        "host1:61616",
        "host2:61616",
        "host3:61616",
    ]
    uri = parse("discovery:(multicast://default)?initialReconnectDelay=100")
    assert uri.agents[0].location == "//default"


# --- Artemis: client failover and clusters chapters ----------------------------------------------


def test_artemis_static_connectors_example():
    uri = parse("(tcp://myhost:61616,tcp://myhost2:61616)?reconnectAttempts=5")
    assert keys(uri) == ["myhost:61616", "myhost2:61616"]
    assert uri.options.max_reconnect_attempts == 5
    assert uri.options.attempt_unit == "broker"


def test_artemis_udp_discovery_examples():
    uri = parse("udp://231.7.7.7:9876")
    assert (uri.agents[0].host, uri.agents[0].port) == ("231.7.7.7", 9876)
    uri = parse("udp://231.7.7.7:9876?refreshTimeout=10000&initialWaitTimeout=10000")
    assert uri.agents[0].param("initialWaitTimeout") == "10000"


def test_artemis_load_balancing_policy_example():
    uri = parse(
        "tcp://localhost:61616?connectionLoadBalancingPolicyClassName="
        + ARTEMIS_LB
        + "RandomConnectionLoadBalancingPolicy"
    )
    assert uri.dialect == "artemis"
    assert uri.options.policy == "random"


def test_artemis_ha_url_from_the_issue_tracker():
    uri = parse(
        "(tcp://activemq:61616,tcp://activemq2:61616,tcp://activemq3:61616)"
        "?ha=true&reconnectAttempts=-1&initialConnectAttempts=-1&consumerWindowSize=1048576"
    )
    o = uri.options
    assert (o.ha, o.max_reconnect_attempts, o.startup_max_reconnect_attempts) == (True, -1, -1)
    # Core-client knobs failover-client does not use ride along as member transport params.
    assert all(m.param("consumerWindowSize") == "1048576" for m in uri.members)


def test_artemis_reconnect_to_the_same_server():
    uri = parse("tcp://localhost:61616?reconnectAttempts=-1&retryInterval=1000"
                "&retryIntervalMultiplier=2.0&maxRetryInterval=16000")  # fmt: skip
    o = uri.options
    assert (o.reconnect_delay, o.backoff_multiplier, o.max_reconnect_delay) == (1.0, 2.0, 16.0)


# --- Qpid JMS: configuration, failover options ---------------------------------------------------


def test_qpid_failover_options_example():
    uri = parse(
        "failover:(amqp://host1:5672,amqp://host2:5672)?jms.clientID=foo"
        "&failover.maxReconnectAttempts=20"
    )
    assert uri.dialect == "qpid"
    assert uri.options.client_id == "foo"
    assert uri.options.max_reconnect_attempts == 20
    assert uri.options.randomize is False


def test_qpid_per_connection_transport_and_amqp_options_example():
    uri = parse(
        "failover:(amqp://host1:5672?amqp.option=value,amqp://host2:5672?transport.option=value)"
        "?jms.clientID=foo"
    )
    assert uri.dialect == "qpid"
    assert uri.members[0].params == (("amqp.option", "value"),)
    assert uri.members[1].params == (("transport.option", "value"),)


def test_qpid_nested_options_example():
    uri = parse("failover:(amqp://host1:5672,amqp://host2:5672)?failover.nested.amqp.vhost=myhost")
    assert all(m.param("amqp.vhost") == "myhost" for m in uri.members)


@pytest.mark.parametrize(
    "text",
    [
        "failover:(amqp://localhost:61616)?failover.maxReconnectAttempts=-1"
        "&failover.amqpOpenServerListAction=IGNORE&jms.prefetchPolicy.all=5&jms.forceSyncSend=true",
        "failover:(amqp://a:61616,amqp://b:61616)?failover.amqpOpenServerListAction=IGNORE",
    ],
)
def test_qpid_server_list_action_examples(text):
    uri = parse(text)
    assert uri.options.server_list_action == "ignore"
    assert parse(format_uri(uri)) == uri
