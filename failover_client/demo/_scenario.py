"""The demo's scripts: what happens to which broker, and when (pure data, no I/O).

``full`` and ``quick`` play every kind of trouble on a network of three brokers and end with a
fourth joining; ``tiers`` shows priority tiers: two "local" brokers the clients prefer and two
"remote" ones they use only while no local one is up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "SCENARIOS",
    "Action",
    "Scenario",
    "Step",
    "full_scenario",
    "quick_scenario",
    "tiers_scenario",
]

Action = Literal["kill", "hang", "resume", "start", "add"]
"""kill = SIGKILL, hang = SIGSTOP, resume = SIGCONT, start = start a dead broker again,
add = start a broker the clients do not know yet; they learn of it through a topology source."""

ACTIONS: tuple[Action, ...] = ("kill", "hang", "resume", "start", "add")

ROLES = ("producer", "consumer", "hung", "dead")
"""Targets resolved when the step runs: the broker that client is connected to at that moment,
the broker hung most recently (still hung), or the broker that has been dead longest."""


@dataclass(frozen=True)
class Step:
    """At ``at`` seconds after traffic starts, do ``action`` to ``target``.

    ``target`` is a broker label (``A``..``D``) or a role resolved when the step runs
    (:data:`ROLES`). ``add`` needs a label: the new broker's. ``note`` says what the audience
    should see.
    """

    at: float
    action: Action
    target: str
    note: str

    def __post_init__(self) -> None:
        if self.at < 0:
            raise ValueError(f"step {self.action} {self.target}: at={self.at} is before the start")
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}; known: {', '.join(ACTIONS)}")
        if self.target not in ROLES and not (len(self.target) == 1 and self.target.isupper()):
            raise ValueError(
                f"step target {self.target!r}: use a broker label (A, B, ...) or one of "
                + ", ".join(ROLES)
            )
        if self.action == "add" and self.target in ROLES:
            raise ValueError(f"add {self.target!r}: name the new broker's label (e.g. D)")


@dataclass(frozen=True)
class Scenario:
    """Steps in time order; traffic runs for ``duration`` s, then ``settle`` s to catch up."""

    name: str
    steps: tuple[Step, ...]
    duration: float
    settle: float
    brokers: int = 3
    """Brokers the clients know at the start (an ``add`` step brings one more)."""
    priority: tuple[str, ...] = ()
    """Labels of the preferred ("local") brokers: every client then connects with
    ``priorityBackup=true&priorityURIs=<these>&rebalance=true``. Empty: the producer prefers
    the first broker, the consumer has no preference, the fleet rebalances over all."""

    def __post_init__(self) -> None:
        times = [s.at for s in self.steps]
        if times != sorted(times):
            raise ValueError(f"scenario {self.name!r}: steps are not in time order")
        late = [s for s in self.steps if s.at >= self.duration]
        if late:
            raise ValueError(
                f"scenario {self.name!r}: step at {late[0].at} s is not before the end "
                f"({self.duration} s)"
            )
        if self.settle < 0:
            raise ValueError(f"scenario {self.name!r}: settle must be >= 0")
        known = {label(i) for i in range(self.brokers)}
        strange = [p for p in self.priority if p not in known]
        if strange or len(self.priority) >= self.brokers:
            raise ValueError(
                f"scenario {self.name!r}: priority {list(self.priority)} must name some, not "
                f"all, of the brokers known at the start ({', '.join(sorted(known))})"
            )

    @property
    def total_brokers(self) -> int:
        """Brokers the cluster needs: the initial ones plus one per ``add``."""
        return self.brokers + sum(1 for s in self.steps if s.action == "add")

    def added_labels(self) -> tuple[str, ...]:
        """Labels of the brokers the ``add`` steps bring, in order (D, E, ...)."""
        return tuple(s.target for s in self.steps if s.action == "add")


def label(index: int) -> str:
    """Broker label for position ``index``: A, B, C, ..."""
    return chr(ord("A") + index)


def full_scenario() -> Scenario:
    """About 45 s of traffic: every kind of trouble once, then priority return and a new broker."""
    return Scenario(
        "full",
        (
            Step(5, "kill", "producer", "producer's broker dies: the producer fails over"),
            Step(11, "hang", "consumer", "consumer's broker hangs: heart-beats notice it"),
            Step(17, "resume", "hung", "the hung broker wakes up"),
            Step(20, "start", "dead", "the priority broker returns: the producer moves back"),
            Step(27, "kill", "consumer", "consumer's broker dies"),
            Step(32, "start", "dead", "the dead broker restarts"),
            Step(36, "add", "D", "a fourth broker joins the network"),
        ),
        duration=42,
        settle=10,
    )


def quick_scenario() -> Scenario:
    """About 20 s of traffic: kill, hang, resume, priority return, a new broker.

    The join comes 6 s after the restart, so the fleet is usually back home before it (a
    restart of 1-4 s, a quarantine of at most 1 s, a move within the 2 s drain window); a
    return still under way is reported as such. The traffic runs 6 s more, long enough for the
    moves the join causes.
    """
    return Scenario(
        "quick",
        (
            Step(2, "kill", "producer", "producer's broker dies: the producer fails over"),
            Step(4, "hang", "consumer", "consumer's broker hangs: heart-beats notice it"),
            Step(7, "resume", "hung", "the hung broker wakes up"),
            Step(8, "start", "dead", "the priority broker returns: the producer moves back"),
            Step(14, "add", "D", "a fourth broker joins the network"),
        ),
        duration=20,
        settle=5,
    )


def tiers_scenario() -> Scenario:
    """About 30 s of traffic over priority tiers: A and B are local, C and D remote.

    Every client prefers the locals and balances over them (rendezvous); one local dies and
    its clients stay local; both die and everyone goes remote; one comes back and everyone
    returns to it; the second comes back and takes its share again.
    """
    return Scenario(
        "tiers",
        (
            Step(5, "kill", "A", "local A dies: its clients move to local B, none goes remote"),
            Step(9, "kill", "B", "local B dies too: everyone moves to the remotes C and D"),
            Step(15, "start", "A", "local A returns: everyone comes back to it"),
            Step(22, "start", "B", "local B returns: the clients whose home is B move back"),
        ),
        duration=28,
        settle=8,
        brokers=4,
        priority=("A", "B"),
    )


SCENARIOS = {"full": full_scenario, "quick": quick_scenario, "tiers": tiers_scenario}
"""The scenarios by name (``--scenario``)."""
