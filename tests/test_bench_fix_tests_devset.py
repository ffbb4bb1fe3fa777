"""bench/fix_tests_devset.py on a git repository built here: it finds the fix commit that adds
a test, keeps it because the test fails on the parent, and its drafted recipe, reverted,
brings the parent's failure back.

The repository has sglang's layout (code under python/, tests under test/): a docs-only
commit whose subject says "fix" (not a candidate), a fix whose new test fails before it
(kept, reproduced) and a fix whose new test passes on both sides (dropped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUGGY = """\
def clamp(value, low, high):
    if value > high:
        return high
    return value


def describe(value):
    return "value " + str(value)
"""

FIXED = BUGGY.replace(
    "    if value > high:\n", "    if value < low:\n        return low\n    if value > high:\n"
)
WORDED = FIXED.replace('"value "', '"value: "')

CLAMP_TEST = """\
from tinypkg.core import clamp


def test_clamp_keeps_a_value_inside():
    assert clamp(3, 0, 5) == 3


def test_clamp_raises_a_value_below_low_to_low():
    assert clamp(-4, 0, 5) == 0
"""

DESCRIBE_TEST = """\
from tinypkg.core import describe


def test_describe_names_the_value():
    assert "7" in describe(7)
"""


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2026-07-01T00:00:00",
        "GIT_COMMITTER_DATE": "2026-07-01T00:00:00",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _commit(repo: Path, subject: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


def _history(repo: Path) -> dict[str, str]:
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = {
        "base": _commit(
            repo,
            "tinypkg: clamp and describe",
            {"python/tinypkg/__init__.py": "", "python/tinypkg/core.py": BUGGY, "README.md": "x\n"},
        )
    }
    shas["docs"] = _commit(repo, "Fix a typo in the README (#10)", {"README.md": "y\n"})
    shas["clamp"] = _commit(
        repo,
        "Fix clamp of values below the low bound (#11)",
        {"python/tinypkg/core.py": FIXED, "test/unit/test_clamp.py": CLAMP_TEST},
    )
    shas["describe"] = _commit(
        repo,
        "fix: describe says value with a colon (#12)",
        {"python/tinypkg/core.py": WORDED, "test/unit/test_describe.py": DESCRIBE_TEST},
    )
    return shas


def test_the_devset_keeps_the_fix_whose_test_fails_before_it_and_reproduces_that_failure(
    tmp_path: Path,
) -> None:
    shas = _history(tmp_path / "repo")
    argv = [sys.executable, str(ROOT / "bench" / "fix_tests_devset.py")]
    argv += ["--repo", str(tmp_path / "repo"), "--range", f"{shas['base']}..main"]
    argv += ["--cache", str(tmp_path / "cache"), "--package", "python/tinypkg", "--json"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PRTOGGLE_YAML_PATH")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    guard = "test/unit/test_clamp.py::test_clamp_raises_a_value_below_low_to_low"
    assert (report["candidates"], report["kept"]) == (2, 1)
    assert report["dropped"] == {
        shas["describe"]: "every test passing on the commit passes on its parent too "
        "(post-fix outcomes: passed)"
    }
    [case] = report["cases"]
    assert (case["sha"], case["pr"], case["verdict"], case["cause"]) == (
        shas["clamp"],
        11,
        "reproduced",
        "",
    )
    assert case["pre-fix"] == {guard: ["AssertionError", "assert -4 == 0"]}
    assert case["guards"] == {guard: ["reproduced", "AssertionError", "assert -4 == 0"]}
    assert (case["run_exit"], case["not_reverted"]) == (1, [])
    assert case["run_lines"] == ["prtoggle run: PR 11 in force in 1 process (devset/11)"]
