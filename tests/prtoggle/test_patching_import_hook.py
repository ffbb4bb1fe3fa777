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
