"""A member's own options: failover options and typos there are errors; the real ones work."""

from __future__ import annotations

import pytest
from failover_client.uri import MEMBER_PARAMS, BrokerAddress, parse

from failover_client import FailoverConnection, OptionError
from failover_client.testing import FakeConnector


def test_a_failover_option_inside_a_member_is_an_error_at_its_position():
    text = "failover:(stomp://h:1?maxReconnectAttempts=1,stomp://g:2)"
    with pytest.raises(OptionError) as info:
        parse(text)
    error = info.value
    assert error.option == "maxReconnectAttempts"
    assert error.position == text.index("maxReconnectAttempts")
    assert "after the list's closing parenthesis" in str(error)
    assert "failover:(...)?maxReconnectAttempts=1" in str(error)


def test_a_failover_option_inside_an_openwire_member_is_an_error_too():
    with pytest.raises(OptionError, match="randomize"):
        parse("failover:(tcp://a:61616?randomize=false,tcp://b:61616)")


def test_a_typo_of_vhost_on_a_plain_uri_names_the_nearest_spelling():
    text = "stomp://h:1?vhsot=/"
    with pytest.raises(OptionError) as info:
        parse(text)
    assert info.value.option == "vhsot"
    assert info.value.suggestions[0] == "vhost"
    assert info.value.position == text.index("vhsot")


def test_a_typo_of_vhost_inside_a_list_names_the_nearest_spelling():
    with pytest.raises(OptionError) as info:
        parse("failover:(amqp://h:5672?vhots=/,amqp://g:5672)")
    assert info.value.suggestions[0] == "vhost"


def test_a_near_miss_of_a_failover_option_on_a_member_is_an_error():
    with pytest.raises(OptionError) as info:
        parse("failover:(stomp://h:1?maxReconectAttempts=1)")
    assert "maxReconnectAttempts" in info.value.suggestions


@pytest.mark.parametrize(
    "text",
    [
        "stomp://h:61613?vhost=/prod",
        "failover:(stomp://h:61613?vhost=/prod,stomp://g:61613)",
        "failover:(amqp://h:5672?vhost=tenant,amqp://g:5672)",
    ],
)
def test_vhost_is_a_member_option_and_reaches_the_member(text: str):
    uri = parse(text)
    assert uri.members[0].param("vhost") in ("/prod", "tenant")
    FailoverConnection(uri, connector=FakeConnector()).close()  # accepted by the constructor


def test_login_and_passcode_on_a_member_become_its_credentials():
    uri = parse("failover:(stomp://h:61613?login=app&passcode=pw1x,stomp://g:61613)")
    member = uri.members[0]
    assert (member.user, member.password, member.params) == ("app", "pw1x", ())
    FailoverConnection(uri, connector=FakeConnector()).close()


def test_the_member_options_are_the_ones_the_adapters_read():
    assert set(MEMBER_PARAMS) == {"vhost", "login", "passcode"}


def test_openwire_members_keep_java_transport_params():
    # A Java user's URI still parses (explain and the topology read it); tcp:// members are
    # refused later for their protocol, not for their options.
    uri = parse("failover:(tcp://a:61616?wireFormat.maxInactivityDuration=0,tcp://b:61616)")
    assert uri.members[0].params == (("wireFormat.maxInactivityDuration", "0"),)


def test_the_constructor_refuses_a_member_option_no_adapter_reads():
    uri = parse("failover:(amqp://h:5672?amqp.idleTimeout=1000,amqp://g:5672)")
    with pytest.raises(OptionError) as info:
        FailoverConnection(uri, connector=FakeConnector())
    assert info.value.option == "amqp.idleTimeout"
    assert "amqp://h:5672" in str(info.value)
    assert "vhost" in str(info.value)


def test_the_constructor_refuses_it_in_a_built_member_list_too():
    member = BrokerAddress("stomp", "h", 61613, params=(("vhsot", "/"),))
    with pytest.raises(OptionError) as info:
        FailoverConnection([member], connector=FakeConnector())
    assert info.value.suggestions == ("vhost",)


def test_a_nested_option_that_no_adapter_reads_is_refused_by_the_constructor():
    uri = parse("failover:(stomp://h:61613,stomp://g:61613)?nested.vhsot=/")
    with pytest.raises(OptionError, match="vhsot"):
        FailoverConnection(uri, connector=FakeConnector())


def test_the_constructor_error_never_shows_a_secret_param():
    member = BrokerAddress(
        "stomp", "h", 61613, params=(("keyStorePassword", "kx9secret"), ("vhost", "/"))
    )
    with pytest.raises(OptionError) as info:
        FailoverConnection([member], connector=FakeConnector())
    assert "kx9secret" not in str(info.value)


def test_a_plain_broker_uri_makes_one_startup_pass_unless_retries_are_asked_for():
    assert parse("stomp://h:61613").options.startup_max_reconnect_attempts == 0
    assert parse("failover:(stomp://h:61613)").options.startup_max_reconnect_attempts == -1
    asked = parse("stomp://h:61613?startupMaxReconnectAttempts=-1")
    assert asked.options.startup_max_reconnect_attempts == -1
    # Any retry option means the user chose: Classic's -1 then follows maxReconnectAttempts.
    limited = parse("stomp://h:61613?maxReconnectAttempts=5")
    assert limited.options.startup_max_reconnect_attempts == -1


def test_a_plain_broker_uri_formats_back_as_written():
    assert str(parse("stomp://h:61613")) == "stomp://h:61613"
