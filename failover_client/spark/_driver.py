"""The source's driver side: take deliveries, spool them, report offsets, ack after commits.

Spark calls the offset methods of a stream reader in one long-lived process on the driver, in
this order for micro-batch N (measured, see SPARK.md)::

    latestOffset(start=end[N-1])   -> end[N]        plan: spool, then report the new end
    commit(end[N-1])                                Spark committed batch N-1
    partitions(end[N-1], end[N])                    the batch's spool files, for the executors

so :meth:`SourceDriver.latest` spools the buffered deliveries (each batch's file is written
*before* its end offset leaves this process) and :meth:`SourceDriver.commit` acknowledges them
once Spark committed. Two details of the API shape the rest:

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

from failover_client import Message
from failover_client.spark._consumer import Consumer, spooled
from failover_client.spark._ledger import AckLedger
from failover_client.spark._options import SourceOptions
from failover_client.spark._partitions import ids_if_whole, write_parts
from failover_client.spark._spool import Spool, SpoolBatch, SpoolGap

__all__ = ["SourceDriver"]

log = logging.getLogger("failover_client.spark")


class SourceDriver:
    """Spool, ledger and consumer of one running query (see the module docstring)."""

    def __init__(
        self,
        options: SourceOptions,
        spool: Spool,
        consumer: Consumer,
    ) -> None:
        self._options = options
        self.spool = spool
        self.consumer = consumer
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
        messages to take (None: all that are buffered).
        """
        if start is not None:
            if start > self._position:
                raise self._gap(start)
            self.commit(start)
            if self._position > start:
                # Spooled but never planned (the driver died between the spool write and
                # Spark's offset log): that range is the next batch, as it is.
                return self._position
        elif self._planned_end is not None:
            self.commit(self._planned_end)
        self._spool_new(limit)
        return self._position

    def _spool_new(self, limit: int | None) -> None:
        deliveries = self.consumer.take(limit, self._options.receive_timeout)
        if not deliveries:
            return
        admission = self.ledger.admit(deliveries)
        for delivery in admission.ack_now:
            delivery.ack()
        if admission.ack_now or admission.held:
            log.info(
                "failover source: %d redelivered messages were spooled before (%d committed, "
                "acknowledged again; %d wait for their batch)",
                len(admission.ack_now) + admission.held,
                len(admission.ack_now),
                admission.held,
            )
        if not admission.fresh:
            return
        batch = write_parts(
            self.spool, self._position, spooled(admission.fresh), self._options.num_partitions
        )
        self.ledger.spooled(batch.end, admission)
        self._position = batch.end

    def planned(self, start: int, end: int) -> list[SpoolBatch]:
        """The spool files of the batch ``start`` .. ``end`` (SpoolGap if the spool lacks some)."""
        if end > self._position:
            raise self._gap(end)
        batches = self.spool.covering(start, end)
        self._planned_end = end
        return batches

    def commit(self, end: int) -> None:
        """Spark committed every offset below ``end``: record it, then acknowledge."""
        if end <= self.ledger.committed:
            return
        # Durable first: if the acks are lost, the ids on disk still catch the redeliveries.
        self.spool.commit(end, lambda batch: ids_if_whole(batch, self.ledger.ids_of(batch.end)))
        for delivery in self.ledger.commit(end):
            delivery.ack()

    def close(self) -> None:
        """Stop consuming; nothing is acknowledged (the brokers redeliver what was not)."""
        self.consumer.close()

    def _gap(self, offset: int) -> SpoolGap:
        return SpoolGap(
            f"failover source: Spark's checkpoint is at offset {offset}, the spool at "
            f"{self.spool.url} only reaches {self._position}: was the spool deleted, or does "
            "the source's checkpointLocation differ from the query's?",
            option="checkpointLocation",
        )

    def __repr__(self) -> str:
        return f"SourceDriver(position={self._position}, {self.ledger!r}, {self.consumer!r})"
