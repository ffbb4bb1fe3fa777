"""The import hook's cost: pending targets are examined only when a module they sit under loads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.revert import module_readiness, toggle

AREA = "def area(w, h):\n    return w * h\n"
PRS = (931, 932, 933)


def fix_of(package: str) -> str:
    return f"""\
        patches:
          - target: {package}.core.area
            edits:
              - match: return w * h
                replacement: return w + h
        """


@pytest.fixture(name="pending")
def pending_fixture(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """PRs 931-933 reverted, each waiting for `waitsN.core` (written, not imported); returns
    the targets the revert state examines from now on (a spy on its one examining step)."""
    for index, pr in enumerate(PRS):
        write_fix(tmp_path / "reg", pr, fix_of(f"waits{index}"))
        modules.write(f"waits{index}.core", AREA)
        modules.write(f"waits{index}.other", "VALUE = 1\n")
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "reg"))
    for pr in PRS:
        toggle.apply_revert(pr)
    examined: list[str] = []
    examine = module_readiness.pending_module

    def spy(target: str, *, finished: str | None) -> str | None:
        examined.append(target)
        return examine(target, finished=finished)

    monkeypatch.setattr(module_readiness, "pending_module", spy)
    return examined


def test_imports_no_pending_target_sits_under_examine_no_pending_target(
    modules: ModuleFactory, pending: list[str]
) -> None:
    modules.load("waits0", "")  # a package of a pending target: its targets are examined
    pending.clear()
    for index in range(20):
        modules.load(f"unrelated{index}.leaf", "VALUE = 1\n")
    modules.load("waits0.other", "VALUE = 1\n")  # same package, not on the target's path
    assert pending == []
    assert [toggle.pending_targets(pr) for pr in PRS] == [
        ("waits0.core.area",),
        ("waits1.core.area",),
        ("waits2.core.area",),
    ]


def test_importing_a_targets_module_examines_that_target_once_per_module_on_its_path(
    modules: ModuleFactory, pending: list[str]
) -> None:
    core = modules.load("waits1.core", AREA)
    assert pending == ["waits1.core.area", "waits1.core.area"]  # waits1, then waits1.core
    assert (toggle.patched_targets(932), core.area(2, 3)) == (("waits1.core.area",), 5)
    assert toggle.pending_targets(931) == ("waits0.core.area",)


def test_a_targets_module_imported_by_another_thread_is_patched_when_that_import_ends(
    modules: ModuleFactory, pending: list[str]
) -> None:
    thread = threading.Thread(target=modules.load, args=("waits2.core", AREA))
    thread.start()
    thread.join(30)
    assert toggle.patched_targets(933) == ("waits2.core.area",)
    assert toggle.pending_targets(933) == ()
