"""The code blocks of README.md and docs/, and the ones among them that claim to run.

A block claims to run through an HTML comment on the line before its fence (invisible on the
rendered page and on GitHub):

* ``<!-- run -->``: a script that runs without brokers; tests/test_docs.py runs it;
* ``<!-- run: brokers -->``: a script that starts or needs real brokers;
  integration/test_docs_examples.py runs it;
* ``<!-- pytest: brokers -->``: a user's pytest file, run with ``pytest --failover-brokers``
  by integration/test_docs_examples.py;
* ``<!-- compiles -->``: a block that needs the user's own brokers; it must compile.

Every ``python`` block must compile whether marked or not. A page includes a whole file of
the repository with ``--8<-- "path"`` (pymdownx.snippets); an included examples/ script is run
by the integration tests as a user runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKERS = ("run", "run: brokers", "pytest: brokers", "compiles")

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<marker>[a-z]+(?::\s*[a-z]+)?)\s*-->\s*$")
_SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def snippet(self) -> str | None:
        """The repository path the block includes (``--8<-- "path"``), if that is all it is."""
        lines = [line for line in self.code.splitlines() if line.strip()]
        match = _SNIPPET.match(lines[0]) if len(lines) == 1 else None
        return match.group("path") if match else None


def pages() -> list[Path]:
    """README.md and every Markdown page of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def language_of(info: str) -> str:
    """``python`` from ``python``, ``python title="x"`` or ``{.python title="x"}``."""
    info = info.strip()
    if info.startswith("{"):
        match = re.search(r"\.([\w+-]+)", info)
        return match.group(1) if match else ""
    return info.split()[0] if info else ""


def blocks_of(page: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of ``page`` (its text, or ``text`` when given), in order."""
    lines = (text if text is not None else page.read_text(encoding="utf-8")).splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{index + 1}: a code fence that is never closed")
        body = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        found.append(
            Block(page, index + 1, language_of(opening.group("info")), body, _marker(lines, index))
        )
        index = end + 1
    return found


def _marker(lines: list[str], fence_index: int) -> str | None:
    before = fence_index - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    match = _MARKER.match(lines[before]) if before >= 0 else None
    return match.group("marker").replace(":", ": ").replace(":  ", ": ") if match else None


def markers_of(text: str) -> list[tuple[int, str]]:
    """Every run-marker comment of a page as (1-based line, marker)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _MARKER.match(line)
        if match and not match.group("marker").startswith(("option-table", "fmt")):
            found.append((number, match.group("marker")))
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks_of(page)]


def marked(marker: str) -> list[Block]:
    """The blocks that carry ``marker``, with duplicates (the same code on two pages) once."""
    seen: set[str] = set()
    chosen = []
    for block in all_blocks():
        if block.marker == marker and block.code not in seen:
            seen.add(block.code)
            chosen.append(block)
    return chosen
