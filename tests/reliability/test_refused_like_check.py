"""A revert whose code would fail at call time is refused with check's answer (issue 32.4).

A `define` whose function reads a name the same recipe removes: `prtoggle check` flags it,
and a real process asking for the revert gets a PatchApplicationError with the same
sentence, naming the recipe, before anything lands.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99441
CORE = """\
    LIMIT = 8192


    def new_helper(x):
        return x * 2


    def compute(x):
        return new_helper(x) + LIMIT
    """
RECIPE = f"""\
    pr: {PR}
    title: the old helper leans on the new one
    patches:
      - target: leanpkg.core.compute
        edits:
          - match: return new_helper(x) + LIMIT
            replacement: return _old_helper(x) + LIMIT
    names:
      - scope: leanpkg.core
        define: |
          def _old_helper(x):
              return new_helper(x) + 1
        remove: [new_helper]
    """
PROGRAM = """\
import leanpkg.core as core
import prtoggle
from prtoggle.errors import PatchApplicationError

try:
    prtoggle.maybe_revert_pr_fix()
except PatchApplicationError as exc:
    print("refused:", exc)
print("in force:", prtoggle.is_reverted({pr}), "new_helper" in vars(core), core.compute(1))
"""
SENTENCE = (
    "define of leanpkg.core reads `new_helper`, not defined in module leanpkg.core after the "
    "revert (nor a builtin)"
)


def test_a_define_reading_a_removed_name_is_refused_with_checks_answer(tmp_path: Path) -> None:
    package = tmp_path / "leanpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text(textwrap.dedent(CORE))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    recipe = recipes / f"{PR}.yaml"
    recipe.write_text(textwrap.dedent(RECIPE))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(WORKTREE)]),
        "PRTOGGLE_YAML_PATH": str(recipes),
        "SGLANG_DEBUG_REVERT_PR": str(PR),
    }
    checked = subprocess.run(
        [sys.executable, "-m", "prtoggle", "check", str(PR)],
        env={**env, "SGLANG_DEBUG_REVERT_PR": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 1
    assert f"{PR}  names:leanpkg.core: FAILED: {SENTENCE}" in checked.stdout.splitlines()
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(pr=PR)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"refused: {recipe}: PR {PR}: {SENTENCE}, so the reverted code would fail with "
        "NameError; the recipe must define it (names: define) or list the change in not_reverted",
        "in force: False True 8194",
    ]
