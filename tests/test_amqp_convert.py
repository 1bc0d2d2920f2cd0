"""(body, headers) to an AMQP message and back."""

from __future__ import annotations

from proton import Message

from failover_client.amqp._convert import MESSAGE_ID_HEADER, encode_message, received


def _round_trip(message: Message) -> Message:
    decoded = Message()
    decoded.decode(message.encode())
    return decoded


def to_message(body: bytes, headers: dict[str, str]) -> Message:
    """What a receiver decodes from the bytes sent for ``body`` and ``headers``."""
    decoded = Message()
    decoded.decode(encode_message(body, headers))
    return decoded


def test_the_message_id_header_becomes_the_message_id_and_stays_a_property() -> None:
    message = to_message(b"body", {MESSAGE_ID_HEADER: "m-1", "color": "blue"})
    assert message.id == "m-1"
    assert message.properties == {MESSAGE_ID_HEADER: "m-1", "color": "blue"}
    assert message.body == b"body"
    assert message.durable is True


def test_persistent_false_makes_a_non_durable_message_and_is_not_a_property() -> None:
    message = to_message(b"x", {"persistent": "false"})
    assert message.durable is False
    assert message.properties is None
    assert message.id is None


def test_the_body_travels_as_one_data_section() -> None:
    decoded = _round_trip(to_message(b"\x00\xffbytes", {}))
    assert bytes(decoded.body) == b"\x00\xffbytes"


def test_a_received_message_shows_its_properties_and_ids() -> None:
    decoded = _round_trip(to_message(b"hi", {MESSAGE_ID_HEADER: "m-1", "n": "1"}))
    item = received(decoded, subscription_id="s", destination="/q/x", ack_id="7")
    assert item.body == b"hi"
    assert item.subscription_id == "s"
    assert item.destination == "/q/x"
    assert item.ack_id == "7"
    assert item.message_id == "m-1"
    assert item.headers == {MESSAGE_ID_HEADER: "m-1", "n": "1", "message-id": "m-1"}
    assert item.redelivered is False


def test_text_and_foreign_bodies_become_bytes_and_properties_text() -> None:
    message = Message(body="grüße", properties={"count": 3, "raw": b"ab"})
    item = received(_round_trip(message), subscription_id="s", destination="d", ack_id="1")
    assert item.body == "grüße".encode()
    assert item.headers == {"count": "3", "raw": "ab"}
    assert item.message_id is None
    empty = _round_trip(Message())
    assert received(empty, subscription_id="s", destination="d", ack_id="1").body == b""


def test_redelivered_from_the_delivery_count() -> None:
    message = Message(body=b"x", durable=True, inferred=True)
    message.delivery_count = 2
    item = received(_round_trip(message), subscription_id="s", destination="d", ack_id="1")
    assert item.redelivered


def test_first_acquirer_counts_only_from_a_broker_known_to_mark_first_deliveries() -> None:
    first = Message(body=b"x", durable=True, inferred=True)
    first.first_acquirer = True
    again = Message(body=b"x", durable=True, inferred=True)

    def redelivered(message: Message, marks: bool) -> bool:
        return received(
            _round_trip(message),
            subscription_id="s",
            destination="d",
            ack_id="1",
            first_acquirer_marks_first=marks,
        ).redelivered

    assert (redelivered(first, True), redelivered(again, True)) == (False, True)
    # Elsewhere false is only the flag's default: "may have been acquired before".
    assert (redelivered(first, False), redelivered(again, False)) == (False, False)
