"""sglang's source_patcher API and prtoggle's reverts on one function (issue 19.10).

They share one record of what is patched: stacking works in either order, and every restore
order gives back the very original code and values. Real processes, real files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99310
MODULE = """\
def f(
    x,
    scale=2,
    offset=0,
):
    y = x * scale
    return y + offset
"""
RECIPE = f"""\
pr: {PR}
title: offset 5, plus 100
patches:
  - target: twoapi.f
    edits:
      - match: "offset=0,"
        replacement: "offset=5,"
      - match: return y + offset
        replacement: return y + offset + 100
"""
PRELUDE = '''\
import itertools, prtoggle, twoapi
from prtoggle.revert import toggle
from prtoggle.revert.source_patcher import CodePatcher, apply_patches_from_config

SCALE = """patches:
  - target: twoapi.f
    edits:
      - match: "scale=2,"
        replacement: "scale=3,"
"""
SCALE_TIMES_TEN = SCALE + """\
      - match: "y = x * scale"
        replacement: "y = x * scale * 10"
"""
TIMES_TEN = [{"target": "twoapi.f", "edits": [{"match": "y = x * scale",
                                                "replacement": "y = x * scale * 10"}]}]
f = twoapi.f
ORIGINAL = (f.__code__, f.__defaults__, f.__kwdefaults__, f.__annotations__)


def pristine():
    now = (f.__code__, f.__defaults__, f.__kwdefaults__, f.__annotations__)
    return all(a is b for a, b in zip(now, ORIGINAL))
'''


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    (tmp_path / "twoapi.py").write_text(MODULE)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / f"{PR}.yaml").write_text(RECIPE)
    return tmp_path


def run(project: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_revert_stacks_on_a_source_patcher_patch_and_both_restore_exactly(
    project: Path,
) -> None:
    code = f"""\
        states = apply_patches_from_config(SCALE_TIMES_TEN)
        with prtoggle.reverted({PR}):
            print(f(1), toggle.patched_targets({PR}))
        print(f(1))
        states[0].restore()
        print(f(1), pristine())
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.splitlines() == ["135 ('twoapi.f',)", "30", "2 True"]


def test_a_source_patcher_patch_stacks_on_a_revert_and_leaving_first_is_exact(
    project: Path,
) -> None:
    code = f"""\
        block = prtoggle.reverted({PR})
        block.__enter__()
        with CodePatcher(patches=TIMES_TEN):
            print(f(1))
            block.__exit__(None, None, None)
            print(f(1), f.__defaults__)
        print(f(1), pristine())
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.splitlines() == ["125", "20 (2, 0)", "2 True"]


def test_every_restore_order_of_three_stacked_patches_gives_back_the_originals(
    project: Path,
) -> None:
    code = f"""\
        for order in itertools.permutations(range(3)):
            scale = apply_patches_from_config(SCALE)[0]
            toggle.apply_revert({PR})
            times_ten = CodePatcher(patches=TIMES_TEN).__enter__()
            undo = [scale.restore, lambda: toggle.restore({PR}),
                    lambda: times_ten.__exit__(None, None, None)]
            seen = [f(1)]
            for index in order:
                undo[index]()
                seen.append(f(1))
            print(order, seen, f.__defaults__, pristine())
        """
    result = run(project, code)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    # 0: scale=3, 1: the revert (offset=5, +100), 2: times ten; all three: 1*3*10 + 5 + 100
    expected = []
    for order in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        values = [135]
        left = {0, 1, 2}
        for index in order:
            left.discard(index)
            scale = 3 if 0 in left else 2
            values.append(1 * scale * (10 if 2 in left else 1) + (105 if 1 in left else 0))
        expected.append(f"{order} {values} (2, 0) True")
    assert result.stdout.splitlines() == expected
