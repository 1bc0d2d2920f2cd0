"""The live view: a rich dashboard on a terminal, plain log lines elsewhere (CI, pipes).

Besides the producer and the consumer it shows, per broker, its tier (with priority tiers) and
how many of the fleet's idle clients sit on it, so a join or a tier failing over can be seen
as the clients move.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from ._record import EventLine

__all__ = ["BrokerRow", "ClientRow", "PlainView", "RichView", "View", "ViewState", "make_view"]

_RECENT = 10


@dataclass(frozen=True)
class ClientRow:
    name: str
    broker: str
    state: str
    rate: float
    total: int


@dataclass(frozen=True)
class BrokerRow:
    label: str
    address: str
    status: str
    fleet: int | None = None
    """Fleet clients on this broker now (None: the run has no fleet)."""
    tier: str = ""
    """``local`` / ``remote`` with priority tiers; empty without."""


@dataclass(frozen=True)
class ViewState:
    """Everything the view shows at one moment."""

    t: float
    duration: float
    phase: str
    clients: tuple[ClientRow, ...]
    brokers: tuple[BrokerRow, ...]
    events: tuple[EventLine, ...]
    note: str = ""
    """A line under the brokers: what the fleet is and what a join should do to it."""


class View(Protocol):
    def info(self, text: str) -> None: ...

    def event(self, line: EventLine) -> None: ...

    def refresh(self, state: ViewState) -> None: ...

    def close(self) -> None: ...


def format_event(line: EventLine) -> str:
    """``[  12.3 s] producer: failed over A -> B in 48 ms``."""
    return f"[{line.t:6.1f} s] {line.client}: {line.text}"


class PlainView:
    """Log lines: every event at once, a status line every ``every`` seconds."""

    def __init__(self, stream: TextIO, *, every: float = 5.0) -> None:
        self._stream = stream
        self._every = every
        self._next = 0.0
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        with self._lock:
            self._stream.write(text + "\n")
            self._stream.flush()

    def info(self, text: str) -> None:
        self._write(text)

    def event(self, line: EventLine) -> None:
        self._write(format_event(line))

    def refresh(self, state: ViewState) -> None:
        if state.t < self._next:
            return
        self._next = state.t + self._every
        clients = "; ".join(
            f"{c.name} on {c.broker} ({c.state}) {c.rate:.0f} msg/s, {c.total} total"
            for c in state.clients
        )
        brokers = " ".join(f"{b.label}:{b.status}" for b in state.brokers)
        fleet = " ".join(f"{b.label}:{b.fleet}" for b in state.brokers if b.fleet is not None)
        fleet = f" | fleet {fleet}" if fleet else ""
        self._write(f"[{state.t:6.1f} s] {state.phase}: {clients} | brokers {brokers}{fleet}")

    def close(self) -> None:
        return None


class RichView:
    """A ``rich.live.Live`` dashboard: progress, clients, brokers, recent events."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console  # noqa: PLC0415 - optional extra
        from rich.live import Live  # noqa: PLC0415 - optional extra

        self._console = Console(file=stream)
        self._live = Live(console=self._console, refresh_per_second=4, transient=False)
        self._live.start()
        self._lock = threading.Lock()
        self._events: list[EventLine] = []

    def info(self, text: str) -> None:
        self._console.print(text, highlight=False)

    def event(self, line: EventLine) -> None:
        with self._lock:
            self._events.append(line)

    def refresh(self, state: ViewState) -> None:
        self._live.update(self._render(state))

    def _render(self, state: ViewState) -> Any:
        from rich.console import Group  # noqa: PLC0415 - optional extra
        from rich.progress_bar import ProgressBar  # noqa: PLC0415
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        done = min(state.t, state.duration)
        header = Text(f"{state.phase}  {state.t:5.1f} s / {state.duration:.0f} s ", style="bold")
        progress = Table.grid(padding=(0, 1))
        progress.add_row(header, ProgressBar(total=state.duration, completed=done, width=50))
        clients = Table(title="clients", title_justify="left")
        for column in ("client", "broker", "state", "msg/s", "total"):
            clients.add_column(column)
        for c in state.clients:
            clients.add_row(c.name, c.broker, c.state, f"{c.rate:.0f}", str(c.total))
        tiers = any(b.tier for b in state.brokers)
        fleet = any(b.fleet is not None for b in state.brokers)
        brokers = Table(title="brokers", title_justify="left")
        columns = ["broker", "address", "status"] + (["tier"] if tiers else [])
        for column in columns + (["fleet clients"] if fleet else []):
            brokers.add_column(column)
        colours = {"up": "green", "dead": "red", "hung": "yellow", "not started": "dim"}
        for b in state.brokers:
            cells: list[Any] = [b.label, b.address, Text(b.status, style=colours.get(b.status, ""))]
            if tiers:
                cells.append(b.tier)
            if fleet:
                count = b.fleet or 0
                cells.append(Text(f"{'#' * count} {count}".lstrip(), style="cyan"))
            brokers.add_row(*cells)
        with self._lock:
            recent = self._events[-_RECENT:]
        events = Text("\n".join(format_event(e) for e in recent) or "(no events yet)")
        parts: list[Any] = [progress, clients, brokers]
        if state.note:
            parts.append(Text(state.note, style="italic"))
        parts += [Text("recent events", style="bold"), events]
        return Group(*parts)

    def close(self) -> None:
        self._live.stop()


def make_view(stream: TextIO, *, styled: bool | None) -> View:
    """Rich when asked for (or ``stream`` is a terminal) and rich is installed, else plain."""
    if styled is None:
        isatty = getattr(stream, "isatty", None)
        styled = bool(isatty and isatty())
    if styled:
        try:
            return RichView(stream)
        except ImportError:
            pass
    return PlainView(stream)
