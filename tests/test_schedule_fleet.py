"""A fleet that lost its brokers together does not come back in the same instant.

Virtual time only: each client's reconnect timeline is the running sum of its schedule's delays
(a refused connect costs no time), each client with its own seeded generator, as 50 processes
would have. The broker is away for ``AWAY`` seconds; a client is back at its first attempt at or
after that moment. Without jitter every client has the same timeline, so all 50 come back at the
same instant (the thundering herd the default jitter prevents).
"""

from __future__ import annotations

import random

import pytest
from failover_client.uri import parse

from failover_client.engine._schedule import ReconnectSchedule

CLIENTS = 50
AWAY = 60.0


def comeback_times(uri: str) -> list[float]:
    """When each of the fleet's clients makes its first attempt after the broker is back."""
    parsed = parse(uri)
    times = []
    for client in range(CLIENTS):
        schedule = ReconnectSchedule.from_options(
            parsed.options, rng=random.Random(client), style=parsed.dialect
        )
        run = schedule.start(startup=False)
        now = 0.0
        while now < AWAY:
            delay = run.next_delay()
            assert delay is not None
            now += delay
        times.append(now)
    return times


@pytest.mark.parametrize(
    "uri", ["failover:(stomp://a:61613,stomp://b:61613)", "failover:(amqp://a:5672,amqp://b:5672)"]
)
def test_the_default_jitter_spreads_a_fleet_over_seconds(uri: str) -> None:
    times = comeback_times(uri)
    assert max(times) - min(times) >= 2.0


@pytest.mark.parametrize(
    "uri",
    [
        "failover:(stomp://a:61613,stomp://b:61613)?reconnectJitter=0",
        "failover:(amqp://a:5672,amqp://b:5672)?reconnectJitter=0",
    ],
)
def test_without_jitter_the_whole_fleet_comes_back_at_once(uri: str) -> None:
    times = comeback_times(uri)
    assert max(times) - min(times) == 0.0


def test_a_uri_that_sets_the_jitter_gets_exactly_that() -> None:
    assert parse("failover:(stomp://a:61613)").options.reconnect_jitter == 0.5
    assert parse("failover:(stomp://a:61613)?reconnectJitter=0.2").options.reconnect_jitter == 0.2
    schedule = ReconnectSchedule.from_options(
        parse("failover:(stomp://a:61613)?reconnectJitter=0").options, rng=random.Random(1)
    )
    assert schedule.start(startup=False).delays(3) == [0.01, 0.02, 0.04]


@pytest.mark.parametrize(
    "uri",
    [
        "failover:(stomp://a:61613,stomp://b:61613)",
        "failover:(amqp://a:5672,amqp://b:5672)",
        "(tcp://a:61616,tcp://b:61616)?reconnectAttempts=-1",
    ],
)
def test_jitter_never_delays_the_first_try_of_another_broker(uri: str) -> None:
    """Failover time is the first attempt after a loss: jitter may shorten it, never lengthen."""
    parsed = parse(uri)
    exact = ReconnectSchedule.from_options(parsed.options.replace(reconnect_jitter=0.0))
    for seed in range(CLIENTS):
        jittered = ReconnectSchedule.from_options(parsed.options, rng=random.Random(seed))
        for startup in (True, False):
            [first] = jittered.start(startup=startup).delays(1)
            [unjittered] = exact.start(startup=startup).delays(1)
            assert first <= unjittered
            if unjittered == 0.0:
                assert first == 0.0
