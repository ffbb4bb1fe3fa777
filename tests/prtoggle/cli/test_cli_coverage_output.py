"""What `prtoggle coverage` says: files that do not import, reverts that never landed, a
missing plugin, and a matrix summarised to the rows that show something (real processes)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fakes import ANSWER_FIX, FakeProject, fake_project
from coverage_fakes import pytest_command, write_suite
from test_cli_coverage import other_engine_collection

__all__ = ["fake_project"]

BROKEN_FILE = 'raise RuntimeError("No supported accelerator")\n'
MULTI_LINE_FAILURE = """
def test_multi_line_message():
    raise AssertionError("first line\\nsecond line\\nthird line")
"""


def coverage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", "coverage", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def suite(fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake suite plus a file that does not import and a multi-line failure; fix
    ANSWER_FIX in two collections: `registry` (imported) and `engine2` (never imported)."""
    other_engine_collection(fake_project, monkeypatch)
    suite = write_suite(tmp_path)
    (suite / "test_broken.py").write_text(BROKEN_FILE)
    (suite / "test_multi.py").write_text(MULTI_LINE_FAILURE)
    return suite


def test_the_text_marks_a_revert_that_never_landed_and_lists_files_that_did_not_import(
    suite: Path, tmp_path: Path
) -> None:
    html = tmp_path / "coverage.html"
    argv = ["-r", str(ANSWER_FIX), "--jobs", "2", "--html", str(html), "--require-guard", "--"]
    result = coverage(dict(os.environ), *argv, *pytest_command(suite))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "PR     COLLECTION  GUARDS  GUARDED BY",
        f"{ANSWER_FIX}  registry    1       test_target.py::test_answer",
        f"{ANSWER_FIX}  engine2     0       NONE: the suite never imports its code "
        "(prtoggle_fake_other): no result",
        f"never imported by the suite (no result): engine2/{ANSWER_FIX}",
        "",
    ]
    assert lines[5] == "1 of 2 fixes guarded, 1 never imported"
    assert lines[6].startswith("6 tests (2 failing plain, 1 test file not importable); 3 runs in ")
    assert lines[7:] == [
        "",
        "not judged (3 items):",
        "  test_broken.py: did not import plain: RuntimeError: No supported accelerator",
        "  test_multi.py::test_multi_line_message: fails plain: AssertionError: first line (+2 "
        "more lines)",
        "  test_target.py::test_always_fails: fails plain: AssertionError: broken with every "
        "fix in place",
    ]
    assert result.stderr.splitlines()[-1] == (
        f"coverage: no test guards PR {ANSWER_FIX} (engine2): the suite never imports its "
        "code (1 test file did not import in the plain run)"
    )
    page = html.read_text()
    assert page.index('<ul class="legend">') < page.index('<table class="matrix">')
    assert page.index("No supported accelerator") < page.index('<table class="matrix">')
    assert "<small>never imported</small>" in page
    assert page.count('class="cell not-imported"') == 4


def test_json_marks_a_revert_that_never_landed_and_lists_files_that_did_not_import(
    suite: Path,
) -> None:
    result = coverage(
        dict(os.environ), "-r", str(ANSWER_FIX), "--json", "--", *pytest_command(suite)
    )
    assert result.returncode == 0, result.stderr
    registry, engine2 = json.loads(result.stdout)
    assert (registry["never_imported"], engine2["never_imported"]) == (False, True)
    assert engine2["tests"]["test_target.py::test_answer"] == "not-imported"
    assert registry["tests"]["test_target.py::test_answer"] == "guards"
    assert engine2["collect_errors"] == [
        {"collector": "test_broken.py", "error": "RuntimeError: No supported accelerator"}
    ]


@pytest.mark.parametrize(
    "how", ["-p no:prtoggle", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"], ids=["option", "variable"]
)
def test_without_the_plugin_one_line_names_it_exit_2_and_no_reverted_run_starts(
    fake_project: FakeProject, tmp_path: Path, how: str
) -> None:
    suite = write_suite(tmp_path)
    started = tmp_path / "started.log"
    env = {**os.environ, "STARTED_LOG": str(started)}
    extra = []
    if how.startswith("-p"):
        extra = how.split()
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    wrapper = 'echo "run:$SGLANG_DEBUG_REVERT_PR" >> "$STARTED_LOG"; exec "$@"'
    command = ["sh", "-c", wrapper, "sh", *pytest_command(suite), *extra]
    result = coverage(env, "-r", str(ANSWER_FIX), "--jobs", "2", "--", *command)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: the prtoggle pytest plugin is not loaded in `{shlex.join(command)}` (pytest: "
        "unrecognized arguments: --no-guard-variants --prtoggle-report); drop `-p no:prtoggle`, "
        "or add `-p prtoggle.pytest_plugin` where PYTEST_DISABLE_PLUGIN_AUTOLOAD is set"
    ]
    assert started.read_text().splitlines() == ["run:"]


def test_a_suite_in_which_nothing_differs_is_summarised_in_its_counts(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_engine_collection(fake_project, monkeypatch)
    suite = tmp_path / "quiet"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    tests = "".join(f"def test_{n}():\n    pass\n\n" for n in range(40))
    (suite / "test_many.py").write_text(tests)
    argv = ["-r", f"engine2:{ANSWER_FIX}", "--"]
    result = coverage(dict(os.environ), *argv, *pytest_command(suite))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2:5] == [
        f"never imported by the suite (no result): engine2/{ANSWER_FIX}",
        "",
        "0 of 1 fix guarded, 1 never imported",
    ]
    assert lines[5].startswith("40 tests; 2 runs in ")
    assert len(lines) == 6
