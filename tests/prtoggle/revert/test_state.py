"""Tests for prtoggle.revert.state: holds, pending targets of half-imported modules, reports."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.errors import RevertSpecError
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


def test_a_revert_outside_the_installed_versions_range_is_refused_before_anything_is_patched(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_fix(tmp_path / "pack", 924, RANGED_FIX)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "pack"))
    install_ranged_distribution(modules.root, "2.1")
    why = (
        "924: no recipe applies to the installed code: pack/924 is out of range: installed "
        "prtoggle-fake-ranged 2.1, range prtoggle-fake-ranged>=1.0,<2.0; use a recipe for "
        "the installed version or install a version in that range"
    )
    assert path.is_file()
    with pytest.raises(RevertSpecError) as before_import:
        toggle.apply_revert(924)  # refused up front, not left pending
    assert str(before_import.value) == why
    assert (toggle.is_reverted(924), toggle.pending_targets(924)) == (False, ())
    ranged = modules.load("ranged", "def area(w, h):\n    return w * h\n")
    with pytest.raises(RevertSpecError) as now:
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
    assert path.is_file()
    with caplog.at_level("WARNING", logger="prtoggle"), toggle.reverted(924):
        assert (demo.area(2, 3), ranged.area(2, 3)) == (5, 6)
        assert toggle.patched_targets(924) == ("demo_area.area",)
        assert toggle.is_reverted("demo:924") and not toggle.is_reverted("pack:924")
    assert caplog.records == []  # the rule left pack/924 out before anything was patched
