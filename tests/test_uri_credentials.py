"""Member credentials written the stomp.py way (``?login=&passcode=``), and secret-named options.

stomp.py's ``Connection.connect(username, passcode)`` names its credentials ``login`` and
``passcode`` (the STOMP CONNECT headers). A member written ``stomp://a:61613?login=u&passcode=p``
means those credentials; before, they were kept as unused member params and the passcode was
printed in clear by ``str()`` and ``repr()``.
"""

from __future__ import annotations

import pytest
from failover_client.uri import BrokerAddress, format_uri, parse, redact_value
from failover_client.uri._redact import is_secret_key, mask_same_length

from failover_client import OptionError

# --- one rule for which option names hold secrets ------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "passcode",
        "passwd",
        "secret",
        "token",
        "key-password",
        "trustStorePassword",
        "keyStorePassword",
        "tls.keyPassword",
        "sslPassword",
        "Passcode",
        "client_secret",
        "apiKey",
        "access_token",
    ],
)
def test_secret_named_options_are_secrets(name: str) -> None:
    assert is_secret_key(name)
    assert redact_value(name, "s3cr3t") == "***"


@pytest.mark.parametrize("name", ["login", "user", "tls.keyFile", "vhost", "heartbeat", "keys"])
def test_ordinary_options_are_not_secrets(name: str) -> None:
    assert not is_secret_key(name)


def test_a_passcode_in_raw_text_is_masked_keeping_offsets() -> None:
    text = "failover:(stomp://a:61613?login=u&passcode=pc1x)?bogus=1"
    masked = mask_same_length(text)
    assert "pc1x" not in masked
    assert len(masked) == len(text)


# --- ?login=&passcode= are the member's credentials -------------------------------------------


def test_member_login_and_passcode_become_its_credentials() -> None:
    uri = parse("failover:(stomp://a:61613?login=app&passcode=pc1x&vhost=/,stomp://b:61613)")
    first, second = uri.members
    assert (first.user, first.password) == ("app", "pc1x")
    assert first.params == (("vhost", "/"),)
    assert (second.user, second.password) == (None, None)
    for shown in (
        str(uri),
        repr(uri),
        str(first),
        repr(first),
        repr(uri.members),
        repr(uri.components),
    ):
        assert "pc1x" not in shown
    assert parse(format_uri(uri)) == uri
    assert "pc1x" in uri.to_text()


def test_single_member_login_and_passcode_become_its_credentials() -> None:
    uri = parse("stomp://a:61613?login=app&passcode=pc1x")
    [member] = uri.members
    assert (member.user, member.password) == ("app", "pc1x")
    assert member.params == ()
    assert "pc1x" not in str(uri)
    assert "pc1x" not in repr(uri)
    assert parse(format_uri(uri)) == uri


def test_artemis_shared_login_applies_to_every_member() -> None:
    uri = parse("(stomp://a:61613,stomp://b:61613)?login=app&passcode=pc1x")
    assert [(m.user, m.password) for m in uri.members] == [("app", "pc1x")] * 2
    assert "pc1x" not in str(uri)


def test_member_login_beats_the_shared_user() -> None:
    uri = parse(
        "failover:(stomp://a:61613?login=own&passcode=p1,stomp://b:61613)?jms.userName=all&jms.password=p2"
    )
    assert [(m.user, m.password) for m in uri.members] == [("own", "p1"), ("all", "p2")]


def test_login_without_passcode_is_a_user_without_password() -> None:
    [member] = parse("stomp://a:61613?login=guest").members
    assert (member.user, member.password) == ("guest", None)


def test_passcode_without_login_is_an_error_naming_both() -> None:
    with pytest.raises(OptionError) as caught:
        parse("failover:(stomp://a:61613?passcode=pc1x)")
    assert caught.value.option == "passcode"
    assert "login" in str(caught.value)
    assert "pc1x" not in str(caught.value)


def test_credentials_given_twice_are_an_error() -> None:
    with pytest.raises(OptionError) as caught:
        parse("failover:(stomp://u:pw@a:61613?login=other&passcode=pc1x)")
    assert caught.value.option == "login"
    assert "pc1x" not in str(caught.value)
    assert "pw@" not in str(caught.value)


def test_a_built_member_with_a_passcode_param_never_prints_it() -> None:
    member = BrokerAddress("stomp", "a", 61613, params=(("passcode", "pc1x"),))
    assert "pc1x" not in str(member)
    assert "pc1x" not in repr(member)
