"""The timeline: messages per second per broker, with the scenario's actions marked.

``build_timeline`` is pure (tested with exact numbers); ``plot_timeline`` draws it with
matplotlib's Agg backend (no display needed) into a PNG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


def build_timeline(
    confirmed: Iterable[tuple[float, str]],
    received: Iterable[tuple[float, str]],
    marks: Sequence[Mark],
    *,
    end: float,
    bucket: float = 1.0,
) -> Timeline:
    """Bin (time, broker label) points of the producer and the consumer up to ``end`` s."""
    if bucket <= 0:
        raise ValueError(f"bucket must be > 0, got {bucket}")
    bins = max(1, math.ceil(end / bucket))
    sent = _histogram(confirmed, bucket, bins)
    got = _histogram(received, bucket, bins)
    return Timeline(
        bucket,
        bins,
        {k: tuple(v) for k, v in sorted(sent.items())},
        {k: tuple(v) for k, v in sorted(got.items())},
        tuple(marks),
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

    labels = sorted(set(timeline.confirmed) | set(timeline.received))
    colour = {label: _COLOURS[i % len(_COLOURS)] for i, label in enumerate(labels)}
    rate = 1.0 / timeline.bucket
    x = [s + timeline.bucket / 2 for s in timeline.starts]
    figure, axes = plt.subplots(2, 1, figsize=(12, 7), sharex=True, constrained_layout=True)
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
    axes[1].set_xlabel("seconds since traffic started")
    axes[1].set_xlim(0, timeline.bins * timeline.bucket)
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
