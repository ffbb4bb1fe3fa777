"""Tests for prtoggle.patching.import_hook: callback after exec_module, loader put back."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest
from revert_fixtures import ModuleFactory, modules_fixture  # noqa: F401

from prtoggle.patching.import_hook import ModuleLoadedFinder


@pytest.fixture
def loaded() -> Iterator[tuple[list[tuple[str, bool]], ModuleLoadedFinder]]:
    events: list[tuple[str, bool]] = []

    def on_loaded(name: str) -> None:
        events.append((name, hasattr(sys.modules[name], "VALUE")))

    finder = ModuleLoadedFinder(
        is_watched=lambda name: name.startswith("watched"), on_loaded=on_loaded
    )
    finder.install()
    yield events, finder
    finder.uninstall()


def test_watched_module_is_reported_after_its_body_ran_and_keeps_its_loader(
    modules: ModuleFactory, loaded: tuple[list[tuple[str, bool]], ModuleLoadedFinder]
) -> None:
    events, _finder = loaded
    modules.write("watched_pkg.mod", "VALUE = 1\n")
    module = importlib.import_module("watched_pkg.mod")
    assert events == [("watched_pkg", False), ("watched_pkg.mod", True)]
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__ is not None and module.__spec__.loader is module.__loader__


def test_unwatched_module_is_left_alone(
    modules: ModuleFactory, loaded: tuple[list[tuple[str, bool]], ModuleLoadedFinder]
) -> None:
    events, finder = loaded
    modules.write("plain", "VALUE = 1\n")
    importlib.import_module("plain")
    assert events == []
    assert sys.meta_path[0] is finder
    finder.uninstall()
    finder.uninstall()
    assert finder not in sys.meta_path


def test_every_import_that_reaches_the_finders_is_announced_watched_or_not(
    modules: ModuleFactory,
) -> None:
    requested: list[str] = []
    finder = ModuleLoadedFinder(
        is_watched=lambda name: False, on_loaded=lambda name: None, on_requested=requested.append
    )
    finder.install()
    try:
        modules.write("announced.inner", "VALUE = 1\n")
        importlib.import_module("announced.inner")
        importlib.import_module("announced.inner")  # already in sys.modules: no finder asked
    finally:
        finder.uninstall()
    assert requested == ["announced", "announced.inner"]


def test_install_puts_the_finder_back_in_front_of_a_later_finder() -> None:
    finder = ModuleLoadedFinder(is_watched=lambda name: False, on_loaded=lambda name: None)
    other = ModuleLoadedFinder(is_watched=lambda name: False, on_loaded=lambda name: None)
    finder.install()
    sys.meta_path.insert(0, other)
    try:
        finder.install()
        assert sys.meta_path[:2] == [finder, other]
        assert sys.meta_path.count(finder) == 1
    finally:
        sys.meta_path.remove(other)
        finder.uninstall()


def test_two_finders_watching_one_module_are_each_notified_once_and_put_its_loader_back(
    modules: ModuleFactory,
) -> None:
    events: list[str] = []
    first = ModuleLoadedFinder(
        is_watched=lambda name: name == "shared_watch", on_loaded=events.append
    )
    second = ModuleLoadedFinder(
        is_watched=lambda name: name == "shared_watch", on_loaded=lambda name: events.append("2")
    )
    second.install()
    first.install()
    try:
        modules.write("shared_watch", "VALUE = 1\n")
        module = importlib.import_module("shared_watch")
    finally:
        first.uninstall()
        second.uninstall()
    assert events == ["2", "shared_watch"]
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__ is not None and module.__spec__.loader is module.__loader__
