"""The end-of-run numbers: sent, confirmed, received, lost, duplicates, failover times, and
where the fleet was at each step of the script (and who moved when a broker joined)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from failover_client.cli._output import Table

from ._fleet import FleetSummary, fleet_summary
from ._record import FailoverTime, Snapshot

__all__ = ["Summary", "summarize", "summary_tables"]


@dataclass(frozen=True)
class Summary:
    """What the run proved. ``lost`` holds confirmed ids found nowhere (must be empty)."""

    sent: int
    confirmed: int
    unconfirmed: int
    received: int
    drained: int
    lost: tuple[str, ...]
    duplicates: int
    failovers: tuple[FailoverTime, ...]
    fleet: FleetSummary | None = None
    """The idle clients' story (None when the run had no fleet)."""

    @property
    def ok(self) -> bool:
        """No confirmed message was lost."""
        return not self.lost


def summarize(
    snapshot: Snapshot, drained_ids: Iterable[str], *, labels: Sequence[str] = ()
) -> Summary:
    """Check every confirmed id against the consumer's deliveries and the final drain.

    A confirmed message counts as delivered when the consumer got it, or when it still sat on
    a broker at the end (found by draining every broker). Every delivery of an id after its
    first one, consumer and drain together, is a duplicate (at-least-once re-sends).
    ``labels`` orders the brokers in the fleet's table.
    """
    drained = list(drained_ids)
    deliveries = Counter(message_id for _, message_id, _ in snapshot.received)
    deliveries.update(drained)
    confirmed_ids = [message_id for _, message_id, _ in snapshot.confirmed]
    lost = tuple(sorted((m for m in set(confirmed_ids) if m not in deliveries), key=_order))
    duplicates = sum(count - 1 for count in deliveries.values())
    return Summary(
        sent=snapshot.sent,
        confirmed=len(set(confirmed_ids)),
        unconfirmed=len(snapshot.unconfirmed),
        received=len(snapshot.received),
        drained=len(drained),
        lost=lost,
        duplicates=duplicates,
        failovers=snapshot.failovers,
        fleet=fleet_summary(snapshot, labels),
    )


def _order(message_id: str) -> tuple[str, int]:
    # Ids are "<prefix>-<n>": sort numerically so the first lost ids print first.
    prefix, _, number = message_id.rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (message_id, -1)


def summary_tables(summary: Summary) -> list[Table]:
    """The summary and the failover times (then the fleet's, if any), as tables."""
    counts = Table(
        "summary",
        ("sent", "confirmed", "not confirmed", "received", "left on brokers", "lost", "duplicates"),
        (
            (
                str(summary.sent),
                str(summary.confirmed),
                str(summary.unconfirmed),
                str(summary.received),
                str(summary.drained),
                str(len(summary.lost)),
                str(summary.duplicates),
            ),
        ),
    )
    moves = Table(
        "failovers",
        ("at s", "client", "from", "to", "kind", "ms"),
        tuple(
            (f"{f.t:.1f}", f.client, f.from_label, f.to_label, f.kind, f"{f.ms:.0f}")
            for f in summary.failovers
        ),
    )
    tables = [counts, moves]
    if summary.fleet is not None:
        tables += fleet_tables(summary.fleet)
    return tables


def fleet_tables(fleet: FleetSummary) -> list[Table]:
    """Fleet clients per broker at each step, and the moves that were not failovers."""
    where = Table(
        f"fleet: {fleet.size} idle clients (rebalance=true) per broker",
        ("when", "at s", *fleet.labels),
        tuple((name, f"{t:.1f}", *(str(c) for c in counts)) for name, t, counts in fleet.rows),
    )
    placed = Table(
        "fleet: rebalancing and priority moves (failovers after a loss not listed)",
        ("at s", "client", "from", "to", "why"),
        tuple(
            (f"{m.t:.1f}", m.client, m.from_label, m.to_label, m.kind)
            for m in fleet.moves
            if m.kind != "failover"
        ),
    )
    return [where, placed]
