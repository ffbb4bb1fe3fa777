"""Tests for prtoggle.patching.module_events: the end of an import under way, reloads."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys

import pytest
from revert_fixtures import ModuleFactory, modules_fixture  # noqa: F401

from prtoggle.patching.module_events import ReloadWatch, call_when_initialised

# A module that registers a callback for its own import while that import runs.
SELF_WATCHING = """\
import sys
from prtoggle.patching.module_events import call_when_initialised

EVENTS = []
SEEN = getattr(sys, "_prtoggle_test_seen", [])  # the test's list, which outlives the module
REGISTERED = call_when_initialised(
    sys.modules[__name__], lambda name: (EVENTS.append((name, DONE)), SEEN.append(name))
)
DONE = True
"""


def test_the_callback_runs_once_when_the_import_ends_and_the_spec_class_comes_back(
    modules: ModuleFactory,
) -> None:
    module = modules.load("selfwatch", SELF_WATCHING)
    assert (module.REGISTERED, module.EVENTS) == (True, [("selfwatch", True)])
    assert type(module.__spec__) is importlib.machinery.ModuleSpec
    module.__spec__._initializing = False  # type: ignore[union-attr]
    assert module.EVENTS == [("selfwatch", True)]


def test_a_failed_import_calls_nothing(
    modules: ModuleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    monkeypatch.setattr(sys, "_prtoggle_test_seen", seen, raising=False)
    modules.load("selfwatch_ok", SELF_WATCHING)
    modules.write("selfwatch_fails", SELF_WATCHING + "raise ValueError('broken')\n")
    with pytest.raises(ValueError, match="broken"):
        importlib.import_module("selfwatch_fails")
    assert "selfwatch_fails" not in sys.modules
    assert seen == ["selfwatch_ok"]


def test_a_module_not_being_imported_registers_nothing(modules: ModuleFactory) -> None:
    module = modules.load("plainmod", "VALUE = 1\n")
    assert call_when_initialised(module, lambda name: None) is False
    assert type(module.__spec__) is importlib.machinery.ModuleSpec


def test_a_reload_of_a_watched_module_is_reported_and_an_import_is_not(
    modules: ModuleFactory,
) -> None:
    reloaded: list[str] = []
    before = list(sys.meta_path)  # sglang_toggle's finder may be installed for good already
    watch = ReloadWatch(on_reloaded=reloaded.append)
    watch.watch(["reloadable", "fresh"])
    try:
        module = modules.load("reloadable", "VALUE = 1\n")
        modules.load("fresh", "VALUE = 1\n")
        assert reloaded == []
        importlib.reload(module)
        assert reloaded == ["reloadable"]
        assert module.__spec__.loader is not None
        assert type(module.__spec__.loader).__name__ == "SourceFileLoader"
    finally:
        watch.watch([])
    assert sys.meta_path == before
