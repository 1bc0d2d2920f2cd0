"""A group of brokers of one kind, with failover URIs built from their endpoints."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator, Mapping, Sequence
from urllib.parse import urlencode, urlsplit

from ._broker import START_TIMEOUT, STOP_TIMEOUT, Broker
from ._errors import BrokerError
from ._model import ClusterSpec

__all__ = ["Cluster"]


class Cluster(Sequence[Broker]):
    """The brokers started for one ``ClusterSpec``; indexable like a list."""

    def __init__(
        self,
        spec: ClusterSpec,
        brokers: Sequence[Broker],
        backend: str,
        cleanups: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.spec = spec
        self.backend = backend
        self._brokers = tuple(brokers)
        # Run after the brokers are down: things they depend on (RabbitMQ's private epmd).
        self._cleanups = list(cleanups)

    # -- sequence ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._brokers)

    def __iter__(self) -> Iterator[Broker]:
        return iter(self._brokers)

    def __getitem__(self, index: int) -> Broker:  # type: ignore[override]  # no slices
        return self._brokers[index]

    @property
    def brokers(self) -> tuple[Broker, ...]:
        return self._brokers

    def broker_at(self, address: str | None) -> Broker:
        """The broker behind ``address``, a member URI such as ``FailoverConnection.broker``.

        Matched by port (every broker of a cluster has its own), so a redacted address with
        its password masked works too. Raises BrokerError when no broker of this cluster has
        that port (or ``address`` is None: the connection is not on any broker).
        """
        port = urlsplit(address).port if address else None
        for broker in self._brokers:
            if port is not None and any(ep.port == port for ep in broker.endpoints.values()):
                return broker
        raise BrokerError(f"{address!r} is not the address of a broker of {self!r}")

    # -- URIs ----------------------------------------------------------------------------------

    def members(self, endpoint: str = "stomp") -> list[str]:
        """Each broker's ``endpoint`` as a URI member, in broker order."""
        return [b.uri(endpoint) for b in self._brokers]

    def failover_uri(
        self,
        endpoint: str = "stomp",
        options: Mapping[str, str | int | float | bool] | str | None = None,
    ) -> str:
        """``failover:(m1,m2,...)`` over ``endpoint`` members, with ``?options`` if given.

        Booleans are written the ActiveMQ way (``true``/``false``).
        """
        uri = f"failover:({','.join(self.members(endpoint))})"
        if not options:
            return uri
        if isinstance(options, str):
            return f"{uri}?{options.lstrip('?')}"
        pairs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
        return f"{uri}?{urlencode(pairs, safe=',:/')}"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Launch every broker that is down, then wait for all of them together."""
        down = [b for b in self._brokers if not b.running()]
        for broker in down:
            broker.launch()
        for broker in down:
            broker.wait_ready(timeout)

    def heal(self, timeout: float = START_TIMEOUT) -> list[str]:
        """Bring every broker back to healthy; return the names of those that needed it.

        A hung broker is resumed; a dead one started; one that runs but does not answer is
        killed and started (so a test's mistreatment never leaks into the next test).
        """
        healed: list[str] = []
        for broker in self._brokers:
            if broker.hung:
                broker.resume()
                healed.append(broker.name)
        for broker in self._brokers:
            if broker.running() and not broker.probe(timeout=2.0):
                broker.kill()
                if broker.name not in healed:
                    healed.append(broker.name)
        down = [b for b in self._brokers if not b.running()]
        for broker in down:
            broker.launch()
            if broker.name not in healed:
                healed.append(broker.name)
        for broker in self._brokers:
            broker.wait_ready(timeout)
        return healed

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every broker (in parallel); raise after all are down if any had to be killed."""
        errors: list[str] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self))) as pool:
            futures = {pool.submit(b.stop, timeout): b for b in self._brokers}
            for future, broker in futures.items():
                exc = future.exception()
                if exc is not None:
                    errors.append(f"{broker.name}: {exc}")
        for cleanup in self._cleanups:
            cleanup()
        if errors:
            raise BrokerError("; ".join(errors))

    def __repr__(self) -> str:
        inner = ", ".join(repr(b) for b in self._brokers)
        return f"<Cluster {self.spec.label} backend={self.backend} [{inner}]>"
