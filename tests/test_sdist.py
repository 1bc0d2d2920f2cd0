"""The source distribution carries what its README links to, and its own README tests pass.

The sdist is built by setuptools' PEP 517 backend called directly (no build isolation, so no
download), unpacked, and tests/test_readme.py and tests/test_docs.py run from the unpacked
tree: the README's links (examples/, docs/, LICENSE) resolve there, and its code blocks run.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import failover_client

# Building and unpacking an sdist, then a pytest run inside it: several seconds.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT = 300  # a safety net against a hung build, not a measurement


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    code = (
        "import sys\n"
        "from setuptools import build_meta\n"
        "print(build_meta.build_sdist(sys.argv[1]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip().splitlines()[-1]
    # setuptools before 69 keeps the project's dash; newer ones normalise it (PEP 625).
    assert name in {
        f"failover_client-{failover_client.__version__}.tar.gz",
        f"failover-client-{failover_client.__version__}.tar.gz",
    }
    with tarfile.open(out / name) as archive:
        archive.extractall(out, filter="data")
    return out / name.removesuffix(".tar.gz")


def test_sdist_carries_docs_examples_tests_and_licence(unpacked: Path) -> None:
    for path in (
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "mkdocs.yml",
        "docs/index.md",
        "docs/_api_tree.py",
        "docs/network-of-brokers.md",
        "examples/quickstart.py",
        "examples/test_app_failover.py",
        "tests/test_readme.py",
        "tests/docblocks.py",
        "integration/test_docs_examples.py",
        ".ci/run",
        "uri/__init__.py",
        "policies/__init__.py",
    ):
        assert (unpacked / path).is_file(), f"the sdist lacks {path}"
    assert not list(unpacked.rglob("__pycache__"))
    assert "Apache License" in (unpacked / "LICENSE").read_text(encoding="utf-8")


def test_sdist_metadata_names_licence_version_and_classifiers(unpacked: Path) -> None:
    info = (unpacked / "PKG-INFO").read_text(encoding="utf-8")
    assert f"Version: {failover_client.__version__}\n" in info
    assert "License: Apache-2.0\n" in info
    assert "Author: failover-client developers\n" in info
    assert "Classifier: Framework :: Pytest\n" in info


def test_readme_tests_pass_from_the_unpacked_sdist(unpacked: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "tests/test_readme.py", "tests/test_docs.py",
        ],
        cwd=unpacked, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
    assert "failed" not in done.stdout
