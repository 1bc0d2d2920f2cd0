"""The adapter contract as a pytest suite: every adapter, and the shipped fake, must pass it.

:mod:`failover_client.adapter` states the contract an engine relies on; this module checks it
against a live adapter. Subclass :class:`AdapterContract` in your own test suite and override
one fixture, ``contract_target``, returning a :class:`ContractTarget`::

    from failover_client.testing.contract import AdapterContract, ContractTarget

    class TestMyAdapter(AdapterContract):
        @pytest.fixture
        def contract_target(self, my_broker, unique_queue):
            return ContractTarget(
                connector=MyConnector(),
                address=my_broker.address,
                destination=unique_queue,
                kill_broker=lambda session: my_broker.kill(),
                hold_confirmations=my_broker.paused,     # a context manager
                publish=my_broker.publish,
            )

:class:`AdapterContract` includes a flow-control part (``_flow_contract``): with
``prefetch=N`` in ``client-individual`` mode at most N messages are delivered unsettled while
more are queued, and a released message comes again, to a new consumer, not dead-lettered. A
target whose broker does not hold messages back sets ``ContractTarget.flow_control`` to False,
one that does not redeliver sets ``ContractTarget.redelivers`` to False, and the test is skipped.

:class:`AdapterContract` also includes :class:`ConfigurationContract`: the settings every adapter
refuses in the same way, with a :class:`ConfigurationError` at construction (a key file
without its certificate, an unreadable CA file, bad heart-beat values, a bad close timeout),
never later as a broker failure the reconnect loop would retry. It builds connectors with
``ContractTarget.build_connector`` (default: the target connector's class, called with the
keyword arguments ``options``, ``heartbeat`` and ``close_timeout`` that every adapter's
constructor takes). It needs no broker: subclass it alone, overriding ``connector_factory``,
to check an adapter's configuration in unit tests.

The classes' names do not start with ``Test``, so pytest collects their tests only through a
subclass. This module imports pytest: import it from test code only (``failover_client.testing``
itself does not import it).

Waits use real safety timeouts (``safety``) only against a hung adapter; each returns as soon as
its condition holds, so nothing here depends on how fast the machine is. "Promptly", for a
cancelled connect, means it ended within ``safety`` while its ``timeout`` was far longer.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import pytest

from failover_client._errors import (
    BrokerUnavailable,
    ConnectCancelled,
    ConnectionFailure,
    SubscriptionRefused,
)
from failover_client.adapter import (
    Cancel,
    Connector,
    Received,
    Session,
    SubscriptionSpec,
    Syncing,
)
from failover_client.testing._config_contract import ConfigurationContract, ConnectorFactory
from failover_client.testing._contract_listener import ContractListener
from failover_client.testing._flow_contract import FlowControlContract
from failover_client.uri import BrokerAddress

__all__ = [
    "AdapterContract",
    "ConfigurationContract",
    "ConnectorFactory",
    "ContractListener",
    "ContractTarget",
    "HungBroker",
    "closed_port",
    "silent_listener",
]

_LONG_TIMEOUT = 300.0
"""The connect timeout of the cancellation tests: far beyond any safety wait."""


class HungBroker(Protocol):
    """A broker that accepts a connect but never answers the handshake."""

    @property
    def address(self) -> BrokerAddress: ...

    def wait_connecting(self, timeout: float) -> bool:
        """Block until a connect reached the handshake (at most ``timeout``); True if it did."""


@dataclass
class ContractTarget:
    """What the contract suite needs to know about one adapter and one broker.

    ``kill_broker`` and ``hold_confirmations`` receive the live session under test (a real
    broker can ignore it; the fake uses it to find its scripted broker).
    """

    connector: Connector
    address: BrokerAddress
    """A healthy broker."""
    destination: str
    """A queue no other test uses."""
    kill_broker: Callable[[Session], object]
    """Kill the broker under the live session (SIGKILL: no goodbye, the socket just ends)."""
    hold_confirmations: Callable[[Session], AbstractContextManager[object]]
    """A context in which the broker confirms nothing but the session stays up (e.g. SIGSTOP,
    resumed on exit unless the broker was killed meanwhile)."""
    publish: Callable[[str, bytes], object]
    """Put one message with this body on the destination, from outside the session."""
    send_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers every send carries (e.g. RabbitMQ's durable-queue declaration)."""
    subscription_headers: tuple[tuple[str, str], ...] = ()
    connect_timeout: float = 10.0
    hung_broker: Callable[[], AbstractContextManager[HungBroker]] | None = None
    """A broker that never answers the handshake; default: :func:`silent_listener`."""
    refused_address: Callable[[], BrokerAddress] | None = None
    """An address whose port refuses connections; default: :func:`closed_port`."""
    safety: float = 15.0
    """Real seconds any wait lasts at most, against a hung adapter."""
    refused_subscription: SubscriptionSpec | None = None
    """A subscription the broker refuses by name (e.g. a bad selector); without one, the
    refusal test is skipped with that reason."""
    build_connector: ConnectorFactory | None = None
    """Builds another connector of this adapter for the configuration tests (see
    :data:`ConnectorFactory`); default: ``type(connector)``."""
    flow_control: bool = True
    """Whether the broker keeps queued messages back beyond a subscription's prefetch (every
    real broker, and the shipped fake); False skips that test."""
    redelivers: bool = True
    """Whether the broker hands a released message out again, to a new consumer (every real
    broker; not the shipped fake, whose queue ends with its session); False skips that test."""
    quiet: float = 1.0
    """Seconds in which nothing more may arrive once a prefetch window is full (a broker with
    messages waiting and a free window delivers in milliseconds)."""


# --- loopback stand-ins for a hung broker and a dead port ------------------------------------


class _SilentBroker:
    """A listening loopback socket that accepts connections and never says a word."""

    def __init__(self, scheme: str) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._accepted: list[socket.socket] = []
        self._address = BrokerAddress(scheme, "127.0.0.1", self._server.getsockname()[1])

    @property
    def address(self) -> BrokerAddress:
        return self._address

    def wait_connecting(self, timeout: float) -> bool:
        self._server.settimeout(timeout)
        try:
            peer, _ = self._server.accept()
        except TimeoutError:
            return False
        # Held open, unread: the client's handshake gets neither an answer nor an EOF.
        self._accepted.append(peer)
        return True

    def close(self) -> None:
        for peer in self._accepted:
            peer.close()
        self._server.close()


@contextlib.contextmanager
def silent_listener(scheme: str) -> Iterator[HungBroker]:
    """A loopback "broker" for ``scheme`` that accepts the TCP connect and never answers."""
    broker = _SilentBroker(scheme)
    try:
        yield broker
    finally:
        broker.close()


def closed_port(scheme: str) -> BrokerAddress:
    """A loopback address for ``scheme`` whose port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return BrokerAddress(scheme, "127.0.0.1", port)


# --- the suite --------------------------------------------------------------------------------


class AdapterContract(ConfigurationContract, FlowControlContract):
    """The contract tests; subclass it and override the ``contract_target`` fixture."""

    @pytest.fixture
    def contract_target(self) -> ContractTarget:
        """Override in the subclass: the adapter and broker under test."""
        pytest.fail(f"{type(self).__name__} must override the contract_target fixture")

    @pytest.fixture
    def connector_factory(self, contract_target: ContractTarget) -> ConnectorFactory:
        """``contract_target.build_connector``, or the target connector's own class."""
        if contract_target.build_connector is not None:
            return contract_target.build_connector
        return type(contract_target.connector)

    # --- helpers --------------------------------------------------------------------------

    @staticmethod
    def _send(target: ContractTarget, session: Session, listener: ContractListener, n: int) -> None:
        body = f"contract-{n}".encode()
        session.send(target.destination, body, target.send_headers, listener.confirmation(n))

    # --- handshake and confirmation -------------------------------------------------------

    def test_a_confirmed_send_is_confirmed(self, contract_target: ContractTarget) -> None:
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        try:
            assert session.address == target.address
            # The broker's name from the handshake, or None: never an empty string.
            assert session.product is None or (isinstance(session.product, str) and session.product)
            self._send(target, session, listener, 0)
            assert listener.wait_for(lambda: 0 in listener.confirmations, target.safety)
            assert listener.confirmations == {0: [None]}
        finally:
            session.close()
        assert listener.lost == []

    # --- loss -----------------------------------------------------------------------------

    def test_loss_fails_outstanding_confirmations_then_reports_it_once(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        sends = 3
        try:
            with target.hold_confirmations(session):
                for n in range(sends):
                    self._send(target, session, listener, n)
                target.kill_broker(session)
                assert listener.wait_for(lambda: bool(listener.lost), target.safety)
        finally:
            session.close()
        assert isinstance(listener.lost[0], ConnectionFailure)
        # Every confirmation completed when on_lost ran: the engine replays from there.
        assert listener.log == [f"confirm:{n}" for n in range(sends)] + ["lost"]
        for n in range(sends):
            (outcome,) = listener.confirmations[n]
            assert isinstance(outcome, ConnectionFailure), outcome
        assert len(listener.lost) == 1

    def test_close_fails_outstanding_confirmations_and_reports_no_loss(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        sends = 3
        with target.hold_confirmations(session):
            for n in range(sends):
                self._send(target, session, listener, n)
            session.close()
            # Complete by the time close() returns: the engine fails waiting sends next.
            assert sorted(listener.confirmations) == list(range(sends))
            session.close()
        for n in range(sends):
            (outcome,) = listener.confirmations[n]
            assert isinstance(outcome, BrokerUnavailable), outcome
        assert listener.lost == []

    @pytest.mark.parametrize("end", ["close", "loss"])
    def test_every_operation_after_the_end_raises_broker_unavailable(
        self, contract_target: ContractTarget, end: str
    ) -> None:
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        if end == "loss":
            target.kill_broker(session)
            assert listener.wait_for(lambda: bool(listener.lost), target.safety)
        session.close()
        session.close()
        spec = SubscriptionSpec("contract-late", target.destination)
        message = Received("contract-late", target.destination, b"", ack_id="1", message_id="1")
        calls: dict[str, Callable[[], None]] = {
            "send": lambda: session.send(target.destination, b"late", target.send_headers, None),
            "subscribe": lambda: session.subscribe(spec, None),
            "unsubscribe": lambda: session.unsubscribe(spec.id),
            "ack": lambda: session.ack(message),
            "nack": lambda: session.nack(message),
            "release": lambda: session.release(message),
        }
        allowed = []
        for name, call in calls.items():
            try:
                call()
            except BrokerUnavailable:
                continue
            allowed.append(name)
        assert allowed == [], f"still allowed after {end}: {allowed}"
        assert len(listener.lost) == (1 if end == "loss" else 0)

    # --- connecting -----------------------------------------------------------------------

    def test_a_token_cancelled_before_connect_ends_it(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        cancel = Cancel()
        cancel.cancel()
        with pytest.raises(ConnectCancelled):
            target.connector.connect(
                target.address, timeout=_LONG_TIMEOUT, listener=ContractListener(), cancel=cancel
            )

    def test_cancelling_a_handshake_that_never_answers_ends_the_connect(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        hung_broker = target.hung_broker or (lambda: silent_listener(target.address.scheme))
        cancel = Cancel()
        outcome: list[BaseException | Session] = []

        def connect(address: BrokerAddress) -> None:
            try:
                outcome.append(
                    target.connector.connect(
                        address, timeout=_LONG_TIMEOUT, listener=ContractListener(), cancel=cancel
                    )
                )
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.append(exc)

        with hung_broker() as hung:
            thread = threading.Thread(target=connect, args=(hung.address,), name="contract")
            thread.start()
            try:
                assert hung.wait_connecting(target.safety)
                cancel.cancel()
                thread.join(target.safety)
                assert not thread.is_alive(), "the cancelled connect did not end"
            finally:
                cancel.cancel()
                thread.join(target.safety)
        (result,) = outcome
        assert isinstance(result, ConnectCancelled), result

    def test_a_refused_port_is_broker_unavailable(self, contract_target: ContractTarget) -> None:
        target = contract_target
        address = (
            target.refused_address()
            if target.refused_address is not None
            else closed_port(target.address.scheme)
        )
        with pytest.raises(BrokerUnavailable) as info:
            target.connector.connect(
                address,
                timeout=target.connect_timeout,
                listener=ContractListener(),
                cancel=Cancel(),
            )
        assert not isinstance(info.value, ConnectCancelled)

    # --- subscriptions --------------------------------------------------------------------

    def test_a_published_message_reaches_the_subscription_and_is_acknowledged(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        try:
            spec = SubscriptionSpec(
                "contract-sub",
                target.destination,
                ack="client-individual",
                headers=target.subscription_headers,
            )
            session.subscribe(spec, listener.confirmation(0))
            # The broker confirms the subscription before anything is published to it.
            assert listener.wait_for(lambda: 0 in listener.confirmations, target.safety)
            assert listener.confirmations == {0: [None]}
            target.publish(target.destination, b"contract-message")
            assert listener.wait_for(lambda: bool(listener.messages), target.safety)
            (message,) = listener.messages
            assert (message.subscription_id, message.destination, message.body) == (
                "contract-sub",
                target.destination,
                b"contract-message",
            )
            session.ack(message)
            # Confirmations come in order on one connection: a send confirmed after the ack
            # shows the broker took the ack without ending the session.
            self._send(target, session, listener, 1)
            assert listener.wait_for(lambda: 1 in listener.confirmations, target.safety)
            assert listener.confirmations == {0: [None], 1: [None]}
            session.unsubscribe(spec.id)
        finally:
            session.close()
        assert listener.lost == []

    def test_a_sync_behind_an_ack_is_confirmed(self, contract_target: ContractTarget) -> None:
        """An adapter with :class:`~failover_client.adapter.Syncing` confirms the frames
        written before a ``sync`` (an ack here) and keeps the session."""
        target = contract_target
        listener = ContractListener()
        session = self._connect(target, listener)
        try:
            if not isinstance(session, Syncing):
                pytest.skip(f"{type(session).__name__} does not implement adapter.Syncing")
            spec = SubscriptionSpec(
                "contract-sync",
                target.destination,
                ack="client-individual",
                headers=target.subscription_headers,
            )
            session.subscribe(spec, listener.confirmation(0))
            assert listener.wait_for(lambda: 0 in listener.confirmations, target.safety)
            target.publish(target.destination, b"contract-sync")
            assert listener.wait_for(lambda: bool(listener.messages), target.safety)
            session.ack(listener.messages[0])
            session.sync(listener.confirmation(1))
            assert listener.wait_for(lambda: 1 in listener.confirmations, target.safety)
            assert listener.confirmations == {0: [None], 1: [None]}
            session.unsubscribe(spec.id)
        finally:
            session.close()
        assert listener.lost == []

    def test_a_refused_subscription_is_reported_to_its_callback(
        self, contract_target: ContractTarget
    ) -> None:
        target = contract_target
        listener = ContractListener()
        refused = target.refused_subscription
        if refused is None:
            pytest.skip("the target names no subscription its broker refuses")
        session = self._connect(target, listener)
        try:
            session.subscribe(refused, listener.confirmation(0))
            assert listener.wait_for(lambda: 0 in listener.confirmations, target.safety)
        finally:
            session.close()
        (outcome,) = listener.confirmations[0]
        # Refused by name, once; whether the broker then ends the connection is its choice
        # (RabbitMQ does, ActiveMQ does not), reported as a loss if it does.
        assert isinstance(outcome, SubscriptionRefused), outcome
        assert outcome.subscription_id == refused.id
