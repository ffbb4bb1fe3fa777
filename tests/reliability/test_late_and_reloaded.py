"""A revert asked for mid-import lands when that import ends; a reload keeps it (issue 19.2, 19.3).

Real processes, real files: a package whose own `__init__` asks for the revert of a function
it has just defined, another thread importing the target's module while the revert is
asked for, and `importlib.reload` of a patched module (unchanged, and edited on disk).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
SELF_PR, THREAD_PR, RELOAD_PR = 99321, 99322, 99323
MODULES = {
    "selfrev/__init__.py": """\
        def f():
            return 1


        from prtoggle.revert import toggle

        toggle.maybe_revert_pr_fix()
        """,
    "slowmod.py": """\
        import os, time


        def g():
            return 1


        open(os.environ["STARTED"], "w").close()
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.01)
        """,
    "reloadme.py": """\
        def h():
            return 1
        """,
}
TARGETS = {SELF_PR: "selfrev.f", THREAD_PR: "slowmod.g", RELOAD_PR: "reloadme.h"}


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    for name, text in MODULES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for pr, target in TARGETS.items():
        (recipes / f"{pr}.yaml").write_text(
            f"pr: {pr}\ntitle: fix {pr}\npatches:\n  - target: {target}\n    edits:\n"
            "      - match: return 1\n        replacement: return 2\n"
        )
    return tmp_path


def run(project: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
        "STARTED": str(project / "started"),
        "GO": str(project / "go"),
        "SGLANG_DEBUG_REVERT_PR": "",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_revert_asked_for_by_the_packages_own_init_lands_when_its_import_ends(
    project: Path,
) -> None:
    code = f"""\
        import selfrev
        from prtoggle.revert import toggle
        print(selfrev.f(), toggle.patched_targets({SELF_PR}), toggle.pending_targets({SELF_PR}))
        """
    result = run(project, code, SGLANG_DEBUG_REVERT_PR=str(SELF_PR))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "2 ('selfrev.f',) ()\n"


def test_a_revert_asked_for_while_another_thread_imports_lands_when_that_import_ends(
    project: Path,
) -> None:
    code = f"""\
        import os, sys, threading, time
        from prtoggle.revert import toggle
        importer = threading.Thread(target=__import__, args=("slowmod",))
        importer.start()
        while not os.path.exists(os.environ["STARTED"]):
            time.sleep(0.01)
        with toggle.reverted({THREAD_PR}):
            print(toggle.pending_targets({THREAD_PR}))
            open(os.environ["GO"], "w").close()
            importer.join()
            slowmod = sys.modules["slowmod"]
            print(slowmod.g(), toggle.patched_targets({THREAD_PR}))
        print(slowmod.g())
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["('slowmod.g',)", "2 ('slowmod.g',)", "1"]


def test_a_reload_of_a_patched_module_is_patched_again_and_restored_with_it(
    project: Path,
) -> None:
    code = f"""\
        import importlib, reloadme
        from prtoggle.revert import toggle
        toggle.apply_revert({RELOAD_PR})
        before = reloadme.h
        importlib.reload(reloadme)
        print(reloadme.h is before, reloadme.h(), before(), toggle.patched_targets({RELOAD_PR}))
        toggle.restore({RELOAD_PR})
        print(reloadme.h(), before())
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["False 2 2 ('reloadme.h',)", "1 1"]


def test_a_reload_the_revert_no_longer_applies_to_ends_it_and_says_so(project: Path) -> None:
    code = f"""\
        import importlib, pathlib, reloadme
        from prtoggle.revert import toggle
        toggle.apply_revert({RELOAD_PR})
        before = reloadme.h
        path = pathlib.Path(reloadme.__file__)
        path.write_text(path.read_text().replace("return 1", "return 1.0"))
        try:
            importlib.reload(reloadme)
        except Exception as exc:
            print(type(exc).__name__, exc)
        print(reloadme.h(), before(), toggle.is_reverted({RELOAD_PR}))
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()  # the error shows the nearest lines after its first
    first, second = lines[0], lines[-1]
    assert first.startswith(
        f"PatchApplicationError PR {RELOAD_PR} could not be reverted again when reloadme was "
        f"reloaded, so it is not reverted at all: reloadme.h: edit 1 of 1 ("
    )
    assert second == "1.0 1 False"
