"""``explain``: option rows with value, default, system and attempt semantics; warnings."""

from __future__ import annotations

from failover_client.uri import ExplainRow, explain, parse


def rows(text: str) -> dict[str, ExplainRow]:
    return {r.option: r for r in explain(parse(text)) if r.kind == "option"}


def warnings(text: str) -> list[ExplainRow]:
    return [r for r in explain(parse(text)) if r.kind == "warning"]


def test_classic_rows_show_value_default_system_and_source():
    table = rows("failover:(tcp://a:61616,tcp://b:61616)?maxReconnectAttempts=5&timeout=3000")
    row = table["maxReconnectAttempts"]
    assert (row.value, row.default, row.system, row.given) == ("5", "-1", "ActiveMQ Classic", True)
    assert row.attempts == "one pass over the whole broker list"
    assert (table["timeout"].value, table["timeout"].default) == ("3000", "-1")
    randomize = table["randomize"]
    assert (randomize.value, randomize.given) == ("true", False)
    # Another system's spellings are not listed for a Classic URI.
    assert "reconnectAttempts" not in table
    assert "failover.randomize" not in table


def test_artemis_rows_count_single_tries():
    table = rows("(tcp://a:61616,tcp://b:61616)?reconnectAttempts=-1&callTimeout=-1")
    assert table["reconnectAttempts"].attempts == "one try of one broker"
    assert table["reconnectAttempts"].value == "-1"
    assert table["callTimeout"].value == "-1"
    assert table["clientFailureCheckPeriod"].value == "30000"
    assert table["connectionTTL"].value == "60000"
    assert table["connectionTTL"].given is False


def test_failover_client_rows_show_our_defaults():
    table = rows("failover:(stomp://a,stomp://b)?heartbeat=500,500")
    assert (table["heartbeat"].value, table["heartbeat"].default) == ("500,500", "10000,10000")
    assert table["heartbeat"].system == "failover-client"
    assert table["connectTimeout"].default == "2000"


def test_our_spelling_is_listed_only_when_used_where_the_dialect_has_its_own():
    assert "policy" not in rows("(tcp://a:61616)")
    assert rows("(tcp://a:61616)?policy=random")["policy"].value == "random"


def test_secret_option_value_is_masked():
    row = rows("failover:(ssl://a:61617)?tls.keyPassword=hunter2")["tls.keyPassword"]
    assert row.value == "***"


def test_nested_and_passthrough_rows():
    found = explain(parse("failover:(tcp://a:61616)?nested.soTimeout=5&jms.password=x&jms.y=1"))
    nested = [r for r in found if r.kind == "nested"]
    passthrough = [r for r in found if r.kind == "passthrough"]
    assert [(r.option, r.value) for r in nested] == [("nested.soTimeout", "5")]
    assert [(r.option, r.value) for r in passthrough] == [("jms.y", "1")]
    (password,) = [r for r in found if r.option == "jms.password"]
    assert (password.kind, password.value, password.given) == ("option", "***", True)


def test_priority_backup_with_randomize_warns():
    (warning,) = warnings("failover:(tcp://a:61616,tcp://b:61616)?priorityBackup=true")
    assert warning.option == "priorityBackup + randomize"
    assert not warnings(
        "failover:(tcp://a:61616,tcp://b:61616)?priorityBackup=true&randomize=false"
    )


def test_options_without_effect_warn():
    found = {
        w.option
        for w in warnings(
            "failover:(tcp://a:61616)?priorityURIs=tcp://a:61616&backupPoolSize=3"
            "&useExponentialBackOff=false&maxReconnectDelay=100&maxCacheSize=10"
            "&rebalanceUpdateURIs=false&maxReconnectAttempts=0"
        )
    }
    assert found == {
        "priorityURIs",
        "backupPoolSize",
        "maxReconnectDelay",
        "rebalanceUpdateURIs",
        "maxReconnectAttempts",
    }


def test_artemis_default_of_no_reconnect_warns():
    (warning,) = warnings("(tcp://a:61616,tcp://b:61616)")
    assert warning.option == "reconnectAttempts"
    assert "never re-established" in warning.meaning


def test_policy_overrides_randomize_warns():
    (warning,) = warnings("failover:(tcp://a,tcp://b)?randomize=false&policy=round-robin")
    assert warning.option == "randomize + policy"


def test_member_option_no_adapter_reads_warns():
    (warning,) = warnings("failover:(amqp://a:5672?amqp.idleTimeout=1,amqp://b:5672)")
    assert warning.option == "amqp.idleTimeout"
    assert "amqp://a:5672" in warning.meaning
    assert "refuses" in warning.meaning


def test_plain_broker_uri_says_it_makes_one_startup_pass():
    (warning,) = warnings("stomp://a:61613")
    assert warning.option == "startupMaxReconnectAttempts"
    assert "one start-up pass" in warning.meaning


def test_tls_options_without_tls_members_warn():
    (warning,) = warnings("failover:(stomp://a,stomp://b)?tls.caFile=ca.pem")
    assert warning.option == "tls.caFile"


def test_verification_off_warns():
    (warning,) = warnings("failover:(stomp+ssl://a,stomp+ssl://b)?tls.verify=false")
    assert "verification is off" in warning.meaning


def test_artemis_policy_with_topology_warns():
    text = "(tcp://a:61616,tcp://b:61616)?reconnectAttempts=-1&connectionLoadBalancingPolicyClassName=random"
    (warning,) = warnings(text)
    assert "useTopologyForLoadBalancing" in warning.option
