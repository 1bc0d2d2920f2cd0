"""The STOMP adapter contract with every session read on an asyncio event loop.

The sessions of an ``AsyncFailoverConnection`` are read by its loop (``stomp._loopread``),
not by a reader thread. Here the contract suite's connector reads on a loop that runs in a
thread of its own, standing for the application's: the suite's calls come from the test's
thread, as the engine's do from its threads, and held, killed and closed brokers are read,
noticed and released by the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from failover_client.adapter import SubscriptionSpec
from failover_client.stomp import StompConnector
from failover_client.testing._contract_listener import ContractListener
from failover_client.testing.contract import AdapterContract, ContractTarget
from integration.test_contract_stomp import stomp_target

if TYPE_CHECKING:
    from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reading_loop() -> Iterator[tuple[asyncio.AbstractEventLoop, int]]:
    loop = asyncio.new_event_loop()
    idents: list[int] = []
    started = threading.Event()

    def run() -> None:
        idents.append(threading.get_ident())
        loop.call_soon(started.set)
        loop.run_forever()  # ends: stop() below

    thread = threading.Thread(target=run, name="application-loop", daemon=True)
    thread.start()
    assert started.wait(10.0)
    yield loop, idents[0]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10.0)
    loop.close()


class TestStompReadOnALoopOnActiveMQ(AdapterContract):
    @pytest.fixture
    def contract_target(
        self,
        activemq_cluster: Cluster,
        unique_queue: str,
        reading_loop: tuple[asyncio.AbstractEventLoop, int],
    ) -> ContractTarget:
        bad_selector = SubscriptionSpec(
            "contract-refused", unique_queue, headers=(("selector", "this is not valid ((("),)
        )
        target = stomp_target(activemq_cluster[0], unique_queue, {}, bad_selector)
        assert isinstance(target.connector, StompConnector)
        target.connector.read_on_loop(lambda: reading_loop)
        return target

    def test_no_session_has_a_reader_thread(self, contract_target: ContractTarget) -> None:
        listener = ContractListener()
        session = self._connect(contract_target, listener)
        try:
            self._send(contract_target, session, listener, 0)
            assert listener.wait_for(lambda: 0 in listener.confirmations, contract_target.safety)
            assert [t for t in threading.enumerate() if t.name.startswith("stomp-io")] == []
        finally:
            session.close()
        assert listener.lost == []
