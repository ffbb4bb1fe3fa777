"""Tests for revert.lent_names: a name the fix added to one module and imported in another.

The fix adds `clamp` to chainpkg.a and `from chainpkg.a import clamp` to chainpkg.b; the
recipe, drafted by `prtoggle new --from-git` from a git repository built here, removes it
from both. Reverted, b's post-fix import line still runs (its revert lands once b has
executed), and the fix's test fails as it did before the fix, not with an ImportError.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PR = 90401
BEFORE = {
    "src/chainpkg/__init__.py": "",
    "src/chainpkg/a.py": "def scale(n):\n    return n * 2\n",
    "src/chainpkg/b.py": (
        "from chainpkg.a import scale\n\n\ndef area(w, h):\n    return scale(w) * h\n"
    ),
}
FIX = {
    "src/chainpkg/a.py": (
        "def scale(n):\n    return clamp(n) * 2\n\n\ndef clamp(n):\n    return max(n, 0)\n"
    ),
    "src/chainpkg/b.py": (
        "from chainpkg.a import clamp, scale\n\n\ndef area(w, h):\n    return scale(w) * clamp(h)\n"
    ),
    "test/test_area.py": (
        "from chainpkg.b import area\n\n\ndef test_a_negative_height_is_clamped():\n"
        "    assert area(1, -3) == 0\n"
    ),
}
PRE_FIX_FAILURE = "AssertionError: assert -6 == 0"


def commit(root: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm"]):
        argv = ["git", "-C", str(root), *args, *([message] if "commit" in args else [])]
        subprocess.run(argv, check=True, capture_output=True, timeout=60)


def run(argv: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def drafted(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The fix's repository and an environment whose registry holds its drafted recipe."""
    root, recipes = tmp_path / "repo", tmp_path / "recipes"
    root.mkdir()
    recipes.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    commit(root, BEFORE, "base")
    commit(root, FIX, f"clamp negative sizes (#{PR})")
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(recipes)}
    new = ["prtoggle", "new", "--from-git", "HEAD", "--source-root", "src", "--out", str(recipes)]
    made = run(new, cwd=root, env=env)
    assert made.returncode in (0, 1), made.stdout + made.stderr
    recipe = recipes / f"{PR}.yaml"
    text = recipe.read_text()
    assert "- scope: chainpkg.a\n  remove:\n  - clamp\n" in text
    assert "- scope: chainpkg.b\n  remove:\n  - clamp\n" in text
    if "guards:" not in text:  # where `new` does not record the fix's tests yet
        recipe.write_text(text + "guards: [test/test_area.py]\n")
    return root, env


def test_reverted_the_fixs_test_fails_with_the_pre_fix_failure_not_an_import_error(
    drafted: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = drafted
    done = run(["prtoggle", "repro", str(PR), "--source-root", "src"], cwd=root, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"test/test_area.py reverted: {PRE_FIX_FAILURE}" in done.stdout.splitlines()
    pre = tmp_path / "pre"
    pre.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "HEAD~1", "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(pre)], input=archive.stdout, check=True, timeout=60)
    pytest_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    pre_env = {**os.environ, "PYTHONPATH": str(pre / "src")}
    before = run([*pytest_run, "test/test_area.py"], cwd=root, env=pre_env)
    failed = "FAILED test/test_area.py::test_a_negative_height_is_clamped - assert -6 == 0"
    assert failed in before.stdout.splitlines()  # the same AssertionError, before the fix


def test_only_the_fixs_own_module_gets_the_name_and_leaving_puts_everything_back(
    drafted: tuple[Path, dict[str, str]],
) -> None:
    root, env = drafted
    code = textwrap.dedent(
        """
        import sys
        import prtoggle
        with prtoggle.reverted(90401):
            import chainpkg.b
            import chainpkg.a
            print("area:", chainpkg.b.area(1, -3), hasattr(chainpkg.b, "clamp"))
            try:
                from chainpkg.a import clamp
            except ImportError as exc:
                print(f"import: {type(exc).__name__}: {str(exc).split(' (')[0]}")
        print("after:", "__getattr__" in vars(chainpkg.a), chainpkg.a.clamp(-1))
        print("area after:", chainpkg.b.area(1, -3))
        """
    )
    done = run([sys.executable, "-c", code], cwd=root, env={**env, "PYTHONPATH": "src"})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "area: -6 False",
        "import: ImportError: cannot import name 'clamp' from 'chainpkg.a'",
        "after: False 0",
        "area after: 0",
    ]
