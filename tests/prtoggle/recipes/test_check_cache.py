"""A recipe's checks kept between commands: served only while every file they read is unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PR = 99412
RECIPE = f"""\
pr: {PR}
title: answer
patches:
  - target: pkgx.mod.answer
    edits:
      - match: {{match}}
        replacement: return 41
"""
MODULE = "def answer():\n    return 42\n"
PROBE = """\
import sys
from pathlib import Path
from prtoggle.recipes.registry import load_registry
from prtoggle.recipes.resolution import checks_per_recipe
registry = load_registry(dirs=[Path(sys.argv[1])])
checks = checks_per_recipe(registry.recipes, search_path=[sys.argv[2]])
print(" ".join(check.status for found in checks.values() for check in found))
print("checked" if "prtoggle.patching.source_tree" in sys.modules else "cached")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "code" / "pkgx").mkdir(parents=True)
    (tmp_path / "code" / "pkgx" / "__init__.py").write_text("")
    (tmp_path / "code" / "pkgx" / "mod.py").write_text(MODULE)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / f"{PR}.yaml").write_text(RECIPE.format(match="return 42"))
    return tmp_path


def _check(project: Path, *, cache: str = "cache") -> list[str]:
    """A fresh process checks the recipe against code/: its statuses, checked or cached."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PRTOGGLE_CACHE_DIR"] = str(project / cache) if cache != "0" else "0"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(project / "recipes"), str(project / "code")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_a_second_command_takes_the_checks_from_the_cache(project: Path) -> None:
    assert _check(project) == ["ok", "checked"]
    assert _check(project) == ["ok", "cached"]


def test_a_target_module_changed_to_the_same_size_and_mtime_is_checked_again(
    project: Path,
) -> None:
    module = project / "code" / "pkgx" / "mod.py"
    _check(project)
    before = module.stat()
    module.write_text(MODULE.replace("42", "43"))
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _check(project) == ["stale", "checked"]
    assert _check(project) == ["stale", "cached"]


def test_a_module_that_appears_where_the_target_was_looked_for_is_checked_again(
    project: Path,
) -> None:
    _check(project)
    package = project / "code" / "pkgx"
    (package / "mod").mkdir()  # a package beside mod.py: Python imports pkgx.mod from it
    (package / "mod" / "__init__.py").write_text("def answer():\n    return 7\n")
    uncached = _check(project, cache="0")[0]
    assert _check(project) == [uncached, "checked"]


def test_a_changed_recipe_is_checked_again(project: Path) -> None:
    _check(project)
    (project / "recipes" / f"{PR}.yaml").write_text(RECIPE.format(match="return 4"))
    assert _check(project) == ["stale", "checked"]
