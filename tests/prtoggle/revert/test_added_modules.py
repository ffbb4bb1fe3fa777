"""Tests for revert.added_modules: a module the fix added cannot be imported while reverted.

The recipe is drafted by `prtoggle new --from-git` from a real git repository built here;
its test runs through `prtoggle repro` and plain pytest on the pre-fix tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

CORE_BEFORE = "def width(n):\n    return n * 2\n"
CORE_AFTER = """\
from toypkg.validation import check_width


def width(n):
    return check_width(n) * 2
"""
VALIDATION = """\
def check_width(n):
    if n < 0:
        raise ValueError(f"negative width {n}")
    return n
"""
FIX_TEST = """\
import pytest
from toypkg.core import width

from toypkg.validation import check_width


def test_negative_width_is_refused():
    with pytest.raises(ValueError):
        check_width(-1)
    assert width(3) == 6
"""
PR = 90201
PRE_FIX_FAILURE = "ModuleNotFoundError: No module named 'toypkg.validation'"


@dataclass(frozen=True)
class FixRepo:
    """A repository whose last commit adds toypkg.validation (and its test), its recipes."""

    root: Path
    recipes: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "PRTOGGLE_YAML_PATH": str(self.recipes)}

    def prtoggle(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("prtoggle", *args)

    def run(
        self, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=self.root,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def fix_repo(tmp_path: Path) -> FixRepo:
    root = tmp_path / "repo"
    (root / "src" / "toypkg").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "src" / "toypkg" / "__init__.py").write_text("")
    (root / "src" / "toypkg" / "core.py").write_text(CORE_BEFORE)
    git(root, "init", "-q")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base")
    (root / "src" / "toypkg" / "core.py").write_text(CORE_AFTER)
    (root / "src" / "toypkg" / "validation.py").write_text(VALIDATION)
    (root / "test" / "test_validation.py").write_text(FIX_TEST)
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "add", "-A")
    message = f"refuse negative widths (#{PR})"
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    return FixRepo(root, recipes)


def drafted(fix_repo: FixRepo) -> str:
    """`new --from-git HEAD`'s recipe, with its guard recorded where `new` does not yet."""
    made = fix_repo.prtoggle("new", "--from-git", "HEAD", "--source-root", "src", "--out", "..")
    assert made.returncode in (0, 1), made.stdout + made.stderr
    written = fix_repo.root.parent / f"{PR}.yaml"
    target = fix_repo.recipes / f"{PR}.yaml"
    text = written.read_text()
    if "guards:" not in text:
        text += "guards: [test/test_validation.py]\n"
    target.write_text(text)
    return text


def test_new_lists_a_module_the_fix_added_in_added_modules_not_in_not_reverted(
    fix_repo: FixRepo,
) -> None:
    text = drafted(fix_repo)
    assert "added_modules:\n- toypkg.validation\n" in text
    assert "toypkg/validation.py" not in text


def test_reverted_the_fixs_test_fails_with_the_pre_fix_module_not_found_error(
    fix_repo: FixRepo, tmp_path: Path
) -> None:
    drafted(fix_repo)
    done = fix_repo.prtoggle("repro", str(PR), "--source-root", "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"test/test_validation.py reverted: {PRE_FIX_FAILURE}" in done.stdout.splitlines()
    pre = tmp_path / "pre"  # the tree before the fix, with the fix's test: the same failure
    pre.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(fix_repo.root), "archive", "HEAD~1", "src"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    subprocess.run(["tar", "-x", "-C", str(pre)], input=archive.stdout, check=True, timeout=60)
    env = {**os.environ, "PYTHONPATH": str(pre / "src")}
    pytest_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    before = fix_repo.run(*pytest_run, "test/test_validation.py", env=env)
    assert f"E   {PRE_FIX_FAILURE}" in before.stdout.splitlines()


def test_a_module_imported_before_the_revert_is_taken_out_and_put_back_after(
    fix_repo: FixRepo,
) -> None:
    drafted(fix_repo)
    code = textwrap.dedent(
        """
        import sys
        import prtoggle
        import toypkg.core, toypkg.validation
        before = sys.modules["toypkg.validation"]
        with prtoggle.reverted(90201):
            print("inside:", "toypkg.validation" in sys.modules, hasattr(toypkg, "validation"))
            try:
                import toypkg.validation
            except ModuleNotFoundError as exc:
                print(f"import: {type(exc).__name__}: {exc}", exc.name)
            print("width:", toypkg.core.width(-2))
        print("after:", sys.modules["toypkg.validation"] is before, toypkg.validation is before)
        import toypkg.validation
        print("import after:", toypkg.validation.check_width(1))
        """
    )
    env = {**fix_repo.env(), "PYTHONPATH": str(fix_repo.root / "src")}
    done = fix_repo.run(sys.executable, "-c", code, env=env)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "inside: False False",
        f"import: {PRE_FIX_FAILURE} toypkg.validation",
        "width: -4",
        "after: True True",
        "import after: 1",
    ]
