"""The layout draws the architecture, and this test keeps it true.

Dependencies flow one way (DESIGN.md, "Layout")::

    errors  <-  uri, policies  <-  clock, events, adapter  <-  engine, net  <-  adapters
            <-  topology  <-  spark, testing, cli, demo

Every import statement counts, also one inside a function (a lazy import is still a
dependency); only the package's ``__init__``, which is the public facade, may reach anywhere.
The pure layers import no third-party library, and no module grows past the size at which it
stops being one concept.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Source folders and the package they install as (setup.cfg's package_dir).
SOURCES = {
    "failover_client": ROOT / "failover_client",
    "failover_client.policies": ROOT / "policies",
    "failover_client.uri": ROOT / "uri",
}

# Layer of each part of the package: a module may import its own part and lower layers only.
LAYERS: dict[str, int] = {
    "failover_client._errors": 0,
    "failover_client._registry": 0,
    "failover_client._throttle": 0,
    "failover_client._hosts": 0,
    "failover_client._lazy": 0,
    "failover_client.uri": 1,
    "failover_client.policies": 1,
    "failover_client._clock": 2,
    "failover_client._timers": 2,
    "failover_client._events": 2,
    "failover_client.adapter": 2,
    "failover_client.engine": 3,
    "failover_client.net": 3,
    "failover_client.stomp": 4,
    "failover_client.amqp": 4,
    "failover_client.openwire": 4,
    "failover_client.topology": 5,
    "failover_client.spark": 6,
    "failover_client.testing": 6,
    "failover_client.cli": 6,
    "failover_client.otel": 6,
    "failover_client.aio": 6,
    "failover_client.demo": 7,
}

# Parts of one layer that must still not know each other.
FORBIDDEN = {
    ("failover_client.uri", "failover_client.policies"),
    ("failover_client.engine", "failover_client.net"),
    ("failover_client.net", "failover_client.engine"),
    ("failover_client.stomp", "failover_client.amqp"),
    ("failover_client.amqp", "failover_client.stomp"),
}

# Adapters implement failover_client.adapter; they never reach into the engine that drives them.
FORBIDDEN |= {
    ("failover_client.stomp", "failover_client.engine"),
    ("failover_client.amqp", "failover_client.engine"),
    ("failover_client.openwire", "failover_client.engine"),
}

# Third-party imports each part may make (standard library always allowed).
THIRD_PARTY: dict[str, set[str]] = {
    "failover_client._errors": set(),
    "failover_client._registry": set(),
    "failover_client._throttle": set(),
    "failover_client._hosts": set(),
    "failover_client._lazy": set(),
    "failover_client.uri": set(),
    "failover_client.policies": set(),
    "failover_client._clock": set(),
    "failover_client._timers": set(),
    "failover_client._events": set(),
    "failover_client.adapter": set(),
    "failover_client.engine": {"tenacity"},
    "failover_client.net": set(),
    "failover_client.stomp": {"stomp"},
    "failover_client.amqp": {"proton"},
    "failover_client.openwire": set(),
    "failover_client.topology": {"dns"},
    "failover_client.spark": {"pyspark", "pyarrow"},
    "failover_client.otel": {"opentelemetry"},
}

MAX_LINES = 520
"""About 500 lines: one concept per module."""


def _modules() -> Iterator[tuple[str, Path]]:
    for package, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path


def _part(module: str) -> str | None:
    """The layered part ``module`` belongs to (the longest matching prefix)."""
    best = None
    for part in LAYERS:
        if (module == part or module.startswith(part + ".")) and (
            best is None or len(part) > len(best)
        ):
            best = part
    return best


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "failover_client" or (not node.module and node.level):
                # "from failover_client import uri" names submodules: check each name.
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}"
            else:
                yield node.lineno, target


def _violations() -> list[str]:
    stdlib = sys.stdlib_module_names
    found = []
    for module, path in _modules():
        if module == "failover_client":
            continue  # the facade re-exports from every layer
        own = _part(module)
        assert own is not None, f"{module} belongs to no layer: add it to LAYERS"
        where = path.relative_to(ROOT)
        for line, target in _imports(module, path):
            top = target.split(".")[0]
            if top == "failover_client":
                # A name taken from the facade (not a submodule) drags in the engine behind it.
                other = _part(target) or "failover_client.engine"
                if other == own:
                    continue
                if LAYERS[other] > LAYERS[own] or (own, other) in FORBIDDEN:
                    found.append(f"{where}:{line}: {own} must not import {target}")
            elif (
                top not in stdlib
                and top != "__future__"
                and own in THIRD_PARTY
                and top not in THIRD_PARTY[own]
            ):
                found.append(f"{where}:{line}: {own} must not import third-party {top!r}")
    return found


def test_dependencies_flow_one_way() -> None:
    assert _violations() == []


# Applications of the library use it as a user would: through public modules only. (The demo
# prints with the CLI's tables, a sibling application's helper.)
PUBLIC_ONLY = ("failover_client.cli", "failover_client.demo")
PRIVATE_ALLOWED = ("failover_client.cli._output",)


def _private_imports() -> list[str]:
    found = []
    for module, path in _modules():
        own = _part(module)
        if own not in PUBLIC_ONLY:
            continue
        for line, target in _imports(module, path):
            if not target.startswith("failover_client.") or _part(target) == own:
                continue
            if target in PRIVATE_ALLOWED:
                continue
            if any(piece.startswith("_") for piece in target.split(".")[1:]):
                found.append(f"{path.relative_to(ROOT)}:{line}: {own} imports private {target}")
    return found


def test_applications_use_only_the_public_api() -> None:
    assert _private_imports() == []


def test_every_module_belongs_to_a_layer() -> None:
    for module, _ in _modules():
        if module != "failover_client":
            assert _part(module) is not None, module


@pytest.mark.parametrize(("module", "path"), [pytest.param(m, p, id=m) for m, p in _modules()])
def test_module_is_one_concept_in_size(module: str, path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it along its seams"


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    # The check itself must be able to fail: an engine module importing an adapter is caught.
    module = "failover_client.engine._bad"
    path = tmp_path / "_bad.py"
    path.write_text(
        "def f():\n    from failover_client.stomp import StompConnector\n    import stomp\n"
    )
    targets = [t for _, t in _imports(module, path)]
    assert targets == ["failover_client.stomp", "stomp"]
    assert LAYERS[_part(targets[0]) or ""] > LAYERS[_part(module) or ""]


def test_every_package_is_installed() -> None:
    # A package missing from setup.cfg works in an editable install and is absent from a wheel.
    import configparser  # noqa: PLC0415 - only this test reads setup.cfg

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    on_disk = {
        ".".join(("failover_client", *init.parent.relative_to(ROOT / "failover_client").parts))
        for init in (ROOT / "failover_client").rglob("__init__.py")
    }
    on_disk |= {"failover_client.policies", "failover_client.uri"}
    assert on_disk - listed == set()
