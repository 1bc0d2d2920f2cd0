"""Pictures of the benchmark results (PNG, matplotlib's Agg backend).

Each function reads the result dict a ``bench_*.py`` wrote and returns the path it drew, or
None when the result holds nothing to draw (a benchmark that was skipped or failed early).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here or in CI
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

__all__ = ["plot_all"]


def _failover(result: Mapping[str, Any], out: Path) -> Path | None:
    """Every failover sample per series: the spread matters as much as the median."""
    series = [s for s in result.get("series", []) if s.get("samples_ms")]
    if not series:
        return None
    labels = [f"{s['label']}\n({s['case']})" for s in series]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(series)), 4.5))
    ax.boxplot([s["samples_ms"] for s in series], showfliers=True)
    ax.set_xticks(range(1, len(series) + 1), labels, fontsize=8)
    eof = [s.get("eof_summary", {}).get("median_ms") for s in series]
    floor = [e for e in eof if e is not None]
    if floor:
        ax.axhline(
            sorted(floor)[len(floor) // 2],
            color="grey",
            linestyle=":",
            label="median kill -> socket EOF (no client can react sooner)",
        )
        ax.legend(fontsize=8)
    ax.set_ylabel("SIGKILL -> first confirmed send elsewhere (ms)")
    ax.set_title("Failover time, real ActiveMQ brokers")
    fig.tight_layout()
    path = out / f"{result.get('benchmark', 'failover')}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _throughput(result: Mapping[str, Any], out: Path) -> Path | None:
    """Messages per second per method and store, raw stomp.py beside failover-client."""
    stores = {k: v for k, v in result.get("stores", {}).items() if v.get("medians_msg_per_s")}
    if not stores:
        return None
    fig, axes = plt.subplots(1, len(stores), figsize=(6.5 * len(stores), 4.8), squeeze=False)
    for ax, (store, case) in zip(axes[0], stores.items(), strict=True):
        medians = case["medians_msg_per_s"]
        names = list(medians)
        colours = ["tab:grey" if n.startswith("raw") else "tab:blue" for n in names]
        ax.barh(range(len(names)), [medians[n] for n in names], color=colours)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("messages / s (log scale; grey = raw stomp.py)")
        ax.set_title(f"store on {store}")
    fig.suptitle("Throughput, one ActiveMQ broker, 128-byte bodies")
    fig.tight_layout()
    path = out / "throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(results: Mapping[str, Mapping[str, Any]], out: Path) -> list[Path]:
    """Draw what the results allow; returns the files written."""
    drawn = []
    for name, draw in (("failover", _failover), ("hung", _failover), ("throughput", _throughput)):
        result = results.get(name)
        if result:
            path = draw(result, out)
            if path is not None:
                drawn.append(path)
    return drawn
