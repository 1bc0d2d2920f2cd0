"""The fleet: idle clients that make rebalancing visible, and the sums over what they did.

Each fleet client is a :class:`~failover_client.FailoverConnection` with ``rebalance=true`` and
a stable client id (``fleet-01`` ...) that sends and receives nothing: it connects, follows the
brokers, and is counted per broker. Rendezvous hashing gives every client a *home* that depends
only on its id and the brokers' addresses (:func:`homes`, the score the library's rebalancer
uses), so before a broker joins the demo can name the clients that must move to it (about 1/N
of the fleet) and afterwards show that exactly those did, and nobody else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from failover_client import (
    Connected,
    Disconnected,
    Event,
    FailedOver,
    PriorityRestored,
    Rebalanced,
    TopologyChanged,
)
from failover_client.policies import weighted_rendezvous_score

from ._live import View
from ._record import Join, Move, Recorder, Snapshot

__all__ = [
    "FLEET_SIZE",
    "FleetEvents",
    "FleetSummary",
    "JoinOutcome",
    "fleet_ids",
    "fleet_summary",
    "homes",
    "tally",
]

FLEET_SIZE = 12
"""Idle clients by default: enough that a join visibly moves about a quarter of them."""

NOWHERE = "-"
"""The label of a fleet client that is on no broker (between brokers, or closed)."""


def fleet_ids(size: int) -> tuple[str, ...]:
    """Stable client ids ``fleet-01`` ... ``fleet-<size>``."""
    width = max(2, len(str(size)))
    return tuple(f"fleet-{number:0{width}d}" for number in range(1, size + 1))


def homes(clients: Iterable[str], brokers: Mapping[str, str]) -> dict[str, str]:
    """Each client's rendezvous home among ``brokers`` (label -> ``host:port`` key).

    The score is the library's (:func:`~failover_client.policies.weighted_rendezvous_score`,
    weight 1), so this is where ``rebalance=true`` puts each client when exactly these brokers
    are live in its best tier.
    """
    if not brokers:
        return {}
    return {
        client: max(brokers, key=lambda name: weighted_rendezvous_score(client, brokers[name], 1.0))
        for client in clients
    }


class FleetEvents:
    """Listener of one fleet client: its place, its moves, and the brokers it learns of.

    Moves become event lines (the audience sees who moved where, and why); a newly learned
    broker is told once when the first fleet client learns of it and once when all have.
    """

    def __init__(
        self,
        client: str,
        recorder: Recorder,
        view: View,
        label: Callable[[str | None], str],
        size: int,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._view = view
        self._label = label
        self._size = size
        self._placed = False

    def __call__(self, event: Event) -> None:
        label, recorder = self._label, self._recorder
        if isinstance(event, Connected):
            # Only the first connect places the client here: every later Connected is followed
            # by the move that explains it (FailedOver, Rebalanced, PriorityRestored), which
            # places the client with the move, so nobody sees the place without the move.
            if not self._placed:
                self._placed = True
                recorder.position(self._client, label(event.broker))
        elif isinstance(event, Disconnected):
            recorder.position(self._client, NOWHERE)
        elif isinstance(event, FailedOver):
            self._moved(label(event.from_broker), label(event.to_broker), "failover")
        elif isinstance(event, PriorityRestored):
            self._moved(label(event.from_broker), label(event.to_broker), "priority return")
        elif isinstance(event, Rebalanced):
            self._moved(label(event.from_broker), label(event.to_broker), "rebalance")
        elif isinstance(event, TopologyChanged):
            for address in event.added:
                name = label(address)
                known = recorder.learned(self._client, name, event.source)
                if known == 1:
                    self._say(f"first fleet client learned of {name} ({event.source})")
                elif known == self._size:
                    self._say(f"all {self._size} fleet clients know {name} now ({event.source})")

    def _moved(self, old: str, new: str, kind: str) -> None:
        if kind == "rebalance":
            self._recorder.move(self._client, old, new, "rebalance")
            text = f"rebalanced {old} -> {new} (its rendezvous home)"
        elif kind == "priority return":
            self._recorder.move(self._client, old, new, "priority return")
            text = f"back on the preferred tier {old} -> {new}"
        else:
            self._recorder.move(self._client, old, new, "failover")
            text = f"failed over {old} -> {new}"
        self._view.event(self._recorder.event(self._client, text))

    def _say(self, text: str) -> None:
        self._view.event(self._recorder.event("fleet", text))


# --- sums over a run (pure) ------------------------------------------------------------------


def tally(positions: Iterable[tuple[float, str, str]], at: float) -> Counter[str]:
    """Fleet clients per broker label at time ``at`` (the last place of each client before it)."""
    where: dict[str, str] = {}
    for t, client, label in positions:
        if t <= at:
            where[client] = label
    return Counter(where.values())


@dataclass(frozen=True)
class JoinOutcome:
    """What a join did to the fleet: who was predicted to move to the new broker, who did."""

    label: str
    t: float
    fleet: int
    predicted: tuple[str, ...]
    moved: tuple[str, ...]
    """Fleet clients that moved to the new broker after it was started."""
    homeward: tuple[Move, ...]
    """Moves after the start to the client's own home, another broker: returns still under
    way from an earlier step (a broker that restarted just before), not the join's doing."""
    others: tuple[Move, ...]
    """Every other move after the start: none is expected."""
    learned_after: float | None
    """Seconds from the start until every fleet client knew the new broker (None: not all)."""

    def describe(self) -> str:
        """One line for the end of the run, e.g. ``join D: 3 of 12 fleet clients moved ...``."""
        moved = ", ".join(self.moved) or "none"
        predicted = ", ".join(self.predicted) or "none"
        learned = (
            f"every fleet client knew {self.label} {self.learned_after:.1f} s after its start"
            if self.learned_after is not None
            else f"not every fleet client learned of {self.label}"
        )
        homeward = ""
        if self.homeward:
            homeward = (
                f"; {len(self.homeward)} still returning to their own homes from an earlier "
                f"step ({_moves(self.homeward)})"
            )
        return (
            f"join {self.label}: {len(self.moved)} of {self.fleet} fleet clients moved to "
            f"{self.label} ({moved}); rendezvous hashing predicted {len(self.predicted)} "
            f"({predicted}); {len(self.others)} other moves"
            f"{': ' + _moves(self.others) if self.others else ''}{homeward}; {learned}"
        )


def _moves(moves: Iterable[Move]) -> str:
    return ", ".join(f"{m.client} {m.from_label} -> {m.to_label}" for m in moves)


def _join_outcome(snapshot: Snapshot, join: Join, until: float) -> JoinOutcome:
    home = dict(join.homes)
    after = [m for m in snapshot.moves if join.t <= m.t <= until]
    moved = tuple(sorted({m.client for m in after if m.to_label == join.label}))
    rest = [m for m in after if m.to_label != join.label]
    homeward = tuple(m for m in rest if m.to_label == home.get(m.client))
    others = tuple(m for m in rest if m.to_label != home.get(m.client))
    first: dict[str, float] = {}
    for t, client, label, _ in snapshot.learned:
        if label == join.label and t >= join.t:
            first.setdefault(client, t)
    learned_after = max(first.values()) - join.t if len(first) == join.fleet else None
    return JoinOutcome(
        join.label, join.t, join.fleet, join.predicted, moved, homeward, others, learned_after
    )


@dataclass(frozen=True)
class FleetSummary:
    """Fleet clients per broker at each scenario action and at the end, and every move."""

    size: int
    labels: tuple[str, ...]
    rows: tuple[tuple[str, float, tuple[int, ...]], ...]
    """(moment, time, clients per label in ``labels`` order) just before each action, and at
    the end."""
    moves: tuple[Move, ...]
    joins: tuple[JoinOutcome, ...]


def _moments(snapshot: Snapshot, end: float) -> list[tuple[str, float]]:
    """(name, time) of the rows of the fleet's table: each action, each join, the end."""
    moments = [(f"before join {j.label}", j.t) for j in snapshot.joins if j.t <= end]
    for mark in snapshot.marks:
        if mark.t > end or mark.action in ("joined", "up"):
            continue  # a join's or start's row is taken before the broker starts
        moments.append((f"before {mark.action} {mark.label}", mark.t))
    return [*sorted(moments, key=lambda m: m[1]), ("end", end)]


def fleet_summary(snapshot: Snapshot, labels: Sequence[str] = ()) -> FleetSummary | None:
    """The fleet's story in ``snapshot`` (None when the run had no fleet).

    ``labels`` orders the columns; by default every broker a fleet client was on or that
    joined, in label order.
    """
    clients = {client for _, client, _ in snapshot.positions}
    if not clients:
        return None
    if not labels:
        seen = {label for _, _, label in snapshot.positions} | {j.label for j in snapshot.joins}
        labels = sorted(seen - {NOWHERE})
    end = snapshot.ended if snapshot.ended is not None else snapshot.t
    moments = _moments(snapshot, end)
    shown = tuple(labels) + ((NOWHERE,) if _ever_nowhere(snapshot, moments) else ())
    rows = []
    for name, t in moments:
        counts = tally(snapshot.positions, t)
        rows.append((name, t, tuple(counts.get(label, 0) for label in shown)))
    joins = []
    for join in snapshot.joins:
        # Until the next action: what follows it is that action's doing.
        later = [
            m.t
            for m in snapshot.marks
            if m.t > join.t and (m.action, m.label) != ("joined", join.label)
        ]
        joins.append(_join_outcome(snapshot, join, min([end, *later])))
    moves = tuple(m for m in snapshot.moves if m.t <= end)
    return FleetSummary(len(clients), shown, tuple(rows), moves, tuple(joins))


def _ever_nowhere(snapshot: Snapshot, moments: Sequence[tuple[str, float]]) -> bool:
    return any(tally(snapshot.positions, t).get(NOWHERE, 0) for _, t in moments)
