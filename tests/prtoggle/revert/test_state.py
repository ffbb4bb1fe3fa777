"""Tests for prtoggle.revert.state: holds, pending targets of half-imported modules, reports."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.errors import PatchApplicationError, VersionRangeError
from prtoggle.recipes.registry import load_registry
from prtoggle.revert import state as revert_state
from prtoggle.revert import toggle

FIX = """\
patches:
  - target: selfrev.area
    edits:
      - match: return w * h
        replacement: return w + h
"""
# A module that asks for its own revert while it is still being imported.
SELF_REVERTING = """\
def area(w, h):
    return w * h


from prtoggle.revert import toggle

toggle.apply_revert(921)
STATE_DURING_IMPORT = (toggle.patched_targets(921), toggle.pending_targets(921))
"""


@pytest.fixture(name="registry_dir")
def registry_dir_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_fix(tmp_path / "reg", 921, FIX)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "reg"))
    return tmp_path / "reg"


def test_a_target_of_a_module_still_being_imported_waits_until_it_has_finished(
    modules: ModuleFactory, registry_dir: Path
) -> None:
    selfrev = modules.load("selfrev", SELF_REVERTING)
    assert selfrev.STATE_DURING_IMPORT == ((), ("selfrev.area",))
    modules.load("any_later_import", "VALUE = 1\n")  # the next import notices it finished
    assert toggle.patched_targets(921) == ("selfrev.area",)
    assert selfrev.area(2, 3) == 5


def test_a_module_that_reverts_itself_while_importing_is_patched_when_its_import_ends(
    modules: ModuleFactory, registry_dir: Path
) -> None:
    selfrev = modules.load("selfrev", SELF_REVERTING)
    assert selfrev.STATE_DURING_IMPORT == ((), ("selfrev.area",))
    assert revert_state.unapplied_imported_targets() == {}
    assert toggle.patched_targets(921) == ("selfrev.area",)
    assert selfrev.area(2, 3) == 5


def test_holds_are_released_one_kind_at_a_time(modules: ModuleFactory, tmp_path: Path) -> None:
    modules.write("selfrev", "def area(w, h):\n    return w * h\n")
    write_fix(tmp_path / "other", 921, FIX)
    registry = load_registry(dirs=[tmp_path / "other"])
    with revert_state.locked():
        revert_state.hold(921, registry, pin=False)
        revert_state.hold(921, registry, pin=False)
        revert_state.hold(921, registry, pin=True)
        revert_state.release(921, pin=True)
        revert_state.release(921, pin=False)
        assert revert_state.held_prs() == (921,)
        assert revert_state.targets_of(921) == ((), ("selfrev.area",))
        revert_state.release(921, pin=False)
        assert revert_state.held_prs() == ()
    assert "selfrev" not in sys.modules


RANGED_FIX = """\
applies_to: prtoggle-fake-ranged>=1.0,<2.0
patches:
  - target: ranged.area
    edits:
      - match: return w * h
        replacement: return w + h
"""


def install_ranged_distribution(root: Path, version: str) -> None:
    dist_info = root / f"prtoggle_fake_ranged-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: prtoggle-fake-ranged\nVersion: {version}\n"
    )


def test_a_revert_outside_the_installed_versions_range_is_refused_now_or_at_import(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_fix(tmp_path / "pack", 924, RANGED_FIX)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "pack"))
    install_ranged_distribution(modules.root, "2.1")
    why = (
        f"pack/924 does not apply to the installed prtoggle-fake-ranged 2.1: {path} covers "
        "prtoggle-fake-ranged>=1.0,<2.0 (applies_to); use a recipe for 2.1 or install a "
        "version in that range"
    )
    toggle.apply_revert(924)  # not imported yet: pending, as any target
    assert toggle.pending_targets(924) == ("ranged.area",)
    with pytest.raises(PatchApplicationError) as at_import:
        modules.load("ranged", "def area(w, h):\n    return w * h\n")
    assert str(at_import.value) == (
        f"PR 924 could not be reverted when ranged was imported, so it is not reverted at "
        f"all: {why}"
    )
    assert not toggle.is_reverted(924)
    ranged = importlib.import_module("ranged")  # nothing pending now: the import succeeds
    with pytest.raises(VersionRangeError) as now:
        toggle.apply_revert(924)
    assert str(now.value) == why
    assert (toggle.is_reverted(924), ranged.area(2, 3)) == (False, 6)


def test_a_revert_inside_the_installed_versions_range_applies(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fix(tmp_path / "pack", 924, RANGED_FIX)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "pack"))
    install_ranged_distribution(modules.root, "1.4")
    ranged = modules.load("ranged", "def area(w, h):\n    return w * h\n")
    with toggle.reverted(924):
        assert ranged.area(2, 3) == 5
    assert ranged.area(2, 3) == 6


def test_a_fix_outside_its_range_is_left_out_where_another_collection_reverts_the_pr(
    modules: ModuleFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_fix(tmp_path / "demo", 924, FIX.replace("selfrev.area", "demo_area.area"))
    path = write_fix(tmp_path / "pack", 924, RANGED_FIX)
    monkeypatch.setenv(
        "PRTOGGLE_YAML_PATH", os.pathsep.join([str(tmp_path / "demo"), str(tmp_path / "pack")])
    )
    install_ranged_distribution(modules.root, "2.1")
    ranged = modules.load("ranged", "def area(w, h):\n    return w * h\n")
    demo = modules.load("demo_area", "def area(w, h):\n    return w * h\n")
    with caplog.at_level("WARNING", logger="prtoggle.revert.state"), toggle.reverted(924):
        assert (demo.area(2, 3), ranged.area(2, 3)) == (5, 6)
        assert toggle.patched_targets(924) == ("demo_area.area",)
    assert [record.getMessage() for record in caplog.records] == [
        f"pack/924 does not apply to the installed prtoggle-fake-ranged 2.1: {path} covers "
        "prtoggle-fake-ranged>=1.0,<2.0 (applies_to); use a recipe for 2.1 or install a "
        "version in that range; left out, demo/924 reverted instead"
    ]
