"""``FailoverConnection``: one connection to a group of brokers that survives losing any of them.

The pieces (each in its own module): the broker pool (``_pool``), the policy and tiers that order
brokers (``policies``, ``_placement``), the reconnect schedule (``_schedule``), the reconnect
loop (``_loop``, ``_dial``), the connection state (``_state``), consumption: subscriptions,
their bounded buffers, handlers, acks, drain (``_subscriptions``, ``_inbox``, ``_consumers``,
``_consuming``), the canary and health (``_canary``, ``_health``), the send path and its
outbox (``_sender``, ``_outbox``), standbys (``_standby``), events and the dispatch thread
(``_events``, ``_dispatch``), the choice of adapter (``_adapters``). This module wires them
together and is the application's API.

Threads: a reconnect loop (``failover-client-loop-N``; on the real clock it runs only during a
pass, and waits between passes on the process's shared timer, see ``_parking``) and, only while
events are delivered, a dispatch thread (``failover-client-dispatch-N``), both joined by
:meth:`close`,
and one handler worker per callback subscription (``failover-client-N-handler-ID``). None of
them holds the facade (``_lifetime``): a connection dropped unclosed is closed by its finalizer,
and a forked child cannot use its parent's connection.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import ClassVar, Literal

from failover_client._clock import Clock, SystemClock
from failover_client._events import Listener
from failover_client._lazy import shared_random
from failover_client._timers import timers_for
from failover_client.adapter import Connector
from failover_client.engine._adapters import connector_for
from failover_client.engine._arguments import (
    FailoverTarget,
    check_callable,
    check_construction,
    check_send,
    check_timeout,
    listener_set,
    resolve_target,
)
from failover_client.engine._canary import Canary
from failover_client.engine._consumers import Consumers
from failover_client.engine._consuming import Consuming
from failover_client.engine._dial import Dialer, ScheduleLike
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._health import Health, read_health
from failover_client.engine._lifetime import (
    Emitter,
    Parts,
    ProcessGuard,
    SlotRouter,
    current_address,
    watch_dropped,
)
from failover_client.engine._loop import ReconnectLoop
from failover_client.engine._observe import Observing
from failover_client.engine._outbox import MESSAGE_ID_HEADER, MessageIds
from failover_client.engine._placement import PlanPolicy, Redirects, tiers_for
from failover_client.engine._planner import Planner
from failover_client.engine._pool import AddressMap, BrokerPool, PoolView
from failover_client.engine._rebalance import Rebalancer
from failover_client.engine._schedule import ReconnectSchedule
from failover_client.engine._sender import UNSET, Unset
from failover_client.engine._startup import bounded, startup_error, wrote_retry_options
from failover_client.engine._state import ConnectionState
from failover_client.engine._topology import (
    TopologyHub,
    TopologySource,
    UriSourceFactory,
    first_list_wait,
    uri_sources,
)
from failover_client.policies import policy_for_options
from failover_client.uri import BrokerAddress, FailoverOptions, ServerListAction

__all__ = ["MESSAGE_ID_HEADER", "FailoverConnection", "FailoverTarget"]

_numbers = itertools.count(1)


class FailoverConnection(Consuming, Observing):
    """One connection to a group of brokers that fails over, replays and restores.

    :param target: a failover URI string (parsed with :func:`failover_client.uri.parse`), a
        parsed ``FailoverURI``, or a sequence of :class:`BrokerAddress` (then pass ``options``).
    :param options: overrides the URI's options (required with a plain member list unless the
        defaults suit).
    :param connector: opens sessions; default: the adapter for the members' protocol
        (:func:`connector_for`). Tests pass :class:`failover_client.testing.FakeConnector`.
    :param clock: time source for every wait; default the system clock.
    :param rng: randomness for the policy and the schedule's jitter (seed it for repeatability).
    :param client_id: stable client id (rendezvous policy, ``client-id`` header, and the prefix
        of generated message ids); default ``options.client_id`` or a random one.
    :param login: default login for members without credentials (default connector only).
    :param passcode: default passcode for them; never shown anywhere.
    :param heartbeat: (send, receive) milliseconds, overriding ``options.heartbeat``.
    :param listeners: callables receiving every :mod:`event <failover_client._events>`.
    :param policy: a broker policy object instead of the one the options name.
    :param schedule: a reconnect schedule instead of the one the options describe.
    :param tiers: ``host:port`` -> priority tier (0 best), overriding ``priority_uris``.
    :param address_map: rewrites addresses pushed by topology sources.
    :param topology: topology sources (e.g. ``failover_client.topology.DnsSource``) started
        by :meth:`connect` with this connection as their sink, and stopped by :meth:`close`.
    :param topology_factory: builds the sources the URI asks for (``updateURIsURL``,
        ``discovery:``, ``topology=``); default :attr:`default_topology_factory`.

    Nothing connects until :meth:`connect` (or ``with``). Sends are at-least-once: a message
    confirmed by the broker is never lost, but a message re-sent after a fail-over can arrive
    twice; duplicates carry the same ``failover-message-id`` header.

    Close it (or use ``with``): one dropped while connected is closed by its finalizer, with a
    ``ResourceWarning``. It belongs to the process that made it: after ``fork()`` the child's
    calls raise ConfigurationError and its ``close()`` does nothing (the parent's session goes
    on); make a new connection in the child.
    """

    # Without a topology_factory; failover_client.FailoverConnection names the library's.
    default_topology_factory: ClassVar[UriSourceFactory | None] = None

    def __init__(
        self,
        target: str | FailoverTarget | Sequence[BrokerAddress],
        /,
        *,
        options: FailoverOptions | None = None,
        connector: Connector | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        client_id: str | None = None,
        login: str | None = None,
        passcode: str | None = None,
        heartbeat: tuple[int, int] | None = None,
        listeners: Iterable[Listener] = (),
        policy: PlanPolicy | None = None,
        schedule: ScheduleLike | None = None,
        tiers: Mapping[str, int] | None = None,
        address_map: AddressMap | None = None,
        topology: Iterable[TopologySource] = (),
        topology_factory: UriSourceFactory | None = None,
    ) -> None:
        self._guard = ProcessGuard()
        check_construction(options, client_id, listeners, tiers)
        members, parsed_options, agents = resolve_target(target)
        options = options or parsed_options
        if heartbeat is not None:
            options = options.replace(heartbeat=heartbeat)
        self._rng = rng or shared_random()
        self._client_id = client_id or options.client_id or f"{self._rng.getrandbits(48):012x}"
        self._options = options
        self._clock: Clock = clock or SystemClock()
        number = next(_numbers)
        self._listeners = listener_set(listeners)
        self._dispatcher = Dispatcher(f"failover-client-dispatch-{number}")
        # The threads get these parts, never a bound method of this facade (see _lifetime).
        emit = Emitter(self._dispatcher, self._listeners)
        self._state = ConnectionState(
            options=options,
            clock=self._clock,
            emit=emit,
            dispatcher=self._dispatcher,
            message_ids=MessageIds(self._client_id),
            process_check=self._guard.check,
        )
        self._sender = self._state.sender
        self._canary = Canary.for_state(self._state, emit)
        self._redirects = Redirects(self._clock)
        self._tiers = tiers_for(members, options, tiers)
        factory = topology_factory or type(self).default_topology_factory
        sources = (
            *uri_sources(
                factory, members, options, agents, login=login, passcode=passcode, clock=self._clock
            ),
            *topology,
        )
        self._pool = BrokerPool.for_connection(
            members, options, tiers=self._tiers, address_map=address_map, discovered=bool(sources)
        )
        new_rebalancer = functools.partial(
            Rebalancer, self._client_id, options.rebalance_drain_window, self._rng
        )
        self._planner = Planner(
            pool=self._pool,
            policy=policy or policy_for_options(options, rng=self._rng, client_id=self._client_id),
            redirects=self._redirects,
            rebalancer=new_rebalancer() if options.rebalance else None,
            options=options,
            clock=self._clock,
        )
        self._topology = TopologyHub(
            pool=self._pool,
            planner=self._planner,
            options=options,
            now=self._clock.monotonic,
            wake=self._state.wake,
            emit=emit,
            new_rebalancer=new_rebalancer,
            sources=sources,
            listeners=self._listeners,
            current=functools.partial(current_address, self._state),
            client_id=self._client_id,
        )
        self._schedule: ScheduleLike = schedule or ReconnectSchedule.from_options(
            options, rng=self._rng
        )
        self._connector = connector or connector_for(
            members,
            options,
            login=login,
            passcode=passcode,
            clock=self._clock,
            client_id=self._client_id,
        )
        self._consumers = Consumers(
            state=self._state,
            clock=self._clock,
            emit=emit,
            dispatcher=self._dispatcher,
            name=f"failover-client-{number}",
        )
        emit.observer = self._consumers.observe
        router = SlotRouter(
            state=self._state,
            consumers=self._consumers,
            topology=self._topology,
            pool=self._pool,
            redirects=self._redirects,
            canary=self._canary,
        )
        self._dialer = Dialer(
            connector=self._connector,
            pool=self._pool,
            planner=self._planner.dial_plan,
            schedule=self._schedule,
            clock=self._clock,
            connect_timeout=options.connect_timeout,
            stop=self._state.stop,
            emit=emit,
            new_slot=router.new_slot,
            events=router,
            redirects=self._redirects.take,
            changed=self._topology.changed,
            notice=not wrote_retry_options(options),
            first_list_wait=first_list_wait(agents),
        )
        self._loop = ReconnectLoop(
            state=self._state,
            dialer=self._dialer,
            planner=self._planner,
            schedule=self._schedule,
            clock=self._clock,
            options=options,
            emit=emit,
            name=f"failover-client-loop-{number}",
            canary=self._canary,
            when_flushed=self._consumers.when_flushed,
            ack_handled=self._consumers.ack_handled_on,
        )
        self._parts = Parts(
            state=self._state,
            consumers=self._consumers,
            topology_stop=self._topology.stop,
            sources=len(sources),
            dialer=self._dialer,
            dispatcher=self._dispatcher,
            loop=self._loop,
            clock=self._clock,
            name=f"failover-client-{number}",
        )
        self._finalizer = watch_dropped(self, self._parts, self._guard)

    # --- lifecycle -------------------------------------------------------------------------

    def connect(self, timeout: float | None = None) -> None:
        """Start the reconnect loop and block until the first broker handshakes.

        ``timeout`` bounds the start-up (None: as long as the start-up schedule allows, for
        ever for a failover URI without retry options); past it the connection is closed and
        :class:`AllBrokersFailed` names every broker's last cause, as when the schedule gives
        up. :class:`AuthenticationFailed` / :class:`TLSFailure` when the brokers refuse the
        credentials or the certificate, :class:`ConnectionClosed` when closed meanwhile.
        Calling it again after success returns at once.
        """
        self._guard.check()
        seconds = check_timeout(timeout)
        connection = self._state
        with connection.cond:
            starting = connection.state == "new"
            if starting:
                connection.state = "connecting"
        if starting:
            if seconds is not None:
                self._dialer.limit(seconds)
            self._dispatcher.start()
            # Between passes the loop waits on the shared timer, not on a thread of its own
            # (engine._parking): an idle connection keeps only its adapter's I/O thread.
            self._loop.park(timers_for(self._clock).schedule)
            self._loop.start()
            self._topology.start()
        if not self._clock.wait(self._loop.first_outcome, bounded(seconds)):
            self.close()  # the loop missed its own deadline (a connector ignored its timeout)
            raise self._dialer.expired()
        error = startup_error(connection)
        if error is not None:
            if seconds is not None:
                self.close()  # the caller asked for a bounded start: nothing is left running
            raise error

    start = connect

    def close(self, drain: float = 0.0) -> None:
        """Stop consuming, close sessions, fail waiting sends with ConnectionClosed, end threads.

        Consumption stops first: no acknowledgement is written meanwhile (so the brokers send
        nothing new), handlers keep handling what is buffered for up to ``drain`` seconds,
        running handlers get ``max(drain, 1)`` seconds in all, then the acknowledgements are
        written and every message never handled is handed back to its broker
        (``MessagesReleased``): nothing acknowledged unhandled, nothing lost. A handler that
        never returns is left on its daemon thread with a warning; it does not hold close().

        Safe from any thread (also from a handler or listener) and idempotent. A connect in
        progress is cancelled rather than awaited; topology sources get 2 s to stop. In a
        child forked after the connection was made it does nothing: the sockets and the
        broker's session are the parent's.
        """
        if self._guard.inherited():
            return
        seconds = check_timeout(drain, name="drain")
        self._finalizer.detach()
        self._parts.close(math.inf if seconds is None else seconds)

    def __enter__(self) -> FailoverConnection:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- sends -----------------------------------------------------------------------------

    def send(
        self,
        destination: str,
        body: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float | Unset | None = UNSET,
        confirm: bool = True,
        message_id: str | None = None,
    ) -> None:
        """Send one message and return once the broker confirmed it.

        ``timeout`` (None waits forever) bounds the whole call: the waits to be connected, for
        room and for the confirmation (default: ``options.timeout``; with ``failover_timeout``
        set, Artemis's callFailoverTimeout, that bounds the waits while failing over). Raises
        :class:`SendTimeout` (the message may still arrive later, and is no longer re-sent),
        :class:`SendRejected`, :class:`NotConnected` (before :meth:`connect`),
        :class:`AllBrokersFailed` (the reconnect loop gave up) or :class:`ConnectionClosed`
        (the application closed the connection). After a fail-over an unconfirmed message is
        re-sent automatically (possibly arriving twice, with the same id).

        ``confirm=False`` writes without waiting for a confirmation (fire-and-forget): lost with
        the session unless ``track_messages=True`` (re-sent best-effort while its bytes fit
        ``max_cache_size``, oldest evicted first); an untracked one is never re-sent and carries
        no ``failover-message-id`` header unless ``message_id`` is given.

        ``timeout=0`` means "do not wait": with ``confirm=False`` SendTimeout at once (nothing
        written) when not connected; a ConfigurationError for a confirmed send, which must wait.
        Wrong arguments raise ConfigurationError before anything is written.
        """
        self._guard.check()
        data = check_send(destination, body, headers, message_id)
        deadline = self._sender.deadline(timeout, confirmed=confirm)
        if not confirm:
            kind: Literal["tracked", "untracked"] = (
                "tracked" if self._options.track_messages else "untracked"
            )
            self._sender.submit(
                destination, data, headers, message_id=message_id, kind=kind, deadline=deadline
            )
            return
        self._sender.send_blocking(destination, data, headers, message_id, deadline)

    def send_async(
        self,
        destination: str,
        body: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float | Unset | None = UNSET,
        message_id: str | None = None,
    ) -> Future[None]:
        """Send one message; the future completes when the broker confirms it.

        Blocks (backpressure) while disconnected or while ``confirm_window`` messages /
        ``max_cache_size`` bytes await confirmation, up to ``timeout`` (then SendTimeout).
        Raises what :meth:`send` raises before the write. The future fails with SendRejected,
        ConnectionClosed (closed first) or AllBrokersFailed (the reconnect loop gave up);
        futures cannot be cancelled. Its callbacks run on an adapter thread: keep them short.
        ``timeout`` bounds only the wait before the write (0: fail at once, nothing written).
        """
        self._guard.check()
        data = check_send(destination, body, headers, message_id)
        sender = self._sender
        message = sender.submit_async(destination, data, headers, message_id, timeout)
        assert isinstance(message.future, Future)  # confirmed and not blocking: a future
        return message.future

    def flush(self, timeout: float | Unset | None = UNSET) -> None:
        """Wait until every outstanding confirmation arrived (SendTimeout after ``timeout``)."""
        self._guard.check()
        self._sender.flush(self._sender.deadline(timeout))

    # --- events ----------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Receive every event (on the dispatch thread); exceptions are isolated."""
        self._guard.check()
        check_callable("listener", listener)
        self._listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._guard.check()
        self._listeners.remove(listener)

    # --- topology ----------------------------------------------------------------------------

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        """Merge a broker list pushed by a topology source (see :meth:`BrokerPool.merge`).

        ``action`` defaults to ``options.server_list_action``; ``tiers`` / ``weights`` (by
        broker key) place discovered brokers. ``pushed``: a broker sent the list (ignored under
        ``updateURIsSupported=false``). Emits ``TopologyChanged``. Any thread."""
        self._guard.check()
        self._topology.update(
            update, source=source, action=action, tiers=tiers, weights=weights, pushed=pushed
        )

    def request_rebalance(self, *, source: str) -> None:
        """A broker asked its clients to rebalance (ActiveMQ's ``rebalanceConnection``): turn
        rendezvous placement on and evaluate this client's home at once (a move still waits for
        its turn in ``rebalanceDrainWindow``). Ignored under ``reconnectSupported=false``."""
        self._guard.check()
        self._topology.request_rebalance(source)

    # --- state -----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """new, connecting, connected, reconnecting, switching, failed or closed."""
        self._guard.check()
        return self._state.snapshot()[0]

    @property
    def broker(self) -> str | None:
        """The redacted address of the current broker (None before the first connection)."""
        self._guard.check()
        current = self._state.snapshot()[1]
        return None if current is None else current.broker

    @property
    def options(self) -> FailoverOptions:
        return self._options

    @property
    def pool(self) -> PoolView:
        """The known brokers, read-only: lists change only through :meth:`update_brokers`."""
        return PoolView(self._pool)

    @property
    def client_id(self) -> str:
        return self._client_id

    def health(self) -> Health:
        """Readiness at one moment (see :class:`Health`): ``health().ready``, ``str(health())``."""
        self._guard.check()
        return read_health(self._state, self._canary)

    def stats(self) -> dict[str, int]:
        """Counters: sent, confirmed, rejected, replayed, evicted, failovers, ... in_flight."""
        self._guard.check()
        _, _, stats, in_flight, standbys, subscriptions = self._state.snapshot()
        counters = dict(vars(stats))
        counters.update(in_flight=in_flight, standbys=standbys, subscriptions=subscriptions)
        counters["listener_errors"] = self._listeners.failures
        return counters

    def __repr__(self) -> str:
        if self._guard.inherited():  # no lock: its holder may not exist in this process
            return f"<FailoverConnection made in process {self._guard.pid}, unusable here>"
        state, current, stats, in_flight, standbys, subscriptions = self._state.snapshot()
        broker = current.broker if current is not None else None
        return (
            f"<FailoverConnection {state} broker={broker} sent={stats.sent}"
            f" confirmed={stats.confirmed} in_flight={in_flight} replayed={stats.replayed}"
            f" failovers={stats.failovers} standbys={standbys} subscriptions={subscriptions}>"
        )
