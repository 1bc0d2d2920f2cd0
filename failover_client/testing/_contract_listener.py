"""The recording listener of the adapter contract suite (see :mod:`.contract`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from failover_client.adapter import AdvertisedBrokers, Received, Session

__all__ = ["ContractListener"]


class ContractListener:
    """A thread-safe :class:`~failover_client.adapter.SessionListener` that records the order
    of what it hears: ``log`` holds ``"lost"`` and ``"confirm:<n>"`` entries as they came."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list[Received] = []
        self.lost: list[BaseException] = []
        self.brokers: list[AdvertisedBrokers] = []
        self.confirmations: dict[int, list[BaseException | None]] = {}
        self.log: list[str] = []

    def on_message(self, session: Session, message: Received) -> None:
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    def on_lost(self, session: Session, cause: BaseException) -> None:
        with self.cond:
            self.lost.append(cause)
            self.log.append("lost")
            self.cond.notify_all()

    def on_brokers(self, session: Session, advertised: AdvertisedBrokers) -> None:
        with self.cond:
            self.brokers.append(advertised)
            self.cond.notify_all()

    def confirmation(self, number: int) -> Callable[[BaseException | None], None]:
        """An ``on_confirm`` callback that records its outcomes under ``number``."""

        def on_confirm(error: BaseException | None) -> None:
            with self.cond:
                self.confirmations.setdefault(number, []).append(error)
                self.log.append(f"confirm:{number}")
                self.cond.notify_all()

        return on_confirm

    def wait_for(self, condition: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(condition, timeout)
