"""The shipped fake passes the adapter contract suite, as every real adapter must."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from failover_client.uri import BrokerAddress

from failover_client import ConnectorSettings
from failover_client.adapter import Session, SubscriptionSpec
from failover_client.testing import FakeClock, FakeConnector, FakeSession
from failover_client.testing.contract import AdapterContract, ContractTarget, HungBroker

BROKER = BrokerAddress("stomp", "a", 61613)
HUNG = BrokerAddress("stomp", "hung", 61613)
REFUSING = BrokerAddress("stomp", "down", 61613)


def fake(session: Session) -> FakeSession:
    assert isinstance(session, FakeSession)
    return session


@contextlib.contextmanager
def holding(session: Session) -> Iterator[None]:
    """The fake broker stops confirming until the block ends."""
    fake(session).auto_confirm = False
    try:
        yield
    finally:
        fake(session).auto_confirm = True


class _Hung:
    def __init__(self, connector: FakeConnector, clock: FakeClock) -> None:
        self.connector = connector
        self.clock = clock
        connector.behave(HUNG, "hang")

    @property
    def address(self) -> BrokerAddress:
        return HUNG

    def wait_connecting(self, timeout: float) -> bool:
        # The hang waits on the virtual clock: it is in the handshake once it waits there.
        return self.connector.wait_until(
            lambda: HUNG.key in self.connector.attempted(), timeout
        ) and self.clock.wait_for_waiters(1, timed=True, timeout=timeout)


def publish(connector: FakeConnector, destination: str, body: bytes) -> None:
    session = connector.session(BROKER)
    for spec in list(session.subscriptions.values()):
        if spec.destination == destination:
            session.deliver(spec.id, body)


class TestFakeConnector(AdapterContract):
    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def contract_target(self, clock: FakeClock) -> ContractTarget:
        connector = FakeConnector(clock=clock, refused_destinations={"/queue/refused"})
        connector.behave(REFUSING, "refuse")

        @contextlib.contextmanager
        def hung() -> Iterator[HungBroker]:
            yield _Hung(connector, clock)

        return ContractTarget(
            connector=connector,
            address=BROKER,
            destination="/queue/contract",
            kill_broker=lambda session: fake(session).kill(),
            hold_confirmations=holding,
            publish=lambda destination, body: publish(connector, destination, body),
            hung_broker=hung,
            refused_subscription=SubscriptionSpec("contract-refused", "/queue/refused"),
            refused_address=lambda: REFUSING,
            build_connector=lambda **settings: FakeConnector(
                clock=clock, settings=ConnectorSettings(**settings)
            ),
            # The fake holds back what passes a subscription's window, but its queue ends
            # with its session: nothing to return a released message to.
            redelivers=False,
        )

    def test_no_virtual_time_passes_in_a_cancelled_handshake(
        self, contract_target: ContractTarget, clock: FakeClock
    ) -> None:
        self.test_cancelling_a_handshake_that_never_answers_ends_the_connect(contract_target)
        assert clock.monotonic() == 0.0
        assert isinstance(contract_target.connector, FakeConnector)
        assert contract_target.connector.cancelled == [HUNG.key]
