"""The generic registry behind policy and topology-source names, tested on its own."""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable, Collection, Sequence
from typing import cast

import pytest

from failover_client import ConfigurationError
from failover_client._registry import EntryPointFailure, NamedRegistry

GROUP = "failover_client.test_widgets"

Factory = Callable[[], str]


def make_a() -> str:
    return "a"


def make_b() -> str:
    return "b"


class Unknown(ConfigurationError):
    """Stands for a registry's own unknown-name error; keeps what it was given."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = list(known)
        super().__init__(f"unknown widget {name!r}; known: {', '.join(known)}")


class Broken(ConfigurationError):
    """Stands for a registry's own load error; keeps the failure it was built from."""

    def __init__(self, failure: EntryPointFailure) -> None:
        self.failure = failure
        super().__init__(f"widget {failure.name!r} is broken")


class FakeEntryPoint:
    """Duck-types EntryPoint so a test controls what importing it does and counts the imports."""

    def __init__(self, name: str, load: Callable[[], object]) -> None:
        self.name = name
        self.value = f"widgets:{name}"
        self.group = GROUP
        self._load = load
        self.loads = 0

    def load(self) -> object:
        self.loads += 1
        return self._load()


def pinned(*entry_points: FakeEntryPoint) -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: cast(importlib.metadata.EntryPoint, ep) for ep in entry_points}


def widgets(
    *, reserved: Collection[str] = (), builtin_kind: str | None = None, show: bool = False
) -> NamedRegistry[Factory]:
    """A registry with one built-in, ``plain``, and no entry points unless a test pins some."""
    made: NamedRegistry[Factory] = NamedRegistry(
        kind="widget",
        group=GROUP,
        builtins={"plain": make_a},
        unknown=Unknown,
        broken=Broken,
        reserved=reserved,
        builtin_kind=builtin_kind,
        show_rejected_factory=show,
    )
    made.reset(entry_points={})
    return made


@pytest.fixture
def registry() -> NamedRegistry[Factory]:
    return widgets(reserved={"Plain"})


# --- registration ------------------------------------------------------------------------------


def test_builtins_are_listed_and_found(registry: NamedRegistry[Factory]) -> None:
    assert registry.names() == ["plain"]
    assert registry.factory("plain") is make_a
    assert registry.require("plain") == "plain"


def test_register_replace_and_unregister(registry: NamedRegistry[Factory]) -> None:
    registry.register("mine", make_a)
    assert registry.factory("mine") is make_a
    assert registry.names() == ["mine", "plain"]
    with pytest.raises(
        ConfigurationError,
        match=r"^widget 'mine' is already registered; pass replace=True to replace it$",
    ):
        registry.register("mine", make_b)
    assert registry.factory("mine") is make_a  # a refused registration changes nothing
    registry.register("mine", make_b, replace=True)
    assert registry.factory("mine") is make_b
    registry.unregister("mine")
    assert registry.names() == ["plain"]
    with pytest.raises(Unknown) as caught:
        registry.factory("mine")
    assert caught.value.known == ["plain"]


def test_unregister_lists_only_what_can_be_removed(registry: NamedRegistry[Factory]) -> None:
    registry.register("mine", make_a)
    with pytest.raises(Unknown) as caught:
        registry.unregister("plain")  # built in: never registered, so not removable
    assert caught.value.name == "plain"
    assert caught.value.known == ["mine"]


@pytest.mark.parametrize("name", ["plain", "Plain"])
def test_builtins_and_reserved_names_cannot_be_replaced(
    registry: NamedRegistry[Factory], name: str
) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"^widget {name!r} is built in and cannot be replaced$"
    ):
        registry.register(name, make_b, replace=True)
    assert registry.factory("plain") is make_a


def test_builtin_wording_can_name_what_is_refused() -> None:
    registry = widgets(builtin_kind="widget name")
    with pytest.raises(ConfigurationError, match=r"^widget name 'plain' is built in"):
        registry.register("plain", make_b)


@pytest.mark.parametrize("name", ["", " x", "a b", "pkg:factory", "a/b", "-x", ".x"])
def test_bad_names_are_refused(registry: NamedRegistry[Factory], name: str) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^widget name .* must start with a letter or digit and contain only letters, ",
    ):
        registry.register(name, make_a)
    assert registry.names() == ["plain"]


@pytest.mark.parametrize(
    ("show", "message"),
    [
        (False, "widget factory for 'x' is not callable"),
        (True, "widget factory for 'x' is not callable: 42"),
    ],
)
def test_a_factory_that_is_not_callable_is_refused(show: bool, message: str) -> None:
    registry = widgets(show=show)
    with pytest.raises(ConfigurationError) as caught:
        registry.register("x", 42)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_unknown_name_reports_the_spelling_asked_for(registry: NamedRegistry[Factory]) -> None:
    with pytest.raises(Unknown) as caught:
        registry.require("nope", asked="Nope")
    assert caught.value.name == "Nope"
    assert caught.value.known == ["plain"]
    with pytest.raises(Unknown) as caught:
        registry.factory("nope", asked="Nope")
    assert caught.value.name == "Nope"


# --- entry points ------------------------------------------------------------------------------


def test_entry_point_is_listed_without_import_and_loaded_once(
    registry: NamedRegistry[Factory],
) -> None:
    plugin = FakeEntryPoint("plugin", lambda: make_b)
    registry.reset(entry_points=pinned(plugin))
    assert registry.names() == ["plain", "plugin"]
    assert registry.require("plugin") == "plugin"
    assert plugin.loads == 0
    assert registry.factory("plugin") is make_b
    assert registry.factory("plugin") is make_b
    assert plugin.loads == 1


def test_entry_point_is_loaded_outside_the_lock(registry: NamedRegistry[Factory]) -> None:
    # A plugin's import may look names up itself. Done from another thread, so that a lock
    # held during the import shows as a lookup that cannot finish rather than as a hung test.
    seen: list[list[str]] = []

    def load() -> object:
        lookup = threading.Thread(target=lambda: seen.append(registry.names()))
        lookup.start()
        lookup.join(timeout=5.0)
        assert not lookup.is_alive(), "the registry's lock was held while importing a plugin"
        return make_b

    registry.reset(entry_points=pinned(FakeEntryPoint("plugin", load)))
    assert registry.factory("plugin") is make_b
    assert seen == [["plain", "plugin"]]


def test_concurrent_first_uses_all_get_the_first_stored_factory(
    registry: NamedRegistry[Factory],
) -> None:
    # Two threads import the same plugin at once (possible, as the import runs unlocked) and
    # each import makes a new function: both callers must still get the same factory.
    both_loading = threading.Barrier(2, timeout=5.0)

    def load() -> object:
        both_loading.wait()
        return lambda: "fresh"

    plugin = FakeEntryPoint("plugin", load)
    registry.reset(entry_points=pinned(plugin))
    got: list[Factory] = []
    threads = [
        threading.Thread(target=lambda: got.append(registry.factory("plugin"))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5.0)
    assert plugin.loads == 2
    assert len(got) == 2
    assert got[0] is got[1]
    assert registry.factory("plugin") is got[0]


def test_a_failing_entry_point_gives_the_registrys_own_error(
    registry: NamedRegistry[Factory],
) -> None:
    def load() -> object:
        raise ModuleNotFoundError("no module named 'widgets'")

    plugin = FakeEntryPoint("plugin", load)
    registry.reset(entry_points=pinned(plugin))
    with pytest.raises(Broken) as caught:
        registry.factory("plugin", asked="Plugin")
    failure = caught.value.failure
    assert failure.name == "plugin"  # the registry's name, not the spelling asked for
    assert failure.entry_point is cast(object, plugin)
    assert failure.known == ["plain", "plugin"]
    assert isinstance(failure.error, ModuleNotFoundError)
    assert failure.error_text == "ModuleNotFoundError: no module named 'widgets'"
    assert caught.value.__cause__ is failure.error
    # A failed import is not cached: a fixed environment is picked up on the next use.
    with pytest.raises(Broken):
        registry.factory("plugin")
    assert plugin.loads == 2


def test_an_entry_point_that_is_not_callable_gives_the_registrys_own_error(
    registry: NamedRegistry[Factory],
) -> None:
    registry.reset(entry_points=pinned(FakeEntryPoint("plugin", lambda: 42)))
    with pytest.raises(Broken) as caught:
        registry.factory("plugin")
    assert caught.value.failure.error is None
    assert caught.value.failure.loaded == 42


def test_builtins_and_registrations_win_over_entry_points(
    registry: NamedRegistry[Factory],
) -> None:
    shadowed = FakeEntryPoint("plain", lambda: make_b)
    mine = FakeEntryPoint("mine", lambda: make_b)
    registry.reset(entry_points=pinned(shadowed, mine))
    registry.register("mine", make_a)
    assert registry.factory("plain") is make_a
    assert registry.factory("mine") is make_a
    assert shadowed.loads == mine.loads == 0


def test_metadata_is_read_only_when_a_name_is_not_at_hand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        calls.append(group)
        return [importlib.metadata.EntryPoint("found", f"{__name__}:make_b", group)]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    registry = widgets()
    registry.reset()  # unpinned: entry points come from (faked) package metadata again
    assert registry.factory("plain") is make_a
    assert calls == []
    assert registry.factory("found") is make_b
    assert registry.names() == ["found", "plain"]
    assert calls == [GROUP]  # listed once, then cached


def test_reset_forgets_registrations_loads_and_pinned_entry_points(
    registry: NamedRegistry[Factory],
) -> None:
    plugin = FakeEntryPoint("plugin", lambda: make_b)
    registry.reset(entry_points=pinned(plugin))
    registry.register("mine", make_a)
    registry.factory("plugin")
    registry.reset(entry_points={})
    assert registry.names() == ["plain"]
    registry.reset(entry_points=pinned(plugin))
    registry.factory("plugin")
    assert plugin.loads == 2
