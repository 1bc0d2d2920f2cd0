"""The code of README.md and the documentation site: what claims to run runs (see docblocks).

Blocks that need brokers run in integration/test_docs_examples.py; the site itself is built
with ``mkdocs build --strict`` by .ci/test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from docblocks import MARKERS, ROOT, Block, all_blocks, blocks_of, marked, markers_of, pages

RUN_TIMEOUT = 120  # a safety net against a hung block, not a measurement


def test_every_python_block_compiles() -> None:
    python = [b for b in all_blocks() if b.language in {"python", "py"} and b.snippet is None]
    assert len(python) >= 10, "the pages lost their code blocks, or the parser its way"
    for block in python:
        try:
            compile(block.code, block.where, "exec")
        except SyntaxError as exc:
            pytest.fail(f"{block.where}: {exc}")


def test_every_marker_is_known_and_sits_on_a_block() -> None:
    # A misspelt marker, or one separated from its block, would quietly run nothing.
    for page in pages():
        text = page.read_text(encoding="utf-8")
        lines = text.splitlines()
        marked_lines = {b.line for b in blocks_of(page)}
        for number, marker in markers_of(text):
            where = f"{page.relative_to(ROOT)}:{number}"
            assert marker.replace(":", ": ").replace(":  ", ": ") in MARKERS, where
            following = number
            while following < len(lines) and not lines[following].strip():
                following += 1
            assert following + 1 in marked_lines, f"{where}: no code block follows the marker"


def test_every_marked_block_is_python() -> None:
    for block in all_blocks():
        if block.marker is not None:
            assert block.language == "python", block.where


def test_the_pages_have_blocks_of_every_kind() -> None:
    # The docs promise a quick start that runs against real brokers and examples that run
    # without them; if the markers vanish, nothing would be run at all.
    assert len(marked("run")) >= 2
    assert marked("run: brokers"), "the README's quick start lost its marker"
    assert marked("pytest: brokers"), "the example test of the pages lost its marker"


@pytest.mark.parametrize("block", marked("run"), ids=lambda b: b.where)
def test_runnable_block_runs(block: Block, tmp_path: Path) -> None:
    # As a user runs it: a fresh interpreter, in an empty directory.
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr}"


def test_a_failing_block_is_seen_as_failing(tmp_path: Path) -> None:
    # The runner above is what CI trusts: a block that raises must fail it.
    page = ROOT / "docs" / "example.md"
    text = "Text.\n\n<!-- run -->\n```python\nraise SystemExit(3)\n```\n"
    (block,) = blocks_of(page, text)
    assert block.marker == "run"
    done = subprocess.run(
        [sys.executable, "-c", block.code], cwd=tmp_path, capture_output=True, check=False
    )
    assert done.returncode == 3


def test_the_parser_reads_markers_languages_and_snippets() -> None:
    text = (
        "<!-- run: brokers -->\n"
        "```python\nprint(1)\n```\n\n"
        '```{.python title="examples/quickstart.py"}\n--8<-- "examples/quickstart.py"\n```\n'
        "<!--compiles-->\n\n"
        "```py\nx = 1\n```\n"
        "```sh\nls\n```\n"
    )
    first, second, third, fourth = blocks_of(ROOT / "docs" / "x.md", text)
    assert (first.marker, first.language, first.code) == ("run: brokers", "python", "print(1)\n")
    assert (second.marker, second.language, second.snippet) == (
        None,
        "python",
        "examples/quickstart.py",
    )
    assert (third.marker, third.language, third.line) == ("compiles", "py", 11)
    assert (fourth.marker, fourth.language) == (None, "sh")


def test_every_included_file_exists() -> None:
    includes = [b for b in all_blocks() if b.snippet is not None]
    assert includes, "the quick start no longer includes its script"
    for block in includes:
        assert block.snippet is not None
        assert (ROOT / block.snippet).is_file(), f"{block.where}: {block.snippet} is missing"


def test_the_quick_start_page_shows_the_script_ci_runs() -> None:
    quickstart = blocks_of(ROOT / "docs" / "quickstart.md")
    assert "examples/quickstart.py" in [b.snippet for b in quickstart]


def test_relative_links_of_the_pages_resolve() -> None:
    # mkdocs checks the links between pages; this checks the README's (GitHub renders them).
    readme = ROOT / "README.md"
    text = re.sub(r"```.*?```", "", readme.read_text(encoding="utf-8"), flags=re.DOTALL)
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, "the README links to nothing in the repository"
    for target in local:
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


@pytest.mark.parametrize("page", ["README.md", "docs/install.md"])
def test_the_extras_table_names_every_extra(page: str) -> None:
    import configparser  # noqa: PLC0415 - this test alone reads setup.cfg

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg", encoding="utf-8")
    extras = set(setup["options.extras_require"])
    text = (ROOT / page).read_text(encoding="utf-8")
    if "\n## Install\n" in text:  # the README: its Install section only
        text = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([a-z-]+)`", row.split("|")[1])}
    assert extras <= named, f"{page} does not list the extras {sorted(extras - named)}"
