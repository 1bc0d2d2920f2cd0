"""A live count of messages on stderr while a long ``send`` or ``receive`` runs.

Shown only when stderr is a terminal (or the environment asks for styled output): piped or
redirected output stays plain lines a script can read, and the progress never mixes into
stdout, which carries the messages ``receive`` prints. rich draws it (a dependency of the
``cli`` extra); it is transient, so the summary line is what stays on the screen.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = ["Progress", "wants_progress"]


def wants_progress(stream: TextIO, styled: bool | None) -> bool:
    """Draw progress on ``stream``: asked for (``styled``), or it is a terminal."""
    if styled is not None:
        return styled
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """``with Progress(stream, "sent", total=100, show=True) as p: p.advance()``.

    ``total`` None: a count without a bar (stdin lines, or a receive without ``--count``).
    With ``show`` False every method does nothing, and rich is not imported.
    """

    def __init__(self, stream: TextIO, what: str, *, total: int | None, show: bool) -> None:
        self._stream = stream
        self._what = what
        self._total = total
        self._show = show
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self.done = 0

    def __enter__(self) -> Progress:
        if not self._show:
            return self
        from rich.console import Console  # noqa: PLC0415 - only on a terminal
        from rich.progress import (  # noqa: PLC0415 - only on a terminal
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress  # noqa: PLC0415 - only on a terminal

        columns = [TextColumn("{task.description}"), MofNCompleteColumn(), TimeElapsedColumn()]
        if self._total is not None:
            columns.insert(1, BarColumn())
        bar = RichProgress(
            *columns,
            console=Console(file=self._stream),
            transient=True,
            refresh_per_second=4,
        )
        bar.start()
        self._task = bar.add_task(self._what, total=self._total)
        self._bar = bar
        return self

    def advance(self, count: int = 1) -> None:
        """``count`` more messages done."""
        self.done += count
        bar = self._bar
        if bar is not None and self._task is not None:
            bar.update(self._task, completed=self.done)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        bar = self._bar
        if bar is not None:
            bar.stop()
            self._bar = None
