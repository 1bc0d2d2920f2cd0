"""The error trees drawn in the docstrings are the trees the code defines, and every error in
them is importable where the drawing says.

Two trees: the library's (``FailoverClientError``, drawn in ``failover_client._errors``) and
the real-broker harness's (``BrokerError``, drawn in ``failover_client.testing.brokers._errors``),
kept apart on purpose (see the library's docstring). Each is walked through
``__subclasses__()`` and compared with the drawing parsed from its module docstring, the way
httpx pins its ``_exceptions.py`` tree.
"""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import re
import types
from dataclasses import dataclass

import pytest

import failover_client
from failover_client import ConfigurationError, DataError, FailoverClientError
from failover_client._errors import __doc__ as LIBRARY_DOC
from failover_client.spark import SpoolGap
from failover_client.testing.brokers import BrokerError
from failover_client.testing.brokers._errors import __doc__ as HARNESS_DOC

PUBLIC_PACKAGES = (
    "failover_client",
    "failover_client.adapter",
    "failover_client.uri",
    "failover_client.policies",
    "failover_client.stomp",
    "failover_client.amqp",
    "failover_client.topology",
    "failover_client.openwire",
    "failover_client.spark",
    "failover_client.testing",
    "failover_client.testing.brokers",
    "failover_client.testing.spark",
)
"""Every module a user imports names from (the package and its public subpackages)."""

OUTSIDE_BOTH_TREES = {
    # A fault a Spark test injects into a task on purpose: it stands for any crash of the
    # user's own code, so it must not be one of ours (Spark and the sink treat it as foreign).
    "failover_client.testing.spark.InjectedFailure",
    # The Spark harness's "could not start the cluster": a harness error like BrokerError's
    # family, not yet drawn in the harness tree (testing/brokers/_errors.py).
    "failover_client.testing.spark.SparkClusterError",
    # A fake clock that nobody moves while a test waits on it: a mistake in the test itself,
    # raised into the test; an application's ``except FailoverClientError`` must not catch it.
    "failover_client.testing.ClockStalled",
}
"""Exported exceptions deliberately in neither tree, each with its reason."""

_NAME = re.compile(r"[A-Z][A-Za-z]+")
_HOME = re.compile(r"\[(\w+)\]")
_ALSO = re.compile(r"\(also an? (\w+)\)")


@dataclass(frozen=True)
class Drawn:
    parent: str | None
    home: str
    """The module the drawing says it is importable from."""
    also: str | None
    """A built-in exception it also is, per the drawing ("also a ValueError")."""


def drawn_tree(doc: str | None, default_home: str) -> dict[str, Drawn]:
    """The tree in the first ``::`` block of ``doc``: each class with its parent.

    A class's depth is the column of its name; ``[spark]`` names the subpackage it is
    imported from (default ``default_home``), ``(also a ValueError)`` a built-in base.
    """
    assert doc is not None
    block = doc.split("::", 1)[1].strip("\n").split("\n\n", 1)[0]
    tree: dict[str, Drawn] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = _NAME.search(line)
        assert match is not None, f"no class name in the drawn line {line!r}"
        column, name = match.start(), match.group()
        while stack and stack[-1][0] >= column:
            stack.pop()
        home = _HOME.search(line)
        also = _ALSO.search(line)
        assert name not in tree, f"{name} is drawn twice"
        tree[name] = Drawn(
            parent=stack[-1][1] if stack else None,
            home=f"failover_client.{home.group(1)}" if home else default_home,
            also=also.group(1) if also else None,
        )
        stack.append((column, name))
    return tree


def _import_everything() -> None:
    """Import every module of the package, so every subclass defined anywhere is known."""
    for info in pkgutil.walk_packages(failover_client.__path__, "failover_client."):
        if ".demo" in info.name or info.name.endswith("__main__"):
            continue  # programs, not library code (and they define no library errors)
        importlib.import_module(info.name)


def code_tree(root: type[BaseException]) -> dict[str, type[BaseException]]:
    """Every class under ``root`` defined by this package, by name (root included)."""
    _import_everything()
    found: dict[str, type[BaseException]] = {}
    pending = [root]
    while pending:
        cls = pending.pop()
        if not cls.__module__.startswith("failover_client"):
            continue  # a test's own subclass, not ours
        assert found.get(cls.__name__, cls) is cls, f"two classes named {cls.__name__}"
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


TREES = [
    pytest.param(FailoverClientError, LIBRARY_DOC, "failover_client", id="library"),
    pytest.param(BrokerError, HARNESS_DOC, "failover_client.testing.brokers", id="broker-harness"),
]


@pytest.mark.parametrize(("root", "doc", "home"), TREES)
def test_the_drawn_tree_is_the_code_s_tree(root: type[BaseException], doc: str, home: str) -> None:
    drawn = drawn_tree(doc, home)
    code = code_tree(root)
    assert sorted(code) == sorted(drawn), "the drawing and the code name different classes"
    for name, cls in code.items():
        in_tree = [base for base in cls.__bases__ if issubclass(base, root)]
        expected = drawn[name].parent
        if cls is root:
            assert expected is None
            continue
        assert [base.__name__ for base in in_tree] == [expected], f"{name}'s parent"
        others = [
            base.__name__ for base in cls.__bases__ if base not in in_tree and base is not Exception
        ]
        assert others == ([drawn[name].also] if drawn[name].also else []), (
            f"{name} also is {others}, the drawing says {drawn[name].also}"
        )


@pytest.mark.parametrize(("root", "doc", "home"), TREES)
def test_every_drawn_error_is_importable_where_the_drawing_says(
    root: type[BaseException], doc: str, home: str
) -> None:
    code = code_tree(root)
    for name, where in drawn_tree(doc, home).items():
        module = importlib.import_module(where.home)
        assert getattr(module, name, None) is code[name], f"{name} is not in {where.home}"
        assert name in module.__all__, f"{where.home}.__all__ lacks {name}"


def test_the_also_marks_name_builtin_exceptions() -> None:
    for name, where in drawn_tree(LIBRARY_DOC, "failover_client").items():
        if where.also is not None:
            assert isinstance(getattr(builtins, where.also, None), type), (name, where.also)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_exported_error_is_in_a_drawn_tree(package: str) -> None:
    """No public error outside the hierarchy (an exported ``ValueError`` of its own, say)."""
    module = importlib.import_module(package)
    drawn = set(drawn_tree(LIBRARY_DOC, "failover_client")) | set(
        drawn_tree(HARNESS_DOC, "failover_client.testing.brokers")
    )
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, types.ModuleType) or not isinstance(value, type):
            continue
        if issubclass(value, BaseException) and f"{package}.{name}" not in OUTSIDE_BOTH_TREES:
            assert issubclass(value, FailoverClientError | BrokerError), (
                f"{package}.{name} is outside both error trees"
            )
            assert name in drawn, f"{package}.{name} is not drawn"


def test_a_spool_gap_is_a_data_error_not_a_setting() -> None:
    gap = SpoolGap("the spool only reaches 3", option="checkpointLocation")
    assert isinstance(gap, DataError)
    assert not isinstance(gap, ConfigurationError)
    assert gap.option == "checkpointLocation"
