"""Tables for people: ``rich`` tables on a terminal, aligned plain text everywhere else.

Plain text is what scripts, pipes and CI logs get: stable, no colour codes, no box characters,
and one long explanation per row printed on its own indented line instead of being cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Table", "render_tables"]


@dataclass(frozen=True)
class Table:
    """A titled table; ``notes`` (one per row, may be empty) hold long free text."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
    note_title: str = "meaning"

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.title!r}: row {row!r} does not match the columns")
        if self.notes and len(self.notes) != len(self.rows):
            raise ValueError(f"table {self.title!r}: give one note per row or none")


def render_tables(tables: Sequence[Table], stream: TextIO, *, styled: bool) -> None:
    """Write ``tables`` to ``stream``: rich tables when ``styled`` (and rich is installed)."""
    if styled:
        try:
            from rich.console import Console  # noqa: PLC0415 - optional extra, loaded on use
        except ImportError:
            styled = False
        else:
            console = Console(file=stream, highlight=False)
            for table in tables:
                console.print(_rich_table(table))
            return
    stream.write("\n".join(plain_table(t) for t in tables))


def _rich_table(table: Table) -> object:
    from rich.table import Table as RichTable  # noqa: PLC0415 - optional extra

    out = RichTable(title=table.title, title_justify="left", show_lines=False)
    for column in table.columns:
        out.add_column(column)
    if table.notes:
        out.add_column(table.note_title, ratio=1)
    for index, row in enumerate(table.rows):
        cells = list(row) + ([table.notes[index]] if table.notes else [])
        out.add_row(*cells)
    return out


def plain_table(table: Table) -> str:
    """``table`` as aligned plain text, ending with a newline."""
    widths = [len(c) for c in table.columns]
    for row in table.rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    lines = [f"{table.title}:", "  " + line(table.columns)]
    for index, row in enumerate(table.rows):
        lines.append("  " + line(row))
        note = table.notes[index] if table.notes else ""
        if note:
            lines.append("      " + note)
    if not table.rows:
        lines.append("  (none)")
    return "\n".join(lines) + "\n"
