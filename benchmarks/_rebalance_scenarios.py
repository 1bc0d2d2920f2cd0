"""The rebalancing scenarios, run on both fleets at once, and the figures taken from them.

One run on the 4-broker network (indexes 0-3), each fleet with its own client ids:

(a) **join**: broker 3 is stopped, the fleets connect to brokers 0-2, broker 3 starts and the
    brokers' network announces it (ours through their topology sources, Java through the
    brokers' ``ConnectionControl`` push with ``rebalanceClusterClients``).
(b) **stop**: one broker is stopped gracefully (maintenance), then started again.
(c) **kill**: another broker is SIGKILLed, then started again.
(d) **tiers**: new fleets with brokers 0-1 as priority ("local") and 2-3 as "remote"; both
    locals are SIGKILLed, then started again one after the other.

After each step the fleets are left to settle: until no client of either fleet changed broker
for ``quiet`` seconds (more than our drain window) and every client is on a broker, or
``limit`` seconds. Where clients should come back (a restarted broker's own clients, for ours;
everyone to the first local back in (d)) the step also waits for that, up to ``return_limit``:
a client may keep a broker that failed several times in quarantine for a while.

A step's figures count the changes of broker after its start from each client's history, so a
client that moved twice counts as one client moved and two moves.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks._common import log
from benchmarks._rebalance_fleet import Fleet, Snapshot
from failover_client.testing.brokers import Cluster

__all__ = ["Stage", "moved", "spread", "wait_settled"]

LOCALS = (0, 1)
REMOTES = (2, 3)

Done = Mapping[str, Callable[[Snapshot], bool]]
"""Per fleet name: what must hold before a step counts as settled (besides stillness)."""


def all_on(brokers: Sequence[int]) -> Callable[[Snapshot], bool]:
    """Every client is on one of ``brokers``."""
    return lambda snap: all(c in brokers for c in snap.current)


def balanced_on(brokers: Sequence[int]) -> Callable[[Snapshot], bool]:
    """Every client is on one of ``brokers`` and each of them has a client."""
    return lambda snap: all_on(brokers)(snap) and all(spread(snap, brokers))


def wait_settled(
    fleets: Sequence[Fleet],
    since: float,
    *,
    quiet: float,
    limit: float,
    done: Done | None = None,
) -> float:
    """Wait until every fleet is still and complete; returns the seconds it took from ``since``.

    Still: no client changed broker for ``quiet`` seconds (and ``quiet`` passed since ``since``);
    complete: every client is on a broker and ``done[fleet.name]`` (where given) holds for the
    fleet's snapshot. Gives up ``limit`` seconds after ``since``. A poll, because the Java
    clients can only be asked.
    """
    deadline = since + limit
    while True:
        now = time.monotonic()
        still = True
        for fleet in fleets:
            last, connected = fleet.status()
            moving = now - max(last, since) < quiet or connected < fleet.size
            check = (done or {}).get(fleet.name)
            if moving or (check is not None and not check(fleet.snapshot())):
                still = False
        if still or now >= deadline:
            if not still:
                log(f"not settled {limit:g} s after the step started; figures taken as they are")
            return now - since
        time.sleep(0.2)


def spread(snapshot: Snapshot, brokers: Sequence[int]) -> list[int]:
    """Clients on each of ``brokers`` now."""
    counts = Counter(snapshot.current)
    return [counts.get(b, 0) for b in brokers]


def moved(before: Snapshot, after: Snapshot, t0: float) -> dict[str, Any]:
    """Changes of broker after ``t0``: clients that moved, moves, net moves, the last move."""
    times = [[t for t, _ in history if t > t0] for history in after.histories]
    last = max((t for ts in times for t in ts), default=None)
    return {
        "clients_moved": sum(1 for ts in times if ts),
        "moves": sum(len(ts) for ts in times),
        "net_moved": sum(b != a for b, a in zip(before.current, after.current, strict=True)),
        "last_move_s": None if last is None else round(last - t0, 3),
        "movers": [n for n, ts in enumerate(times) if ts],
    }


@dataclass
class Stage:
    """Runs steps on a group of fleets and the harness's cluster they are connected to."""

    cluster: Cluster
    fleets: Sequence[Fleet]
    quiet: float
    limit: float
    return_limit: float
    """How long a step may wait for clients that should return (a quarantine can last)."""
    homing: frozenset[str] = frozenset({"ours"})
    """Fleets whose clients go back to their home broker when it returns."""
    action_s: float = 0.0

    def settle(self, since: float, done: Done | None = None, limit: float = 0) -> float:
        return wait_settled(
            self.fleets, since, quiet=self.quiet, limit=limit or self.limit, done=done
        )

    def snapshots(self) -> list[Snapshot]:
        return [fleet.snapshot() for fleet in self.fleets]

    def step(
        self,
        what: str,
        action: Callable[[], None],
        done: Done | None = None,
        limit: float = 0,
    ) -> tuple[float, list[Snapshot], list[Snapshot], float]:
        """Do ``action`` and settle: (t0, snapshots before, after, seconds to settle).

        ``action_s`` keeps how long the action took (a start: until the broker answered).
        """
        before = self.snapshots()
        t0 = time.monotonic()
        action()
        self.action_s = round(time.monotonic() - t0, 3)
        took = self.settle(t0, done, limit)
        log(f"{what}: action took {self.action_s:.1f} s, settled after {took:.1f} s")
        return t0, before, self.snapshots(), took

    # --- (a) - (c) ---------------------------------------------------------------------------

    def join(self, newcomer: int) -> list[dict[str, Any]]:
        """(a): start ``newcomer``; per fleet the moves, its clients, the spread after."""
        t0, before, after, took = self.step("(a) join", self.cluster[newcomer].start)
        out = []
        for b, a in zip(before, after, strict=True):
            counts = spread(a, range(len(self.cluster)))
            out.append(
                {
                    **moved(b, a, t0),
                    "start_spread": spread(b, range(len(self.cluster))),
                    "spread": counts,
                    "newcomer": counts[newcomer],
                    "broker_ready_s": self.action_s,
                    "settled_s": round(took, 3),
                }
            )
        return out

    def lose(self, victim: int, how: str) -> list[dict[str, Any]]:
        """(b) / (c): stop or kill ``victim``, then start it again; victims vs collateral."""
        broker = self.cluster[victim]
        action = broker.stop if how == "stop" else broker.kill
        t0, before, after, took = self.step(f"({how}) broker {victim}", action)
        live = [i for i in range(len(self.cluster)) if i != victim]
        out = []
        for b, a in zip(before, after, strict=True):
            change = moved(b, a, t0)
            victims = {n for n, where in enumerate(b.current) if where == victim}
            out.append(
                {
                    **change,
                    "victims": len(victims),
                    "collateral": sum(1 for n in change["movers"] if n not in victims),
                    "spread": spread(a, live),
                    "settled_s": round(took, 3),
                }
            )
        # Ours promise that the victims come back to their home: the step waits for them.
        victims_of = [{n for n, where in enumerate(b.current) if where == victim} for b in before]
        back_home = {
            f.name: _all_back(victims, victim)
            for f, victims in zip(self.fleets, victims_of, strict=True)
            if f.name in self.homing
        }
        t0, before, after, took = self.step(
            f"restore broker {victim}", broker.start, back_home, self.return_limit
        )
        for entry, b, a, victims in zip(out, before, after, victims_of, strict=True):
            back = moved(b, a, t0)
            entry["restore"] = {
                "clients_moved": back["clients_moved"],
                "moves": back["moves"],
                "on_restored": spread(a, [victim])[0],
                "victims_back": sum(1 for n in victims if a.current[n] == victim),
                "broker_ready_s": self.action_s,
                "last_move_s": back["last_move_s"],
                "spread": spread(a, range(len(self.cluster))),
                "settled_s": round(took, 3),
            }
        return out

    # --- (d) -----------------------------------------------------------------------------------

    def tiers(self) -> list[dict[str, Any]]:
        """(d): both locals killed, then back one after the other."""
        start = self.snapshots()
        out: list[dict[str, Any]] = [{"start_spread": spread(s, range(4))} for s in start]

        def kill_locals() -> None:
            for i in LOCALS:
                self.cluster[i].kill()

        def every(check: Callable[[Snapshot], bool]) -> Done:
            return {f.name: check for f in self.fleets}

        t0, before, after, took = self.step(
            "(d) both locals killed", kill_locals, every(all_on(REMOTES)), self.return_limit
        )
        for entry, b, a in zip(out, before, after, strict=True):
            change = moved(b, a, t0)
            entry["locals_down"] = {
                "on_remotes": sum(spread(a, REMOTES)),
                "last_move_s": change["last_move_s"],
                "moves": change["moves"],
                "settled_s": round(took, 3),
            }
        first, second = (self.cluster[i] for i in LOCALS)
        t0, before, after, took = self.step(
            "(d) first local back", first.start, every(all_on(LOCALS[:1])), self.return_limit
        )
        for entry, b, a in zip(out, before, after, strict=True):
            change = moved(b, a, t0)
            entry["first_back"] = {
                "on_it": spread(a, LOCALS[:1])[0],
                "last_move_s": change["last_move_s"],
                "moves": change["moves"],
                "detours": _detours(a, t0, LOCALS[0]),
                "broker_ready_s": self.action_s,
                "settled_s": round(took, 3),
            }
        # Java clients on a priority broker ignore rebalance requests (BROKERS.md): only ours
        # are waited for to spread over both locals.
        balanced = {name: balanced_on(LOCALS) for name in self.homing}
        t0, before, after, took = self.step(
            "(d) second local back", second.start, balanced, self.return_limit
        )
        for entry, b, a in zip(out, before, after, strict=True):
            change = moved(b, a, t0)
            entry["second_back"] = {
                "spread": spread(a, LOCALS),
                "on_remotes": sum(spread(a, REMOTES)),
                "last_move_s": change["last_move_s"],
                "moves": change["moves"],
                "broker_ready_s": self.action_s,
                "settled_s": round(took, 3),
            }
        return out


def _all_back(victims: set[int], home: int) -> Callable[[Snapshot], bool]:
    return lambda snap: all(snap.current[n] == home for n in victims)


def _detours(snapshot: Snapshot, t0: float, target: int) -> int:
    """Clients that went anywhere but ``target`` on their way after ``t0``."""
    return sum(
        1 for history in snapshot.histories if any(t > t0 and b != target for t, b in history)
    )
