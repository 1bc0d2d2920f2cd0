"""proton's error conditions mapped onto the library's errors, and secrets kept out of them."""

from __future__ import annotations

import socket

import pytest
from proton import Condition as ProtonCondition
from proton import ConnectionException

from failover_client import (
    AuthenticationFailed,
    BrokerRefused,
    BrokerUnavailable,
    SendRejected,
    SubscriptionRefused,
    TLSFailure,
)
from failover_client.amqp._errors import (
    REDIRECT,
    UNAUTHORIZED,
    Condition,
    cause,
    closed_error,
    handshake_error,
    resolve_error,
    send_rejection,
    subscription_refusal,
    transport_error,
)

BROKER = "amqp://b1:5672"


def test_a_proton_condition_is_copied_with_its_info() -> None:
    original = ProtonCondition(REDIRECT, "go away", {"network-host": "b2", "port": 5673})
    assert Condition.of(original) == Condition(
        REDIRECT, "go away", {"network-host": "b2", "port": 5673}
    )
    assert Condition.of(None) is None


@pytest.mark.parametrize(
    ("condition", "kind"),
    [
        (Condition(UNAUTHORIZED, "Authentication failed [mech=PLAIN]"), AuthenticationFailed),
        (
            Condition(
                "amqp:connection:framing-error",
                "SSL Failure: error:0A000086:SSL routines::certificate verify failed",
            ),
            TLSFailure,
        ),
        (Condition("proton.pythonio", "Connection refused to all addresses"), BrokerUnavailable),
        (
            Condition("amqp:resource-limit-exceeded", "local-idle-timeout expired"),
            BrokerUnavailable,
        ),
        (Condition(REDIRECT, "elsewhere"), BrokerUnavailable),
        (
            Condition("amqp:connection:framing-error", "SSL Failure: unexpected eof"),
            BrokerUnavailable,
        ),
        (None, BrokerUnavailable),
    ],
)
def test_a_failed_handshake_maps_to_the_most_specific_error(
    condition: Condition | None, kind: type[Exception]
) -> None:
    error = handshake_error(condition, broker=BROKER)
    assert type(error) is kind
    assert error.broker == BROKER


def test_a_broker_close_with_a_condition_after_open_is_broker_refused() -> None:
    error = closed_error(Condition("amqp:internal-error", "boom"), broker=BROKER)
    assert type(error) is BrokerRefused
    assert "amqp:internal-error: boom" in str(error)


def test_a_redirect_or_an_orderly_close_is_not_broker_refused() -> None:
    assert type(closed_error(Condition(REDIRECT, "elsewhere"), broker=BROKER)) is BrokerUnavailable
    assert type(closed_error(None, broker=BROKER)) is BrokerUnavailable


def test_silence_reads_as_a_hung_broker() -> None:
    condition = Condition("amqp:resource-limit-exceeded", "local-idle-timeout expired")
    error = transport_error(condition, broker=BROKER)
    assert type(error) is BrokerUnavailable
    assert "idle timeout" in str(error)
    assert type(transport_error(None, broker=BROKER)) is BrokerUnavailable


def test_a_rejection_carries_the_condition_and_the_message_id() -> None:
    error = send_rejection(
        Condition("amqp:not-allowed", "no"), broker=BROKER, destination="/q/x", message_id="m-1"
    )
    assert isinstance(error, SendRejected)
    assert error.message_id == "m-1"
    assert "amqp:not-allowed: no" in str(error)
    assert "/q/x" in str(error)
    assert type(error) is SendRejected  # a drawn class, no private subclass of it
    assert (error.broker, error.text) == (BROKER, "amqp:not-allowed: no")


def test_a_subscription_refusal_names_the_subscription() -> None:
    error = subscription_refusal(
        Condition("amqp:not-found", "no queue"),
        broker=BROKER,
        destination="/q/x",
        subscription_id="s",
    )
    assert isinstance(error, SubscriptionRefused)
    assert error.subscription_id == "s"
    assert "amqp:not-found" in str(error)
    unnamed = subscription_refusal(None, broker=BROKER, destination="/q/x", subscription_id="s")
    assert "without a source" in str(unnamed)


def test_a_password_the_broker_echoes_is_redacted_everywhere() -> None:
    condition = Condition(UNAUTHORIZED, "PLAIN login refused: user 'u' password 's3cret'")
    secrets = ("s3cret",)
    error = handshake_error(condition, broker=BROKER, secrets=secrets)
    assert "s3cret" not in str(error)
    assert "***" in str(error)
    assert "s3cret" not in str(cause(condition, secrets))
    assert "s3cret" not in str(closed_error(condition, broker=BROKER, secrets=secrets))
    assert "s3cret" not in str(transport_error(condition, broker=BROKER, secrets=secrets))


def test_the_cause_is_a_proton_exception() -> None:
    assert isinstance(cause(Condition("a:b", "c")), ConnectionException)
    assert str(cause(None)) == "connection closed"


def test_a_long_description_is_cut() -> None:
    text = Condition("a:b", "x" * 1000).text()
    assert len(text) == 300
    assert text.endswith("...")


def test_an_unresolvable_name_is_broker_unavailable() -> None:
    error = resolve_error(socket.gaierror(-2, "Name or service not known"), broker=BROKER)
    assert type(error) is BrokerUnavailable
    assert "cannot resolve" in str(error)
