"""A refused CONNECT says what the broker said, and how to fix RabbitMQ's virtual host."""

from __future__ import annotations

from failover_client.uri import BrokerAddress

from failover_client import AuthenticationFailed, SendRejected
from failover_client.stomp._errors import connect_error_from_frame, send_rejection_from_frame

RABBIT = str(BrokerAddress("stomp", "rabbit1", 61613, "app", "s3cret"))
RABBIT_WITH_VHOST = str(
    BrokerAddress("stomp", "rabbit1", 61613, "app", "s3cret", params=(("vhost", "/prod"),))
)
BAD_CONNECT = {"message": "Bad CONNECT", "content-type": "text/plain", "version": "1.2"}


def test_a_rabbitmq_vhost_refusal_without_a_vhost_hints_at_the_vhost_parameter() -> None:
    error = connect_error_from_frame(
        BAD_CONNECT, b"Virtual host 'rabbit1' access denied", broker=RABBIT, secrets=("s3cret",)
    )
    assert isinstance(error, AuthenticationFailed)
    text = str(error)
    # What the broker said, then the hint.
    assert "Bad CONNECT: Virtual host 'rabbit1' access denied" in text
    assert "RabbitMQ takes the virtual host from the CONNECT host header" in text
    assert "?vhost=/" in text
    assert "s3cret" not in text


def test_a_rabbitmq_server_header_also_identifies_the_broker() -> None:
    headers = {**BAD_CONNECT, "server": "RabbitMQ/3.13.7"}
    error = connect_error_from_frame(headers, b"Access refused for user 'app'", broker=RABBIT)
    assert isinstance(error, AuthenticationFailed)
    assert "Access refused for user 'app'" in str(error)
    assert "?vhost=/" in str(error)


def test_no_hint_when_the_member_chose_a_vhost() -> None:
    error = connect_error_from_frame(
        BAD_CONNECT, b"Virtual host '/prod' access denied", broker=RABBIT_WITH_VHOST
    )
    assert isinstance(error, AuthenticationFailed)
    assert str(error).endswith("Bad CONNECT: Virtual host '/prod' access denied")


def test_no_hint_for_other_brokers_and_the_broker_text_is_kept_redacted_and_short() -> None:
    body = b"User name [app] or password s3cret is invalid." + b" x" * 400 + b"\n\tat org.x"
    error = connect_error_from_frame(
        {"message": "java.lang.SecurityException"}, body, broker=RABBIT, secrets=("s3cret",)
    )
    assert isinstance(error, AuthenticationFailed)
    text = str(error)
    assert "java.lang.SecurityException: User name [app] or password *** is invalid." in text
    assert "s3cret" not in text
    assert "RabbitMQ" not in text
    assert "org.x" not in text
    assert text.endswith("...")
    assert len(text) < 400


def test_a_refused_send_is_a_plain_send_rejected_with_the_broker_and_its_words() -> None:
    # It was a private subclass of SendRejected that reached users outside the drawn tree.
    error = send_rejection_from_frame(
        {"message": "Not allowed: s3cret"},
        b"",
        broker="stomp://b:61613",
        message_id="m-1",
        secrets=["s3cret"],
    )
    assert type(error) is SendRejected
    assert (error.broker, error.text) == ("stomp://b:61613", "Not allowed: ***")
