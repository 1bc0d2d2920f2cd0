"""The adapter contract's flow-control part: prefetch bounds delivery, release() returns.

Mixed into :class:`~failover_client.testing.contract.AdapterContract`; it uses that suite's
``contract_target`` fixture. A target whose broker has no queue to hold messages back in
(``ContractTarget.flow_control`` False) skips the first, one whose broker does not redeliver
(``ContractTarget.redelivers`` False, e.g. the shipped fake) the second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from failover_client.adapter import Cancel, Session, SubscriptionSpec
from failover_client.testing._contract_listener import ContractListener

if TYPE_CHECKING:
    from failover_client.testing.contract import ContractTarget

__all__ = ["FlowControlContract"]

_PREFETCH = 3
"""The prefetch of the flow-control tests (twice as many messages are queued)."""


class FlowControlContract:
    """A subscription's ``prefetch`` and :meth:`Session.release` on a live broker."""

    @staticmethod
    def _connect(target: ContractTarget, listener: ContractListener) -> Session:
        return target.connector.connect(
            target.address, timeout=target.connect_timeout, listener=listener, cancel=Cancel()
        )

    @staticmethod
    def _flowing(target: ContractTarget) -> None:
        if not target.flow_control:
            pytest.skip("the target's broker applies no flow control (flow_control=False)")

    def _subscribe_bounded(
        self, target: ContractTarget, session: Session, listener: ContractListener, key: int
    ) -> SubscriptionSpec:
        spec = SubscriptionSpec(
            f"contract-flow-{key}",
            target.destination,
            ack="client-individual",
            headers=target.subscription_headers,
            prefetch=_PREFETCH,
        )
        session.subscribe(spec, listener.confirmation(key))
        assert listener.wait_for(lambda: key in listener.confirmations, target.safety)
        assert listener.confirmations[key] == [None]
        return spec

    @staticmethod
    def _count_after_quiet(target: ContractTarget, listener: ContractListener, least: int) -> int:
        """Wait for ``least`` messages, then a quiet period; how many arrived."""
        assert listener.wait_for(lambda: len(listener.messages) >= least, target.safety), (
            f"{len(listener.messages)} of {least} messages arrived"
        )
        # Ends early only when the window was overrun, which the caller's assertion shows.
        listener.wait_for(lambda: len(listener.messages) > least, target.quiet)
        return len(listener.messages)

    def test_prefetch_bounds_unsettled_deliveries(self, contract_target: ContractTarget) -> None:
        target = contract_target
        self._flowing(target)
        listener = ContractListener()
        session = self._connect(target, listener)
        try:
            self._subscribe_bounded(target, session, listener, 0)
            for n in range(2 * _PREFETCH):
                target.publish(target.destination, f"flow-{n}".encode())
            # More are queued than the window holds: exactly the window is delivered.
            assert self._count_after_quiet(target, listener, _PREFETCH) == _PREFETCH
            session.ack(listener.messages[0])
            # One settled, one more may come: and no more than that.
            assert self._count_after_quiet(target, listener, _PREFETCH + 1) == _PREFETCH + 1
        finally:
            session.close()
        assert listener.lost == []

    def test_a_released_message_comes_again(self, contract_target: ContractTarget) -> None:
        target = contract_target
        if not target.redelivers:
            pytest.skip("the target's broker does not redeliver (redelivers=False)")
        listener = ContractListener()
        session = self._connect(target, listener)
        try:
            spec = self._subscribe_bounded(target, session, listener, 0)
            target.publish(target.destination, b"contract-released")
            assert listener.wait_for(lambda: bool(listener.messages), target.safety)
            session.release(listener.messages[0])
            # A broker that writes no release frame returns the message when the
            # subscription ends; one that requeues may deliver it here again first.
            session.unsubscribe(spec.id)
        finally:
            session.close()
        again = ContractListener()
        session = self._connect(target, again)
        try:
            self._subscribe_bounded(target, session, again, 1)
            # Not dead-lettered, not dropped: it comes again, to a new consumer.
            assert again.wait_for(lambda: bool(again.messages), target.safety)
            assert again.messages[0].body == b"contract-released"
            session.ack(again.messages[0])
        finally:
            session.close()
        assert listener.lost == again.lost == []
