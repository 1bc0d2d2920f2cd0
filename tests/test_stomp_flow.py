"""A subscription's prefetch in each broker's SUBSCRIBE header, and what release() writes.

Pure translation (``stomp._flow``) plus the session driven through the scripted transport of
``test_stomp_adapter_session``, whose CONNECTED frame names the broker in its ``server``.
"""

from __future__ import annotations

import pytest

from failover_client import BrokerUnavailable, ConfigurationError
from failover_client.adapter import SubscriptionSpec
from failover_client.stomp._flow import broker_kind, prefetch_headers, release_command
from failover_client.stomp._frames import subscribe_headers
from tests.test_stomp_adapter_session import Harness

SERVERS = {
    "ActiveMQ/5.17.2": "activemq",
    "RabbitMQ/3.10.8": "rabbitmq",
    "ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine": "artemis",
    "Apache/ActiveMQ-Apollo/1.7": "unknown",
    "": "unknown",
}


@pytest.mark.parametrize(("server", "kind"), SERVERS.items())
def test_the_broker_is_known_by_the_connected_server_header(server: str, kind: str) -> None:
    assert broker_kind(server) == kind


def test_no_server_header_is_an_unknown_broker() -> None:
    assert broker_kind(None) == "unknown"


def spec(**kwargs: object) -> SubscriptionSpec:
    return SubscriptionSpec("s1", "/queue/a", "client-individual", **kwargs)  # type: ignore[arg-type]


def test_each_broker_gets_its_own_header() -> None:
    ten = spec(prefetch=10)
    assert prefetch_headers(ten, "activemq") == {"activemq.prefetchSize": "10"}
    assert prefetch_headers(ten, "rabbitmq") == {"prefetch-count": "10"}
    # Artemis counts bytes: 4 KiB a message when no byte bound is given.
    assert prefetch_headers(ten, "artemis") == {"consumer-window-size": "40960"}
    assert prefetch_headers(ten, "unknown") == {
        "activemq.prefetchSize": "10",
        "prefetch-count": "10",
        "consumer-window-size": "40960",
    }


def test_a_byte_bound_is_artemis_window_and_changes_no_message_count() -> None:
    bounded = spec(prefetch=10, prefetch_bytes=65536)
    assert prefetch_headers(bounded, "artemis") == {"consumer-window-size": "65536"}
    assert prefetch_headers(bounded, "activemq") == {"activemq.prefetchSize": "10"}
    assert prefetch_headers(bounded, "unknown")["consumer-window-size"] == "65536"


def test_a_header_the_caller_passed_wins() -> None:
    own = spec(prefetch=10, headers=(("activemq.prefetchSize", "1"),))
    headers = subscribe_headers(own, None, "activemq")
    assert headers["activemq.prefetchSize"] == "1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prefetch": 0}, r"subscription 's1': prefetch must be a whole number >= 1, got 0"),
        ({"prefetch": True}, r"prefetch must be a whole number >= 1, got True"),
        ({"prefetch": "10"}, r"prefetch must be a whole number >= 1, got '10'"),
        ({"prefetch_bytes": -1}, r"prefetch_bytes must be a whole number >= 0 .* got -1"),
    ],
)
def test_a_bad_prefetch_is_refused_naming_the_subscription(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        subscribe_headers(spec(**kwargs), None, "activemq")


def test_only_rabbitmq_releases_with_a_frame() -> None:
    assert release_command("rabbitmq") == "NACK"
    for kind in ("activemq", "artemis", "unknown"):
        assert release_command(kind) is None  # type: ignore[arg-type]


# --- through the session ---------------------------------------------------------------------


def connected_to(server: str | None) -> Harness:
    h = Harness()
    headers = {"version": "1.2"}
    if server is not None:
        headers["server"] = server
    h.script = lambda t: t.play("connected", headers)
    return h


def deliver_one(h: Harness) -> None:
    h.transport.play(
        "message",
        {"destination": "/queue/a", "message-id": "m1", "subscription": "s1", "ack": "a1"},
        b"body",
    )


@pytest.mark.parametrize(
    ("server", "header"),
    [
        ("ActiveMQ/5.17.2", ("activemq.prefetchSize", "7")),
        ("RabbitMQ/3.10.8", ("prefetch-count", "7")),
        ("ActiveMQ-Artemis/2.31.2", ("consumer-window-size", str(7 * 4096))),
    ],
)
def test_subscribe_sends_the_prefetch_header_of_the_broker_connected(
    server: str, header: tuple[str, str]
) -> None:
    h = connected_to(server)
    session = h.connect()
    session.subscribe(spec(prefetch=7), None)
    ((command, headers, _),) = h.transport.frames
    assert command == "SUBSCRIBE"
    flow = {k: v for k, v in headers.items() if k in {"activemq.prefetchSize", "prefetch-count"}}
    flow |= {k: v for k, v in headers.items() if k == "consumer-window-size"}
    assert flow == dict([header])


def test_release_on_rabbitmq_is_a_nack_which_requeues() -> None:
    h = connected_to("RabbitMQ/3.10.8")
    session = h.connect()
    deliver_one(h)
    session.release(h.listener.messages[0])
    assert [(f[0], f[1]) for f in h.transport.frames] == [("NACK", {"id": "a1"})]


@pytest.mark.parametrize("server", ["ActiveMQ/5.17.2", "ActiveMQ-Artemis/2.31.2", None])
def test_release_elsewhere_writes_nothing(server: str | None) -> None:
    h = connected_to(server)
    session = h.connect()
    deliver_one(h)
    session.release(h.listener.messages[0])
    assert h.transport.frames == []


@pytest.mark.parametrize("server", ["ActiveMQ/5.17.2", "RabbitMQ/3.10.8"])
def test_release_after_close_raises_broker_unavailable(server: str) -> None:
    h = connected_to(server)
    session = h.connect()
    deliver_one(h)
    session.close()
    with pytest.raises(BrokerUnavailable):
        session.release(h.listener.messages[0])
