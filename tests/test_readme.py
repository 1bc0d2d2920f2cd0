"""The README's promises that can be checked without brokers."""

from __future__ import annotations

import re
from pathlib import Path

from failover_client.uri import option_table_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def _text() -> str:
    return README.read_text(encoding="utf-8")


def test_option_table_matches_the_parser() -> None:
    match = re.search(
        r"<!-- option-table:start -->\n(.*?)\n<!-- option-table:end -->", _text(), re.DOTALL
    )
    assert match is not None, "README lost its option-table markers"
    assert match.group(1).strip() == option_table_markdown().strip()


def test_first_lines_give_the_demo_and_test_commands() -> None:
    head = "\n".join(_text().splitlines()[:6])
    assert "bash .ci/demo" in head
    assert "bash .ci/test" in head


def test_ci_runs_the_readme_test_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^bash \.ci/test$", ci, re.MULTILINE)
