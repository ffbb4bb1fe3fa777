"""Tests for revert.toggle: spec parsing, apply/restore, lazy apply on import, child env."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle import protocol
from prtoggle.errors import PatchApplicationError, RevertSpecError, UnknownPRError
from prtoggle.recipes.registry import Registry, load_registry
from prtoggle.revert import toggle

APP_MODULE = """\
def area(w, h):
    return w * h


class Shape:
    def sides(self):
        return 4
"""
TWO_TARGET_FIX = """\
pr: {pr}
title: two targets
patches:
  - target: app.area
    edits:
      - match: return w * h
        replacement: return w + h
  - target: {second}
    edits:
      - match: return 4
        replacement: return 3
"""


def registry_with(tmp_path: Path, pr: int = 911, second: str = "app.Shape.sides") -> Registry:
    write_fix(tmp_path / "reg", pr, TWO_TARGET_FIX.format(pr=pr, second=second))
    return load_registry(dirs=[tmp_path / "reg"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ()),
        ("  ", ()),
        ("911", (911,)),
        ("912, 911", (912, 911)),
        ("911 912", (911, 912)),
        ("911,912 911", (911, 912)),
        ("ALL", (911, 912)),
    ],
)
def test_revert_spec_accepts_numbers_lists_and_all(value: str, expected: tuple[int, ...]) -> None:
    assert toggle.parse_revert_spec(value, registered=[912, 911]) == expected


def test_malformed_revert_spec_lists_registered_prs() -> None:
    with pytest.raises(RevertSpecError) as caught:
        toggle.parse_revert_spec("911,,912", registered=[912, 911])
    assert str(caught.value) == (
        "SGLANG_DEBUG_REVERT_PR='911,,912': '' is not a PR number; expected PR numbers "
        "or COLLECTION:PR (e.g. sglang:27460) separated by commas or spaces, or 'all'; "
        "registered PRs: 911, 912"
    )


def test_unknown_pr_in_revert_spec_lists_registered_prs() -> None:
    with pytest.raises(UnknownPRError) as caught:
        toggle.parse_revert_spec("7", registered=[911], source="-r")
    assert str(caught.value) == "-r='7': PR 7 is not registered; registered PRs: 911"


def test_apply_then_restore_puts_back_the_identical_code_objects(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    originals = (app.area.__code__, app.Shape.sides.__code__)
    registry = registry_with(tmp_path)
    toggle.apply_revert(911, registry=registry)
    toggle.apply_revert(911, registry=registry)
    assert (app.area(2, 3), app.Shape().sides()) == (5, 3)
    assert toggle.is_reverted(911) and toggle.active_reverts() == (911,)
    toggle.restore(911)
    assert (app.area.__code__, app.Shape.sides.__code__) == originals
    assert app.area.__code__ is originals[0] and app.Shape.sides.__code__ is originals[1]
    assert not toggle.is_reverted(911)


def test_a_fix_whose_second_target_fails_leaves_nothing_patched(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    original = app.area.__code__
    registry = registry_with(tmp_path, second="app.Shape.corners")
    with pytest.raises(PatchApplicationError) as caught:
        toggle.apply_revert(911, registry=registry)
    assert str(caught.value) == (
        "app.Shape.corners: app.Shape has no attribute 'corners'; it has: sides"
    )
    assert app.area.__code__ is original
    assert toggle.active_reverts() == ()


def test_reverted_context_nests_and_restores_only_what_it_applied(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    registry = registry_with(tmp_path)
    with toggle.reverted(911, registry=registry) as prs:
        assert prs == (911,)
        with toggle.reverted(911, registry=registry):
            assert app.area(2, 3) == 5
        assert toggle.is_reverted(911)
    assert app.area(2, 3) == 6
    assert not toggle.is_reverted(911)


def test_fix_is_applied_when_its_module_is_first_imported(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    modules.write("app", APP_MODULE)
    toggle.apply_revert(911, registry=registry_with(tmp_path))
    assert "app" not in sys.modules
    assert toggle.active_reverts() == (911,) and toggle.is_reverted(911)
    assert toggle.patched_targets(911) == ()
    assert toggle.pending_targets(911) == ("app.area", "app.Shape.sides")
    import app  # type: ignore[import-not-found]

    assert app.area(2, 3) == 5
    assert toggle.patched_targets(911) == ("app.area", "app.Shape.sides")
    assert toggle.pending_targets(911) == ()
    assert type(app.__loader__).__name__ == "SourceFileLoader"


def test_fix_split_over_an_imported_and_a_pending_module_is_patched_target_by_target(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    modules.write("later", "def sides():\n    return 4\n")
    toggle.apply_revert(911, registry=registry_with(tmp_path, second="later.sides"))
    assert app.area(2, 3) == 5
    assert toggle.is_reverted(911)
    assert (toggle.patched_targets(911), toggle.pending_targets(911)) == (
        ("app.area",),
        ("later.sides",),
    )
    import later  # type: ignore[import-not-found]

    assert later.sides() == 3
    assert (toggle.patched_targets(911), toggle.pending_targets(911)) == (
        ("app.area", "later.sides"),
        (),
    )
    toggle.restore(911)
    assert (app.area(2, 3), later.sides()) == (6, 4)


def test_edit_failing_at_import_time_fails_the_import_and_unreverts_the_fix(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    modules.write("later", "def sides():\n    return 5\n")
    toggle.apply_revert(911, registry=registry_with(tmp_path, second="later.sides"))
    with pytest.raises(PatchApplicationError) as caught:
        import later  # type: ignore[import-not-found]  # noqa: F401
    assert str(caught.value).startswith(
        "PR 911 could not be reverted when later was imported, so it is not reverted at all: "
        "later.sides: edit 1 of 1 ("
    )
    assert app.area(2, 3) == 6
    assert toggle.active_reverts() == ()


def test_maybe_revert_pr_fix_reads_the_environment_and_is_idempotent(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = modules.load("app", APP_MODULE)
    registry_with(tmp_path)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "reg"))
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", "911")
    assert toggle.maybe_revert_pr_fix() == (911,)
    assert toggle.maybe_revert_pr_fix() == (911,)
    assert app.area(2, 3) == 5
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", "")
    assert toggle.maybe_revert_pr_fix() == ()


def test_concurrent_apply_and_restore_end_consistent(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    original = app.area.__code__
    registry = registry_with(tmp_path)

    failures: list[BaseException] = []

    def churn() -> None:
        try:
            for _ in range(50):
                with toggle.reverted(911, registry=registry):
                    app.area(2, 3)
        except BaseException as exc:  # recorded for the main thread to report
            failures.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert toggle.active_reverts() == ()
    assert app.area.__code__ is original


def test_overlapping_blocks_in_two_threads_keep_the_fix_until_the_last_leaves(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    registry = registry_with(tmp_path)
    b_entered, a_left, b_may_leave = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def thread_a() -> None:
        with toggle.reverted(911, registry=registry):
            b_entered.wait(10)
        a_left.set()

    def thread_b() -> None:
        with toggle.reverted(911, registry=registry):
            b_entered.set()
            a_left.wait(10)
            seen["after A left"] = app.area(2, 3)
            b_may_leave.wait(10)

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    threads[0].start()
    threads[1].start()
    a_left.wait(10)
    threads[0].join(10)
    assert toggle.is_reverted(911)
    b_may_leave.set()
    threads[1].join(10)
    assert seen == {"after A left": 5}
    assert (toggle.is_reverted(911), app.area(2, 3)) == (False, 6)


def test_apply_revert_and_a_block_hold_the_fix_independently(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    registry = registry_with(tmp_path)
    with toggle.reverted(911, registry=registry):
        toggle.apply_revert(911, registry=registry)
    assert app.area(2, 3) == 5
    with toggle.reverted(911, registry=registry):
        toggle.restore(911)
        assert app.area(2, 3) == 5
    assert (toggle.active_reverts(), app.area(2, 3)) == ((), 6)


def test_a_pr_in_two_collections_reverts_both_and_restores_both(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    app = modules.load("app", APP_MODULE)
    write_fix(tmp_path / "engine", 911, TWO_TARGET_FIX.format(pr=911, second="app.Shape.sides"))
    write_fix(
        tmp_path / "sglang",
        911,
        "patches:\n  - target: absent_engine.srt.f\n    edits:\n      - match: a\n",
    )
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    with toggle.reverted(911, registry=registry):
        assert (app.area(2, 3), toggle.is_reverted(911)) == (5, True)
        assert toggle.patched_targets(911) == ("app.area", "app.Shape.sides")
        assert toggle.pending_targets(911) == ("absent_engine.srt.f",)
    assert (app.area(2, 3), toggle.active_reverts()) == (6, ())


def test_child_env_puts_the_bootstrap_first_and_sets_the_revert_list() -> None:
    env = toggle.child_env([911, 912], base={"PYTHONPATH": "/a", "KEEP": "1"})
    assert env == {
        "PYTHONPATH": f"{toggle.BOOTSTRAP_DIR}{os.pathsep}/a",
        "KEEP": "1",
        "SGLANG_DEBUG_REVERT_PR": "911,912",
    }
    assert (toggle.BOOTSTRAP_DIR / "sitecustomize.py").is_file()


OUTSIDE_MODULE = """\
def describe(items):
    total = sum(items)
    if not items:
        return "empty"
    label = "sum"
    return f"{label}={total}"


class Counter:
    def bump(self, n):
        n = n + 1
        return n
"""
SGLANG_FORMAT_FIX = """\
pr: 913
title: outside module, all four edit forms
patches:
  - target: outside.describe
    edits:
      - match: |
          if not items:
              return "empty"
        replacement: ""
      - match: label = "sum"
        replacement: |
          label = "total"
      - match: return f"{label}={total}"
        prepend: |
          total = total * 10
  - target: outside.Counter.bump
    edits:
      - match: n = n + 1
        append: |
          n = n + 100
"""
CHILD_PROGRAM = """\
import sys
import outside
print(outside.describe([]), outside.describe([1, 2]), outside.Counter().bump(1))
print("prtoggle imported by program:", "prtoggle.cli.main" in sys.modules)
"""


def run_child(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD_PROGRAM],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sglang_format_fix_changes_an_outside_module_only_in_a_reverting_child(
    tmp_path: Path,
) -> None:
    (tmp_path / "outside.py").write_text(OUTSIDE_MODULE)
    write_fix(tmp_path / "reg", 913, SGLANG_FORMAT_FIX)
    base = {**os.environ, "PRTOGGLE_YAML_PATH": str(tmp_path / "reg"), "PYTHONPATH": str(tmp_path)}
    base.pop("SGLANG_DEBUG_REVERT_PR", None)
    reverted_run = run_child(tmp_path, toggle.child_env([913], base=base))
    plain_run = run_child(tmp_path, toggle.child_env([], base=base))
    untouched_run = run_child(tmp_path, base)
    assert (reverted_run.returncode, reverted_run.stdout) == (
        0,
        "total=0 total=30 102\nprtoggle imported by program: False\n",
    ), reverted_run.stderr
    assert plain_run.stdout == "empty sum=3 2\nprtoggle imported by program: False\n"
    assert untouched_run.stdout == plain_run.stdout


def test_child_with_a_bad_revert_spec_stops_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text(OUTSIDE_MODULE)
    write_fix(tmp_path / "reg", 913, SGLANG_FORMAT_FIX)
    env = toggle.child_env(
        [],
        base={
            **os.environ,
            "PRTOGGLE_YAML_PATH": str(tmp_path / "reg"),
            "PRTOGGLE_SGLANG_UPSTREAM": "0",
            "PYTHONPATH": str(tmp_path),
        },
    )
    env["SGLANG_DEBUG_REVERT_PR"] = "913x"
    result = run_child(tmp_path, env)
    assert result.returncode == protocol.BOOTSTRAP_FAILURE_EXIT_CODE
    assert result.stdout == ""
    assert result.stderr.endswith(
        "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: SGLANG_DEBUG_REVERT_PR='913x': '913x' "
        "is not a PR number; expected PR numbers or COLLECTION:PR (e.g. sglang:27460) "
        "separated by commas or spaces, or 'all'; "
        "registered PRs: " + ", ".join(str(pr) for pr in registered_prs(tmp_path)) + "\n"
    )


def test_bootstrap_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.CHAINED = 'yes'\n")
    env = toggle.child_env([], base={**os.environ, "PYTHONPATH": str(other)})
    result = subprocess.run(
        [sys.executable, "-c", "print(CHAINED)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "yes\n"), result.stderr


def registered_prs(tmp_path: Path) -> tuple[int, ...]:
    from prtoggle.recipes.registry import yaml_dirs_from_env

    return load_registry(dirs=yaml_dirs_from_env(str(tmp_path / "reg"))).prs()


def test_toggle_import_stays_torch_free() -> None:
    code = "import sys, prtoggle; prtoggle.is_reverted(1); print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr


def test_module_type_is_plain_after_lazy_patching(modules: ModuleFactory, tmp_path: Path) -> None:
    modules.write("app", APP_MODULE)
    toggle.apply_revert(911, registry=registry_with(tmp_path))
    import app  # type: ignore[import-not-found]

    assert isinstance(app, types.ModuleType)
    assert type(app.__spec__.loader).__name__ == "SourceFileLoader"


def test_the_package_exports_the_revert_state_queries() -> None:
    import prtoggle

    assert (prtoggle.patched_targets, prtoggle.pending_targets) == (
        toggle.patched_targets,
        toggle.pending_targets,
    )
    assert set(prtoggle.__all__) >= {"is_reverted", "patched_targets", "pending_targets"}
