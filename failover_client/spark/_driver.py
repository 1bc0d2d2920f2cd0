"""The source's driver side: take deliveries, spool them, report offsets, ack after commits.

Spark calls the offset methods of a stream reader in one long-lived process on the driver, in
this order for micro-batch N (measured, see SPARK.md)::

    latestOffset(start=end[N-1])   -> end[N]        plan: spool, then report the new end
    commit(end[N-1])                                Spark committed batch N-1
    partitions(end[N-1], end[N])                    the batch's spool files, for the executors

so :meth:`SourceDriver.latest` spools the buffered deliveries (how many, and whether it waits
for them, is :class:`~failover_client.spark._pacing.Pacer`'s call) (each batch's file is written
*before* its end offset leaves this process) and acknowledges what Spark committed. The brokers'
confirmation that they have those acknowledgements (:data:`ACK_CONFIRM_WAIT` at most, then a
warning) is awaited before this process may end: by the same call when no batch follows it
(idle, the last batch of ``Trigger.AvailableNow``, ``Trigger.Once``'s only one: Spark may end
the process right after, and an ACK still in a socket buffer would be lost, so the next run
would get those messages again), else by the next offset call, a whole batch later, when the
answer has long arrived: waiting for it in the same call cost a quarter to half a second of
every batch (measured, docs/spark.md). A process killed in between loses at most one batch's
ACKs, which a killed driver can lose anyway: the broker redelivers them and the ledger drops
them by id. Two details of the API shape the rest:

* an idle stream never commits its last batch (commit(N) waits for batch N+1), so the start
  offset of every ``latestOffset`` call is taken as committed too: Spark passes the end of
  its last *committed* batch. PySpark 4.0/4.1 pass no start; there the end of the last batch
  whose partitions were planned in this process is taken, as Spark plans a batch only after
  the one before it committed;
* a restarted query (or one whose driver was killed) gets a fresh reader: the position comes
  from the spool, where the end of every batch ever reported is on disk, so Spark never sees
  an offset go backwards (on 4.0/4.1 it would silently re-read old offsets).
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from failover_client import Clock, ConnectionFailure, Message, SettleQuestion, SystemClock
from failover_client.spark._consumer import Consumer
from failover_client.spark._depth import QueueDepth, answers_statistics
from failover_client.spark._ledger import AckLedger
from failover_client.spark._options import SourceOptions
from failover_client.spark._pacing import Pacer, Step
from failover_client.spark._partitions import ids_if_whole, write_parts
from failover_client.spark._rows import spool_table
from failover_client.spark._spool import Spool, SpoolBatch, SpoolGap

__all__ = ["ACK_CONFIRM_WAIT", "DEPTH_REFRESH", "DEPTH_WAIT", "RECONNECT_WAIT", "SourceDriver"]

log = logging.getLogger("failover_client.spark")

DEPTH_WAIT = 5.0
"""How long AvailableNow's start waits for the broker's queue depth (then: drain until quiet)."""

DEPTH_REFRESH = 1.0
"""Seconds between the queue-depth questions behind the progress's lag figures."""

ACK_CONFIRM_WAIT = 30.0
"""How long a commit (and ``close``) waits for the brokers to confirm its acknowledgements.

A broker handles a batch's ACKs in well under a second; past this it is hung or cut off, and
the commit returns with a warning rather than hold the query (the acknowledgements may still
arrive; if not, the broker redelivers those messages and the ledger drops them by id)."""

RECONNECT_WAIT = 120.0
"""How long ``Trigger.AvailableNow`` / ``Once`` wait for a failing-over connection to come back.

They end when the broker is quiet for ``receiveTimeout``; while the connection is down, quiet
says nothing about the queue, and ending then would report success with the backlog still on
the broker. Past this the query fails instead. 120 s is ``spark.network.timeout``'s default,
which Spark's Kafka source waits for a poll before it fails a batch."""


class SourceDriver:
    """Spool, ledger and consumer of one running query (see the module docstring)."""

    def __init__(
        self,
        options: SourceOptions,
        spool: Spool,
        consumer: Consumer,
        *,
        depth: QueueDepth | None = None,
        clock: Clock | None = None,
        acker: Executor | None = None,
    ) -> None:
        self._options = options
        self.spool = spool
        self.consumer = consumer
        self._depth = depth
        self._clock = clock or SystemClock()
        self._pacer = Pacer(options, self._clock)
        self._acknowledged = 0
        self._unconfirmed: list[Message] = []
        """ACKs written and not yet asked to be confirmed (copies of committed messages,
        acknowledged on arrival): asked with the next commit or at close."""
        self._depth_asked: float | None = None
        self._acker = acker or ThreadPoolExecutor(1, thread_name_prefix="failover-source-acks")
        """Writes each committed batch's ACKs, one batch after the other (tests: inline)."""
        self._confirming: _Asked | None = None
        """Asked by the last plan: awaited by the next offset call (or ``close``)."""
        state = spool.state()
        self.ledger: AckLedger[Message] = AckLedger(
            committed=state.committed_end, retained=spool.retained
        )
        # Ids of what is on disk: redeliveries of spooled messages are recognised after a
        # restart too.
        self.ledger.restore(
            [(b.end, spool.ids(b)) for b in state.batches],
            [(b.end, spool.committed_ids(b)) for b in state.committed],
        )
        self._position = state.position
        self._planned_end: int | None = None
        if state.batches:
            log.info(
                "failover source: spool %s holds %d uncommitted batches (offsets %d..%d); "
                "Spark replays or plans them, redeliveries of them are dropped by id",
                spool.url,
                len(state.batches),
                state.batches[0].start,
                state.position - 1,
            )

    @property
    def position(self) -> int:
        """The end of the last spooled batch."""
        return self._position

    def initial(self) -> int:
        """Where a query without offsets in its checkpoint starts: after the last commit."""
        return self.ledger.committed

    def latest(self, start: int | None, limit: int | None) -> int:
        """Plan the next batch; returns its end (``start`` / the position when nothing came).

        ``start`` is what Spark passes on 4.2+ (None on 4.0/4.1), ``limit`` the most new
        messages to take (None: Spark's ``ReadAllAvailable``).
        """
        if start is not None and start > self._position:
            raise self._gap(start)
        committed = start if start is not None else self._planned_end
        timer = _Timer(self._clock)
        # Asked a whole batch ago: the brokers answered long since.
        earlier, self._confirming = self._confirming, None
        self._await(earlier)
        # The batch before is acknowledged first (the broker's window opens for the next);
        # the brokers work through the ACKs while this batch is spooled and run.
        asked = None if committed is None else self._acknowledge(committed)
        timer.lap("acknowledge")
        before = self._position
        try:
            if start is not None and self._position > start:
                # Spooled but never planned (the driver died between the spool write and
                # Spark's offset log): that range is the next batch, as it is.
                return self._position
            # A batch held back takes nothing: a connection that gave up must still fail it.
            self.consumer.check()
            step = self._pacer.step(self._position, limit, self.consumer.buffered())
            while step is not None:
                received = self._spool_new(step, timer)
                self._pacer.planned(self._position, received, step)
                self._short_of_target()
                if not received or self._position > before or not _drains(step):
                    break
                # Only copies of spooled messages (redelivered after a fail-over): Spark ends
                # AvailableNow / Once on an offset that did not move, so take on.
                step = self._pacer.step(self._position, limit, self.consumer.buffered())
            return self._position
        finally:
            if asked is not None and self._position > before and self._continues(limit):
                # A batch follows, and with it the next offset call: its confirmation is
                # awaited there, off this batch's critical path.
                self._confirming = asked
            else:
                # Idle, or the last batch of AvailableNow / Once: Spark may end this process
                # after this call, and an ACK still in a socket buffer would be lost.
                self._await(asked)
            timer.lap("await")
            log.debug(
                "failover source timeline: latestOffset %d..%d (%d buffered) %s",
                before,
                self._position,
                self.consumer.buffered(),
                timer,
            )

    def _continues(self, limit: int | None) -> bool:
        """Whether another offset call surely follows the batch just planned.

        Not after AvailableNow's last batch, nor after Trigger.Once's only one (``limit``
        None, Spark's ``ReadAllAvailable``): Spark may end this process once it ran.
        """
        return limit is not None and not self._pacer.done

    def prepare_available_now(self) -> None:
        """Fix Trigger.AvailableNow's target: what the broker holds now, else until quiet."""
        depth = self._depth_now()
        target = None
        if depth is not None:
            # The depth counts what waits for a commit too: that is spooled already.
            target = self._position + max(0, depth - self.ledger.pending())
        self._pacer.prepare_available_now(self._position, target)
        log.info(
            "failover source: Trigger.AvailableNow from offset %d %s",
            self._position,
            "until the broker delivers nothing for receiveTimeout"
            if target is None
            else f"to offset {target} (queue depth {depth})",
        )

    def lag(self) -> dict[str, int]:
        """What Spark reports as the source's latest offset: the position and how it is made.

        ``position`` is where the spool would end with everything known spooled: the buffered
        deliveries and, where the broker tells its queue depth, what it has not delivered yet.
        """
        buffered = self.consumer.buffered()
        pending = self.ledger.pending()
        report = {
            "position": self._position + buffered,
            "spooled": self._position,
            "committed": self.ledger.committed,
            "buffered": buffered,
            "pendingCommit": pending,
            "acknowledged": self._acknowledged,
        }
        depth = self._recent_depth()
        if depth is not None:
            report["brokerDepth"] = depth
            report["position"] += max(0, depth - pending - buffered)
        return report

    def _depth_now(self) -> int | None:
        if self._depth is None:
            return None
        if self.consumer.product() is None:
            # The product is learnt from a delivery: an empty queue answers nothing here.
            self.consumer.wait_delivery(self._options.receive_timeout)
        if not answers_statistics(self.consumer.product()):
            return None
        return self._depth.ask(DEPTH_WAIT)

    def _recent_depth(self) -> int | None:
        if self._depth is None or not answers_statistics(self.consumer.product()):
            return None
        now = self._clock.monotonic()
        if self._depth_asked is None or now - self._depth_asked >= DEPTH_REFRESH:
            self._depth_asked = now
            self._depth.request()  # answered later; the newest answer is reported meanwhile
        return self._depth.latest()

    def _short_of_target(self) -> None:
        target = self._pacer.target
        if self._pacer.done and target is not None and self._position < target:
            # Connected and quiet for receiveTimeout, yet short of the depth the broker gave at
            # the start: another consumer took them, or they expired or were moved. The last
            # step (no step follows a done pacer), so this is said once.
            log.warning(
                "failover source: Trigger.AvailableNow ends at offset %d, %d short of the "
                "target %d (the queue's depth at the start): the broker delivered nothing more "
                "for receiveTimeout while connected (another consumer, expiry, or a "
                "dead-letter move took them)",
                self._position,
                target - self._position,
                target,
            )

    def _first(self, step: Step) -> list[Message]:
        """A step's first take. A drain's quiet counts only while the connection was up.

        ``Trigger.AvailableNow`` / ``Once`` end on a take quiet for ``receiveTimeout``; a
        take that saw the connection down at its start or end is repeated instead, for
        :data:`RECONNECT_WAIT` at most, then the query fails naming what was left.
        """
        if not _drains(step):
            return self.consumer.take(step.limit, step.wait, step.max_bytes)
        down_since: float | None = None
        while True:
            up = self.consumer.connected()
            taken = self.consumer.take(step.limit, step.wait, step.max_bytes)
            if taken or (up and self.consumer.connected()):
                return taken
            now = self._clock.monotonic()
            if down_since is None:
                down_since = now
                log.warning(
                    "failover source: the connection is %s; the drain waits for it (%.0f s "
                    "at most) before it takes the broker's quiet as the end of the queue",
                    self.consumer.state(),
                    RECONNECT_WAIT,
                )
            elif now - down_since >= RECONNECT_WAIT:
                target = self._pacer.target
                left = (
                    "" if target is None else f", {target - self._position:,} short of {target:,}"
                )
                raise ConnectionFailure(
                    f"the failover source's drain (Trigger.AvailableNow / Once) stopped at "
                    f"offset {self._position}{left}: the connection has been "
                    f"{self.consumer.state()} for {now - down_since:.0f} s; failing the query "
                    "rather than ending it with messages left on the broker (a restarted query "
                    "goes on from its checkpoint)"
                )

    def _take(self, step: Step) -> list[Message]:
        taken = self._first(step)
        if not step.drain or not taken:
            return taken
        size = sum(len(m.body) for m in taken)
        until = None if step.within is None else self._clock.monotonic() + step.within
        while step.limit is None or len(taken) < step.limit:
            room = None if step.max_bytes is None else step.max_bytes - size
            if room is not None and room <= 0:
                break
            wait = step.wait
            if until is not None:
                wait = min(wait, until - self._clock.monotonic())
                if wait <= 0:
                    break
            wanted = None if step.limit is None else step.limit - len(taken)
            more = self.consumer.take(wanted, wait, room, whole=False)
            if not more:
                break
            taken += more
            size += sum(len(m.body) for m in more)
        return taken

    def _spool_new(self, step: Step, timer: _Timer) -> int:
        """Spool what ``step`` takes; returns the deliveries taken (copies included)."""
        deliveries = self._take(step)
        timer.lap("take")
        if not deliveries:
            return 0
        admission = self.ledger.admit(deliveries)
        if admission.ack_now:
            self._unconfirmed += self.consumer.acknowledge(admission.ack_now)
            self._acknowledged += len(admission.ack_now)
        if admission.ack_now or admission.held:
            log.info(
                "failover source: %d redelivered messages were spooled before (%d committed, "
                "acknowledged again; %d wait for their batch)",
                len(admission.ack_now) + admission.held,
                len(admission.ack_now),
                admission.held,
            )
        if not admission.fresh:
            return len(deliveries)
        rows = spool_table(admission.fresh, admission.fresh_ids)
        timer.lap("rows")
        batch = write_parts(self.spool, self._position, rows, self._options.num_partitions)
        timer.lap("spool")
        self.ledger.spooled(batch.end, admission)
        self._position = batch.end
        return len(deliveries)

    def planned(self, start: int, end: int) -> list[SpoolBatch]:
        """The spool files of the batch ``start`` .. ``end`` (SpoolGap if the spool lacks some)."""
        if end > self._position:
            raise self._gap(end)
        timer = _Timer(self._clock)
        batches = self.spool.covering(start, end)
        self._planned_end = end
        log.debug("failover source timeline: partitions %d..%d %s", start, end, timer.lap("list"))
        return batches

    def commit(self, end: int) -> None:
        """Spark committed every offset below ``end``: record it, acknowledge, await the brokers.

        Returns once the brokers confirmed the acknowledgements it wrote (see the module
        docstring); usually the plan before acknowledged them already and this does nothing.
        """
        timer = _Timer(self._clock)
        asked = self._acknowledge(end)
        timer.lap("acknowledge")
        if asked is not None:
            # Acknowledged here, not by the plan before (PySpark 4.0 / 4.1, or a commit past
            # it): confirmed now, with whatever the plan left to confirm.
            earlier, self._confirming = self._confirming, None
            self._await(earlier)
        self._await(asked)
        log.debug("failover source timeline: commit %d %s", end, timer.lap("await"))

    def _acknowledge(self, end: int) -> _Asked | None:
        """Record the commit of offsets below ``end`` and acknowledge them; ask the brokers to
        confirm every acknowledgement not yet confirmed (returned, with their count)."""
        done: list[Message] = []
        if end > self.ledger.committed:
            # Durable first: if the acks are lost, the ids on disk still catch the redeliveries.
            self.spool.commit(end, lambda batch: ids_if_whole(batch, self.ledger.ids_of(batch.end)))
            done = self.ledger.commit(end)
            self._acknowledged += len(done)
        written, self._unconfirmed = self._unconfirmed, []
        if not done and not written:
            return None
        # Written by the acknowledging thread, off the plan's critical path: Spark's JVM plans
        # and runs the batch meanwhile (measured, docs/spark.md).
        asked = self._acker.submit(self._ack_and_ask, done, written)
        return _Asked(asked, len(done) + len(written), end)

    def _ack_and_ask(self, done: list[Message], written: list[Message]) -> SettleQuestion:
        """Acknowledge ``done`` (cumulatively: a few ACK frames) and ask the brokers to
        confirm those and the ACKs ``written`` before; runs on the acknowledging thread."""
        return self.consumer.ask([*written, *self.consumer.acknowledge(done)])

    def _await(self, asked: _Asked | None, what: str | None = None) -> None:
        """Wait (at most :data:`ACK_CONFIRM_WAIT`) for the brokers' answer; warn if incomplete."""
        if asked is None:
            return
        count = asked.count
        what = what or f"the commit of offsets below {asked.end}"
        try:
            question = asked.written.result(ACK_CONFIRM_WAIT)
        except FutureTimeout:
            log.warning(
                "failover source: %s: %d acknowledgements are not written after %.0f s (the "
                "connection is stuck); what a broker did not get it delivers again, and the "
                "source drops it by id as a copy of a committed one",
                what,
                count,
                ACK_CONFIRM_WAIT,
            )
            return
        outcome = question.wait(ACK_CONFIRM_WAIT)
        if outcome.complete:
            return
        log.warning(
            "failover source: %s (%d messages): the brokers confirmed %d of %d acknowledgements; "
            "%d went with a lost connection, %d have no answer after %.0f s (%s). What a "
            "broker did not get it delivers again, and the source drops it by id as a copy of a "
            "committed one",
            what,
            count,
            outcome.confirmed,
            outcome.confirmed + outcome.lost + outcome.unconfirmed,
            outcome.lost,
            outcome.unconfirmed,
            ACK_CONFIRM_WAIT,
            "; ".join(outcome.causes),
        )

    def close(self) -> None:
        """Stop consuming, once the acknowledgements already written are confirmed.

        Only uncommitted deliveries stay unacknowledged: the brokers redeliver them.
        """
        try:
            earlier, self._confirming = self._confirming, None
            self._await(earlier)
            self._await(self._acknowledge(self.ledger.committed), "closing")
        finally:
            self._acker.shutdown(wait=False)  # its work was awaited above, or is stuck
            self.consumer.close()

    def _gap(self, offset: int) -> SpoolGap:
        return SpoolGap(
            f"failover source: Spark's checkpoint is at offset {offset}, the spool at "
            f"{self.spool.url} only reaches {self._position}: was the spool deleted, or does "
            "the source's checkpointLocation differ from the query's?",
            option="checkpointLocation",
        )

    def __repr__(self) -> str:
        return (
            f"SourceDriver(position={self._position}, {self.ledger!r}, {self._pacer!r}, "
            f"{self.consumer!r})"
        )


@dataclass(frozen=True)
class _Asked:
    """A confirmation asked for: ``count`` acknowledgements, of offsets below ``end``."""

    written: Future[SettleQuestion]
    """Done once the acknowledging thread wrote the ACKs and asked for their confirmation."""
    count: int
    end: int


class _Timer:
    """Milliseconds spent in each step of one offset call, for the DEBUG timeline."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._last = clock.monotonic()
        self._laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> _Timer:
        """Record the time since the last lap as ``name``; returns itself (to log)."""
        now = self._clock.monotonic()
        self._laps.append((name, now - self._last))
        self._last = now
        return self

    def __str__(self) -> str:
        return " ".join(f"{name}={seconds * 1000:.0f}ms" for name, seconds in self._laps)


def _drains(step: Step) -> bool:
    """A step of AvailableNow / Once: it ends the query when it is quiet (or does not move)."""
    return step.drain and step.within is None
