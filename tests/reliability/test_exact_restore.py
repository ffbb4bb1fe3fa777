"""Leaving a revert gives back the post-fix program object for object (issue 32.3).

Real processes on a package written here: a reverted module reloaded inside the block, a
module first imported inside it, an enum member the recipe cannot rebind (refused before
anything changes, and a later revert still lands), and guards_pr verdicts that do not
depend on the order the tests run in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
WHOLE, ENUM = 99451, 99452
CORE = """\
    import enum

    LIMIT = 8192


    def new_helper(x):
        return x * 2


    def compute(x):
        return new_helper(x) + LIMIT


    class Mode(enum.Enum):
        FAST = 1
        SAFE = 2
    """
USER = "from exactpkg.core import LIMIT, compute\n"
RECIPES = {
    WHOLE: f"""\
        pr: {WHOLE}
        title: a helper and a constant
        patches:
          - target: exactpkg.core.compute
            edits:
              - match: return new_helper(x) + LIMIT
                replacement: return _old_helper(x) + LIMIT
        names:
          - scope: exactpkg.core
            define: |
              LIMIT = 4096
              def _old_helper(x):
                  return x + 3
            remove: [new_helper]
        """,
    ENUM: f"""\
        pr: {ENUM}
        title: an enum member's value
        names:
          - scope: exactpkg.core.Mode
            define: |
              SAFE = 3
        """,
}
SNAPSHOT = """\
import importlib, sys
from prtoggle.revert import toggle


def objects():
    found = {}
    for name in ("exactpkg.core", "exactpkg.user"):
        module = sys.modules.get(name)
        found.update({(name, k): v for k, v in vars(module or object()).items()} if module else {})
    core = sys.modules["exactpkg.core"]
    found.update({("Mode", k): v for k, v in vars(core.Mode).items()})
    found[("compute", "__code__")] = core.compute.__code__
    return found


def changed(before, after):
    keys = sorted(set(before) | set(after), key=str)
    return [f"{k[0]}.{k[1]}" for k in keys if before.get(k, "-") is not after.get(k, "-")]
"""
PROGRAMS = {
    "reload": """\
import exactpkg.core, exactpkg.user
with toggle.reverted({whole}):
    importlib.reload(exactpkg.core)
    inside = exactpkg.core.compute(1)
    reloaded = objects()
print(inside, sorted(k for k in reloaded if k[0] == "exactpkg.core" and "helper" in k[1]))
after = objects()
print(exactpkg.core.compute(1), exactpkg.user.LIMIT, exactpkg.core.LIMIT,
      sorted(n for n in vars(exactpkg.core) if "helper" in n))
""",
    "late": """\
with toggle.reverted({whole}):
    import exactpkg.user
    print(exactpkg.core.compute(1), exactpkg.user.LIMIT)
print(exactpkg.core.compute(1), exactpkg.user.LIMIT, exactpkg.user.LIMIT is exactpkg.core.LIMIT)
""",
    "enum": """\
import exactpkg.core
from prtoggle.errors import PatchApplicationError
before = objects()
for attempt in range(2):
    try:
        with toggle.reverted({enum}):
            print("landed")
    except PatchApplicationError as exc:
        print(type(exc).__name__, exc)
    print(changed(before, objects()))
with toggle.reverted({whole}):
    print(exactpkg.core.compute(1))
print(changed(before, objects()))
""",
}


def run(tmp_path: Path, program: str) -> list[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(WORKTREE)]),
        "PRTOGGLE_YAML_PATH": str(tmp_path / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    text = SNAPSHOT + PROGRAMS[program].format(whole=WHOLE, enum=ENUM)
    done = subprocess.run(
        [sys.executable, "-c", text],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    package = tmp_path / "exactpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text(textwrap.dedent(CORE))
    (package / "user.py").write_text(USER)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for pr, text in RECIPES.items():
        (recipes / f"{pr}.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def test_leaving_a_revert_after_a_reload_leaves_nothing_the_revert_defined(project: Path) -> None:
    assert run(project, "reload") == [
        "4100 [('exactpkg.core', '_old_helper')]",
        "8194 8192 8192 ['new_helper']",
    ]


def test_a_module_first_imported_inside_a_revert_gets_the_post_fix_objects_back(
    project: Path,
) -> None:
    assert run(project, "late") == ["4100 4096", "8194 8192 True"]


def test_an_enum_member_is_refused_naming_the_recipe_and_later_reverts_still_land(
    project: Path,
) -> None:
    recipe = project / "recipes" / f"{ENUM}.yaml"
    refusal = (
        f"PatchApplicationError {recipe}:4: PR {ENUM}: `SAFE` of class exactpkg.core.Mode is "
        "an enum member (now or in the define); a revert cannot add, rebind or remove the "
        "members of enum Mode (its member table would not follow); list the change in "
        "not_reverted"
    )
    assert run(project, "enum") == [refusal, "[]", refusal, "[]", "4100", "[]"]


GUARDED = """\
import pytest


@pytest.mark.guards_pr({pr}, expect="AssertionError")
def test_user_sees_the_fixed_limit():
    import exactpkg.user

    assert exactpkg.user.LIMIT == 8192


@pytest.mark.guards_pr({pr}, expect="AssertionError")
def test_compute_gives_the_fixed_answer():
    import exactpkg.core
    import exactpkg.user

    assert (exactpkg.core.compute(1), exactpkg.user.LIMIT) == (8194, 8192)
"""


def test_guards_pr_verdicts_do_not_depend_on_the_order_tests_run_in(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project), str(WORKTREE)]))
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(project / "recipes"))
    monkeypatch.delenv("SGLANG_DEBUG_REVERT_PR", raising=False)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider -p no:benchmark\n")
    pytester.makepyfile(test_guarded=GUARDED.format(pr=WHOLE))
    first = f"test_guarded.py::test_user_sees_the_fixed_limit[reverted-{WHOLE}]"
    second = [
        "test_guarded.py::test_compute_gives_the_fixed_answer[fixed]",
        f"test_guarded.py::test_compute_gives_the_fixed_answer[reverted-{WHOLE}]",
    ]
    verdicts = []
    for order in ([first, *second], [*second, first]):
        result = pytester.runpytest_subprocess("-rA", "-q", *order)
        verdicts.append(
            sorted(line for line in result.outlines if line.startswith(("PASSED", "FAILED")))
        )
    assert verdicts[0] == verdicts[1]
    assert verdicts[0] == [f"PASSED {node}" for node in sorted([first, *second])]
