"""The timeline: messages per second per broker, with the scenario's actions marked.

With a fleet, a third panel shows how many idle clients sat on each broker over time: the
step when a broker joins (only its share moves) or a tier empties (everyone moves).
``build_timeline`` is pure (tested with exact numbers); ``plot_timeline`` draws it with
matplotlib's Agg backend (no display needed) into a PNG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._record import Mark

__all__ = ["Timeline", "build_timeline", "mark_text", "plot_timeline"]

_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
_MARK_COLOURS = {
    "kill": "tab:red",
    "hang": "tab:olive",
    "resume": "tab:cyan",
    "up": "tab:green",
    "joined": "tab:purple",
}


@dataclass(frozen=True)
class Timeline:
    """Per-broker counts in ``bucket``-second bins starting at 0."""

    bucket: float
    bins: int
    confirmed: dict[str, tuple[int, ...]]
    received: dict[str, tuple[int, ...]]
    marks: tuple[Mark, ...]
    fleet: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Fleet clients on each broker at the start of each ``fleet_bucket`` (empty: no fleet)."""
    fleet_bucket: float = 0.1

    @property
    def starts(self) -> tuple[float, ...]:
        return tuple(i * self.bucket for i in range(self.bins))


def _histogram(
    points: Iterable[tuple[float, str]], bucket: float, bins: int
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, label in points:
        index = min(max(int(t // bucket), 0), bins - 1)
        out.setdefault(label, [0] * bins)[index] += 1
    return out


def _occupancy(
    positions: Iterable[tuple[float, str, str]], bucket: float, bins: int
) -> dict[str, list[int]]:
    """Clients per label at the start of each bin, from (time, client, label) changes of place
    (a change exactly at a bin's start counts in that bin)."""
    changes = sorted(positions)
    where: dict[str, str] = {}
    out: dict[str, list[int]] = {label: [0] * bins for _, _, label in changes if label != "-"}
    index = 0
    for b in range(bins):
        edge = b * bucket
        while index < len(changes) and changes[index][0] <= edge:
            _, client, label = changes[index]
            where[client] = label
            index += 1
        for label in where.values():
            if label in out:
                out[label][b] += 1
    return out


def build_timeline(
    confirmed: Iterable[tuple[float, str]],
    received: Iterable[tuple[float, str]],
    marks: Sequence[Mark],
    *,
    end: float,
    bucket: float = 1.0,
    fleet: Iterable[tuple[float, str, str]] = (),
    fleet_bucket: float = 0.1,
) -> Timeline:
    """Bin (time, broker label) points of the producer and the consumer up to ``end`` s.

    ``fleet`` holds (time, client, label) changes of place of the idle clients (label ``-``:
    on no broker); they are counted per broker at the start of every ``fleet_bucket`` s, finer
    than the rates so a move is drawn where it happened.
    """
    if bucket <= 0 or fleet_bucket <= 0:
        raise ValueError(f"bucket and fleet_bucket must be > 0, got {bucket}, {fleet_bucket}")
    bins = max(1, math.ceil(end / bucket))
    sent = _histogram(confirmed, bucket, bins)
    got = _histogram(received, bucket, bins)
    placed = _occupancy(fleet, fleet_bucket, max(1, math.ceil(bins * bucket / fleet_bucket)))
    return Timeline(
        bucket,
        bins,
        {k: tuple(v) for k, v in sorted(sent.items())},
        {k: tuple(v) for k, v in sorted(got.items())},
        tuple(marks),
        {k: tuple(v) for k, v in sorted(placed.items())},
        fleet_bucket,
    )


def mark_text(mark: Mark) -> str:
    """The label of a vertical line: ``kill A``, ``hang C``, ``A up``, ``D joins``."""
    if mark.action == "up":
        return f"{mark.label} up"
    if mark.action == "joined":
        return f"{mark.label} joins"
    return f"{mark.action} {mark.label}"


def plot_timeline(timeline: Timeline, path: Path, *, title: str = "failover demo") -> Path:
    """Draw ``timeline`` into a PNG at ``path`` and return the path."""
    import matplotlib  # noqa: PLC0415 - optional extra, imported only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after choosing the backend

    labels = sorted(set(timeline.confirmed) | set(timeline.received) | set(timeline.fleet))
    colour = {label: _COLOURS[i % len(_COLOURS)] for i, label in enumerate(labels)}
    rate = 1.0 / timeline.bucket
    x = [s + timeline.bucket / 2 for s in timeline.starts]
    rows = 3 if timeline.fleet else 2
    figure, axes = plt.subplots(
        rows, 1, figsize=(12, 3.5 * rows), sharex=True, constrained_layout=True
    )
    panels = (
        (axes[0], timeline.confirmed, "producer: confirmed msgs/s by broker"),
        (axes[1], timeline.received, "consumer: received msgs/s by broker"),
    )
    for axis, series, heading in panels:
        for label in labels:
            counts = series.get(label)
            if counts is None:
                continue
            axis.plot(
                x,
                [c * rate for c in counts],
                label=f"broker {label}",
                color=colour[label],
                lw=1.6,
                drawstyle="steps-mid",
            )
        axis.set_title(heading, loc="left", fontsize=11)
        axis.set_ylabel("msgs/s")
    if timeline.fleet:
        # Stacked: the bands always add up to the fleet, so a move shows as one band growing
        # while another shrinks.
        shown = [label for label in labels if label in timeline.fleet]
        step = timeline.fleet_bucket
        edges = [
            t
            for i in range(len(next(iter(timeline.fleet.values()))))
            for t in (i * step, (i + 1) * step)
        ]
        bands = [[c for c in timeline.fleet[label] for _ in (0, 1)] for label in shown]
        axes[2].stackplot(
            edges,
            *bands,
            labels=[f"broker {label}" for label in shown],
            colors=[colour[label] for label in shown],
            alpha=0.85,
        )
        axes[2].set_title(
            "fleet: idle clients on each broker (rebalance=true), stacked", loc="left", fontsize=11
        )
        axes[2].set_ylabel("clients")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.set_ylim(bottom=0)
        axis.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=9)
    top = axes[0]
    ceiling = top.get_ylim()[1]
    for index, mark in enumerate(timeline.marks):
        for axis in axes:
            axis.axvline(mark.t, color=_MARK_COLOURS.get(mark.action, "grey"), ls="--", lw=1.2)
        # Alternate heights so labels of close marks do not overlap.
        height = ceiling * (0.95 if index % 2 == 0 else 0.80)
        top.text(
            mark.t + 0.15,
            height,
            mark_text(mark),
            fontsize=9,
            va="top",
            color=_MARK_COLOURS.get(mark.action, "grey"),
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
        )
    axes[-1].set_xlabel("seconds since traffic started")
    axes[-1].set_xlim(0, timeline.bins * timeline.bucket)
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
