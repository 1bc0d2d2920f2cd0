"""MkDocs hook: lay out the package as it installs, so mkdocstrings finds every module.

setup.cfg installs the top-level folders policies/ and uri/ as failover_client.policies and
failover_client.uri. mkdocstrings reads source files from a search path, so this hook builds
``.stage-docs/failover_client`` (symlinks to failover_client/*, policies/ and uri/) before the
pages are rendered; mkdocs.yml points the Python handler's ``paths`` at it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / ".stage-docs"


def stage() -> Path:
    """(Re)build the staged package tree; return its root (the search path)."""
    shutil.rmtree(STAGE, ignore_errors=True)
    package = STAGE / "failover_client"
    package.mkdir(parents=True)
    for entry in (ROOT / "failover_client").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in ("policies", "uri"):
        (package / name).symlink_to(ROOT / name)
    return STAGE


def on_startup(**_: Any) -> None:
    """Runs once per ``mkdocs build`` / ``serve``, before any page is read."""
    stage()
