"""The canary's private destination on each STOMP broker, chosen by its CONNECTED ``server``."""

from __future__ import annotations

import pytest

from failover_client.stomp._frames import private_destination


@pytest.mark.parametrize(
    ("server", "destination", "headers"),
    [
        ("ActiveMQ/5.17.6", "/temp-queue/c-1", {}),
        (
            "RabbitMQ/3.10.8",
            "/queue/c-1",
            {"exclusive": "true", "auto-delete": "true", "durable": "false"},
        ),
        ("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine", "/topic/c-1", {}),
        ("", "/topic/c-1", {}),
    ],
)
def test_each_broker_gets_a_destination_only_the_session_reads(
    server: str, destination: str, headers: dict[str, str]
) -> None:
    assert private_destination({"server": server} if server else {}, "c-1") == (
        destination,
        headers,
    )
