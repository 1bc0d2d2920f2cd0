"""The state an AMQP test peer keeps across its connections: configuration, queues, records."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ._amqp_peer_config import AmqpPeerConfig, PeerMessage, PeerOpen

if TYPE_CHECKING:
    from proton import Message

__all__ = ["Book"]


class Book:
    """What a peer's connections share, and what tests read; one lock guards it all.

    Implements :class:`._amqp_peer_conn.PeerBook` for the peer thread; tests read the records
    and wait on ``changed``.
    """

    def __init__(self, config: AmqpPeerConfig) -> None:
        self.changed = threading.Condition()
        self._config = config
        self.opens: list[PeerOpen] = []
        self.messages: list[PeerMessage] = []
        self.queues: dict[str, collections.deque[Message]] = {}

    @property
    def config(self) -> AmqpPeerConfig:
        with self.changed:
            return self._config

    @config.setter
    def config(self, config: AmqpPeerConfig) -> None:
        with self.changed:
            self._config = config

    def opened(self, record: PeerOpen) -> None:
        with self.changed:
            self.opens.append(record)
            self.changed.notify_all()

    def received(self, record: PeerMessage) -> None:
        with self.changed:
            self.messages.append(record)
            self.changed.notify_all()

    def take(self, address: str) -> Message | None:
        with self.changed:
            queue = self.queues.get(address)
            return queue.popleft() if queue else None

    def put_back(self, address: str, message: Message) -> None:
        with self.changed:
            self.queues.setdefault(address, collections.deque()).appendleft(message)

    def add(self, address: str, messages: Iterable[Message]) -> None:
        with self.changed:
            self.queues.setdefault(address, collections.deque()).extend(messages)

    def count(self, address: str) -> int:
        with self.changed:
            return len(self.queues.get(address, ()))

    def wait_for(self, what: Callable[[], bool], timeout: float, waiting_for: str) -> None:
        with self.changed:
            if not self.changed.wait_for(what, timeout):
                raise TimeoutError(f"the AMQP peer waited {timeout:g} s for {waiting_for}")
