"""Reverts of awkward targets, in real processes: line separators, closures, memo caches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LINES_TARGET = 'def text():\n    value = 1\n\x0c\n    return """a\u2028b\x85c""", value\n'
CLOSURE_TARGET = """\
step = 100


def make_counter(step):
    count = 0

    def increment():
        nonlocal count
        count += 1
        return count

    return increment


tick = make_counter(2)
"""
MEMO_TARGET = """\
import functools


@functools.lru_cache(maxsize=None)
def compute(x):
    return x * 2


class Box:
    @functools.cached_property
    def value(self):
        return 2
"""


def write_project(tmp_path: Path, module: str, source: str, target: str, edit: str) -> Path:
    """src/<module>.py and a collection holding recipe 905 with one edit `match -> new`."""
    match, replacement = edit.split(" -> ")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / f"{module}.py").write_bytes(source.encode("utf-8"))
    collection = tmp_path / "recipes"
    collection.mkdir()
    (collection / "905.yaml").write_text(
        f"pr: 905\npatches:\n  - target: {target}\n    edits:\n"
        f"      - match: {match!r}\n        replacement: {replacement!r}\n"
    )
    return collection


def python(tmp_path: Path, collection: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), str(REPO_ROOT)]),
        "PRTOGGLE_YAML_PATH": str(collection),
        "PYTHONIOENCODING": "utf-8",
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_form_feeds_and_unicode_line_separators_survive_a_revert(tmp_path: Path) -> None:
    collection = write_project(
        tmp_path, "lines_target", LINES_TARGET, "lines_target.text", "value = 1 -> value = 2"
    )
    code = "import lines_target; print(ascii(lines_target.text()))"
    args = ["-m", "prtoggle", "run", "-r", "905", "--", sys.executable, "-c", code]
    result = python(tmp_path, collection, args)
    assert (result.returncode, result.stdout) == (0, "('a\\u2028b\\x85c', 2)\n"), result.stderr


def test_show_splits_lines_as_python_does(tmp_path: Path) -> None:
    collection = write_project(
        tmp_path, "lines_target", LINES_TARGET, "lines_target.text", "value = 1 -> value = 2"
    )
    result = python(tmp_path, collection, ["-m", "prtoggle", "show", "905"])
    assert result.returncode == 0, result.stderr
    # U+2028 and NEL stay in their line, printed escaped (terminal-safe output)
    assert '     return """a\\u2028b\\x85c""", value\n' in result.stdout
    assert "-    value = 1\n+    value = 2\n" in result.stdout


def test_a_closure_edit_reading_a_new_enclosing_variable_is_refused_by_check(
    tmp_path: Path,
) -> None:
    collection = write_project(
        tmp_path, "counter", CLOSURE_TARGET, "counter.tick", "count += 1 -> count += step"
    )
    result = python(tmp_path, collection, ["-m", "prtoggle", "check", "905"])
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith(
        "905  counter.tick: FAILED: the edited code reads step, a variable of "
        "the enclosing function make_counter() that the original does not use; a code swap "
        "cannot add a closure cell (the function closes over count), so the edit would read "
        "a module global of that name instead;"
    )


def test_a_closure_edit_reading_a_new_enclosing_variable_is_refused_at_apply(
    tmp_path: Path,
) -> None:
    collection = write_project(
        tmp_path, "counter", CLOSURE_TARGET, "counter.tick", "count += 1 -> count += step"
    )
    code = textwrap.dedent("""\
        import prtoggle, counter
        try:
            with prtoggle.reverted(905):
                print("reverted", counter.tick())
        except prtoggle.PrToggleError as exc:
            print(type(exc).__name__, str(exc).split(";")[0])
        print("after", counter.tick())
        """)
    result = python(tmp_path, collection, ["-c", code])
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "UnsupportedTargetError counter.tick: the edited code reads step, a variable of the "
        "enclosing function make_counter() that the original does not use\nafter 1\n"
    )


def test_a_memoized_target_never_serves_values_across_a_revert_boundary(
    tmp_path: Path,
) -> None:
    collection = write_project(
        tmp_path, "memo", MEMO_TARGET, "memo.compute", "return x * 2 -> return -x * 2"
    )
    code = textwrap.dedent("""\
        import prtoggle, memo
        print(memo.compute(2))
        with prtoggle.reverted(905):
            print(memo.compute(2), memo.compute(3))
        print(memo.compute(3))
        """)
    result = python(tmp_path, collection, ["-c", code])
    assert (result.returncode, result.stdout, result.stderr) == (0, "4\n-4 -6\n6\n", "")


def test_a_cached_property_target_is_refused_with_one_line(tmp_path: Path) -> None:
    collection = write_project(
        tmp_path, "memo", MEMO_TARGET, "memo.Box.value", "return 2 -> return 3"
    )
    result = python(tmp_path, collection, ["-m", "prtoggle", "check", "905"])
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith(
        "905  memo.Box.value: FAILED: is a functools.cached_property; the "
        "values it computed stay in each instance's __dict__"
    )
