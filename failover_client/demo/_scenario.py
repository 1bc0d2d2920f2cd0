"""The demo's script: what happens to which broker, and when (pure data, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "Scenario", "Step", "full_scenario", "quick_scenario"]

Action = Literal["kill", "hang", "resume", "start", "add"]
"""kill = SIGKILL, hang = SIGSTOP, resume = SIGCONT, start = start a dead broker again,
add = start a broker the clients do not know yet and tell them about it."""

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
    """About 20 s of traffic: kill, hang, resume, priority return, a new broker."""
    return Scenario(
        "quick",
        (
            Step(3, "kill", "producer", "producer's broker dies: the producer fails over"),
            Step(7, "hang", "consumer", "consumer's broker hangs: heart-beats notice it"),
            Step(11, "resume", "hung", "the hung broker wakes up"),
            Step(12, "start", "dead", "the priority broker returns: the producer moves back"),
            Step(16, "add", "D", "a fourth broker joins the network"),
        ),
        duration=19,
        settle=6,
    )
