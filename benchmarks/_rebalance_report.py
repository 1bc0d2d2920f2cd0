"""The rebalancing benchmark's table: each figure for our clients and the Java clients, over runs.

Each cell is the median over the runs with the range beside it (``14 (11-19)``), so the worst
run is always visible (times: ``1.90 s (1.20-2.40)``); max/min pairs show the run with the
median ratio and the worst one.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._common import table

__all__ = ["render"]

Run = dict[str, Any]
Getter = Callable[[Run, str], float | None]


def _values(runs: Sequence[Run], fleet: str, get: Getter) -> list[float]:
    return [v for v in (get(r, fleet) for r in runs) if v is not None]


def _fmt(value: float, unit: str) -> str:
    if unit.startswith("of "):  # a count and its share of a whole: "14 = 23%"
        return f"{value:g} = {value / float(unit[3:]):.0%}"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:g}"


def _spread(values: Sequence[float], unit: str = "") -> str:
    if not values:
        return "-"
    mid = _fmt(statistics.median(values), unit)
    if len(values) == 1:
        return mid
    low, high = min(values), max(values)
    if unit == "s":
        return f"{mid} ({low:.2f}-{high:.2f})"
    bounds = "" if unit.startswith("of ") else unit  # the range in counts only
    return f"{mid} ({_fmt(low, bounds)}-{_fmt(high, bounds)})"


def _ratio(ours: Sequence[float], java: Sequence[float]) -> str:
    if not ours or not java or statistics.median(java) == 0:
        return "-"
    return f"{statistics.median(ours) / statistics.median(java):.2f}"


def _max_min(pairs: Sequence[Sequence[int]]) -> str:
    """``max/min`` of the run with the median ratio, and of the worst (an empty broker: inf)."""
    if not pairs:
        return "-"
    scored = sorted(((max(p) / min(p) if min(p) else float("inf")), p) for p in pairs)
    median = scored[(len(scored) - 1) // 2][1]
    worst = scored[-1][1]
    text = f"{max(median)}/{min(median)}"
    return text if len(pairs) == 1 else f"{text}, worst {max(worst)}/{min(worst)}"


def _row(
    runs: Sequence[Run], label: str, get: Getter, unit: str = "", ratio: bool = True
) -> list[str]:
    ours, java = _values(runs, "ours", get), _values(runs, "java", get)
    return [label, _spread(ours, unit), _spread(java, unit), _ratio(ours, java) if ratio else "-"]


def _pairs_row(runs: Sequence[Run], label: str, get: Callable[[Run, str], list[int]]) -> list[str]:
    return [
        label,
        _max_min([get(r, "ours") for r in runs]),
        _max_min([get(r, "java") for r in runs]),
        "-",
    ]


def render(runs: Sequence[Run], clients: int, source: str, loss: Sequence[dict[str, Any]]) -> str:
    """Print and return the table."""
    fair = clients / 4
    rows = [
        _row(
            runs,
            "(a) join: clients moved",
            lambda r, f: r["join"][f]["clients_moved"],
            f"of {clients}",
        ),
        _row(
            runs, "(a) join: moves (one client may move twice)", lambda r, f: r["join"][f]["moves"]
        ),
        _row(
            runs,
            f"(a) join: clients on the new broker (fair {fair:g})",
            lambda r, f: r["join"][f]["newcomer"],
            ratio=False,
        ),
        _pairs_row(runs, "(a) join: max/min per broker after", lambda r, f: r["join"][f]["spread"]),
        _row(
            runs,
            "(a) join: last move after the broker's start",
            lambda r, f: r["join"][f]["last_move_s"],
            "s",
        ),
        _row(
            runs,
            "(b) stop: the stopped broker's clients",
            lambda r, f: r["stop"][f]["victims"],
            ratio=False,
        ),
        _row(
            runs,
            "(b) stop: collateral moves (clients of live brokers)",
            lambda r, f: r["stop"][f]["collateral"],
        ),
        _row(runs, "(b) stop: last move after it", lambda r, f: r["stop"][f]["last_move_s"], "s"),
        _pairs_row(runs, "(b) stop: max/min over the 3 left", lambda r, f: r["stop"][f]["spread"]),
        _row(
            runs,
            "(b) stop, restarted: clients moved",
            lambda r, f: r["stop"][f]["restore"]["clients_moved"],
        ),
        _row(
            runs,
            "(b) stop, restarted: last move after its start",
            lambda r, f: r["stop"][f]["restore"]["last_move_s"],
            "s",
        ),
        _row(
            runs,
            "(c) kill: the killed broker's clients",
            lambda r, f: r["kill"][f]["victims"],
            ratio=False,
        ),
        _row(runs, "(c) kill: collateral moves", lambda r, f: r["kill"][f]["collateral"]),
        _row(runs, "(c) kill: last move after it", lambda r, f: r["kill"][f]["last_move_s"], "s"),
        _pairs_row(runs, "(c) kill: max/min over the 3 left", lambda r, f: r["kill"][f]["spread"]),
        _row(
            runs,
            "(c) kill, restarted: clients moved",
            lambda r, f: r["kill"][f]["restore"]["clients_moved"],
        ),
        _row(
            runs,
            "(c) kill, restarted: last move after its start",
            lambda r, f: r["kill"][f]["restore"]["last_move_s"],
            "s",
        ),
        _pairs_row(
            runs,
            "(d) tiers: max/min over the 2 locals",
            lambda r, f: r["tiers"][f]["start_spread"][:2],
        ),
        _row(
            runs,
            f"(d) both locals killed: on remotes (of {clients})",
            lambda r, f: r["tiers"][f]["locals_down"]["on_remotes"],
            ratio=False,
        ),
        _row(
            runs,
            f"(d) first local back: on it (of {clients})",
            lambda r, f: r["tiers"][f]["first_back"]["on_it"],
            ratio=False,
        ),
        _row(
            runs,
            "(d) first local back: last arrival after its start",
            lambda r, f: r["tiers"][f]["first_back"]["last_move_s"],
            "s",
        ),
        _pairs_row(
            runs,
            "(d) second local back: max/min over the locals",
            lambda r, f: r["tiers"][f]["second_back"]["spread"],
        ),
        _row(
            runs,
            "(d) second local back: last move after its start",
            lambda r, f: r["tiers"][f]["second_back"]["last_move_s"],
            "s",
        ),
    ]
    ready: list[Callable[[Run], float]] = [
        lambda r: r["join"]["ours"]["broker_ready_s"],
        lambda r: r["stop"]["ours"]["restore"]["broker_ready_s"],
        lambda r: r["kill"]["ours"]["restore"]["broker_ready_s"],
        lambda r: r["tiers"]["ours"]["first_back"]["broker_ready_s"],
        lambda r: r["tiers"]["ours"]["second_back"]["broker_ready_s"],
    ]
    medians = " / ".join(f"{statistics.median(get(r) for r in runs):.1f}" for get in ready)
    rows.append(
        [
            "broker start until it answered (s): (a), (b), (c), (d) 1st, 2nd",
            medians,
            "(the same brokers)",
            "-",
        ]
    )
    confirmed = sum(x["confirmed"] for x in loss)
    received = sum(x["received_at_least_once"] for x in loss)
    lost = sum(x["lost"] for x in loss)
    rows.append(
        [
            "zero loss (ours): confirmed / received at least once / lost",
            f"{confirmed} / {received} / {lost}",
            "-",
            "-",
        ]
    )
    return table(
        f"Rebalancing on a 4-broker ActiveMQ network: {clients} clients of each kind, {len(runs)} "
        f"run(s); ours: rendezvous + rebalance=true ({source} source), Java: failover: with the "
        "brokers' rebalanceClusterClients push; median (range)",
        ["figure", "ours", "Java client", "ours/Java"],
        rows,
    )
