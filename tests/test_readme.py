"""The README's promises that can be checked without brokers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from failover_client.uri import option_table_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def _text() -> str:
    return README.read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["README.md", "docs/options.md"])
def test_option_table_matches_the_parser(page: str) -> None:
    text = (README.parent / page).read_text(encoding="utf-8")
    match = re.search(
        r"<!-- option-table:start -->\n(.*?)\n<!-- option-table:end -->", text, re.DOTALL
    )
    assert match is not None, f"{page} lost its option-table markers"
    assert match.group(1).strip() == option_table_markdown().strip()


def test_first_lines_give_the_demo_and_test_commands() -> None:
    head = "\n".join(_text().splitlines()[:6])
    assert "bash .ci/demo" in head
    assert "bash .ci/test" in head


def test_first_lines_give_the_pip_path_to_the_demo() -> None:
    head = "\n".join(_text().splitlines()[:16])
    assert "pip install 'failover-client[demo]'" in head
    assert "python -m failover_client.demo --quick" in head
    assert "pip install 'failover-client[stomp]'" in head


def test_the_demo_extra_named_first_is_the_one_ci_installs_for_the_demo() -> None:
    # .ci/demo installs the demo's extra alone in CI's fresh environment: the README's pip
    # line must name the same extra.
    demo_script = (README.parent / ".ci" / "demo").read_text(encoding="utf-8")
    assert re.search(r"^extras=demo$", demo_script, re.MULTILINE)


def test_the_demo_has_the_flag_the_readme_names() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "failover_client.demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


def test_sections_come_in_a_new_users_order() -> None:
    headings = re.findall(r"^## (.+)$", _text(), re.MULTILINE)
    order = ["Contents", "Install", "Quick start", "Receiving", "Options", "Performance"]
    order += ["Layout", "Logging", "Troubleshooting", "Changelog"]
    positions = [headings.index(name) for name in order]
    assert positions == sorted(positions), headings


def test_contents_link_every_section() -> None:
    text = _text()
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    anchors = re.findall(r"\]\(#([^)]+)\)", contents)
    expected = [_anchor(h) for h in headings if h != "Contents"]
    assert anchors == expected


def _anchor(heading: str) -> str:
    # GitHub's rule: lower case, punctuation dropped, spaces to dashes.
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^bash \.ci/test$", ci, re.MULTILINE)
