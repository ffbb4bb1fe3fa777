"""Tests for the pytest plugin through pytester: --revert-pr, the header, and guards_pr."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    SECOND_HALF_FIX,
    TARGET_MODULE,
    FakeProject,
    fake_project,
)

__all__ = ["fake_project"]

GUARDED = f"""
import importlib
import os

import pytest
import {TARGET_MODULE} as target


@pytest.mark.guards_pr({ANSWER_FIX}, expect=r"AssertionError: wrong answer 41")
def test_answer_is_right():
    value = target.answer()
    if value != 42:
        raise AssertionError(f"wrong answer {{value}}")
"""

NOT_GUARDING = f"""
import importlib
import os

import pytest
import {TARGET_MODULE} as target


@pytest.mark.guards_pr({ANSWER_FIX}, expect="AssertionError")
def test_first_half():
    assert target.first_half() == 21
"""


@pytest.fixture
def project(fake_project: FakeProject, pytester: pytest.Pytester) -> FakeProject:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider -p no:benchmark\n")
    return fake_project


def test_a_session_that_asks_for_nothing_has_no_prtoggle_header_line(
    project: FakeProject, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SGLANG_DEBUG_REVERT_PR", raising=False)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert [line for line in result.outlines if line.startswith("prtoggle")] == []
    assert result.ret == 0


def test_revert_pr_option_reverts_for_the_whole_session(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import {TARGET_MODULE} as target\n\n"
        "def test_sees_the_revert():\n    assert target.answer() == 41\n"
    )
    result = pytester.runpytest_subprocess("--revert-pr", str(ANSWER_FIX))
    result.stdout.fnmatch_lines([f"prtoggle: reverted PRs: {ANSWER_FIX}"])
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("exported", ["4242", str(ANSWER_FIX), "all"])
def test_an_exported_variable_alone_changes_nothing_and_says_so_in_one_header_line(
    project: FakeProject, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, exported: str
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", exported)
    pytester.makepyfile(
        f"import {TARGET_MODULE} as target\n\n"
        "def test_sees_the_fix():\n    assert target.answer() == 42\n"
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert [line for line in result.outlines if line.startswith("prtoggle")] == [
        f"prtoggle: SGLANG_DEBUG_REVERT_PR='{exported}' not applied (see --revert-pr or ini "
        "prtoggle_env_reverts)"
    ]
    assert result.errlines == []


def test_the_ini_setting_applies_the_exported_variable_and_names_it_in_the_header(
    project: FakeProject, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\nprtoggle_env_reverts = true\n")
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", str(ANSWER_FIX))
    pytester.makepyfile(
        f"import {TARGET_MODULE} as target\n\n"
        "def test_sees_the_revert():\n    assert target.answer() == 41\n"
    )
    result = pytester.runpytest_subprocess()
    result.stdout.fnmatch_lines([f"prtoggle: reverted PRs: {ANSWER_FIX}"])
    result.assert_outcomes(passed=1)


def test_under_prtoggle_run_the_start_up_hooks_reverts_are_the_sessions(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import {TARGET_MODULE} as target\n\n"
        "def test_sees_the_revert():\n    assert target.answer() == 41\n"
    )
    env = {
        **project.env(),
        "PYTHONPATH": os.pathsep.join([str(pytester.path), project.env()["PYTHONPATH"]]),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "prtoggle",
            "run",
            "-r",
            str(ANSWER_FIX),
            "--",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            str(pytester.path),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=120,
        check=False,
    )
    assert f"prtoggle: reverted PRs: {ANSWER_FIX}" in result.stdout.splitlines()
    assert "1 passed" in result.stdout
    assert result.returncode == 0


def test_revert_pr_with_an_unknown_pr_is_a_usage_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("--revert-pr", "4242")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: prtoggle: --revert-pr='4242': PR 4242 is not registered; registered PRs: *"]
    )


def test_a_guarding_test_passes_fixed_and_reverted(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(GUARDED)
    result = pytester.runpytest_inprocess("-v", "--strict-markers")
    result.stdout.fnmatch_lines(
        [
            "*::test_answer_is_right[[]fixed[]] PASSED*",
            f"*::test_answer_is_right[[]reverted-{ANSWER_FIX}[]] PASSED*",
        ]
    )
    result.assert_outcomes(passed=2)


def test_a_test_that_passes_reverted_does_not_guard_its_fix(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(NOT_GUARDING)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*does not guard PR {ANSWER_FIX}: test_a_test_that_passes_reverted_does_not_guard"
            f"_its_fix.py::test_first_half passed with PR {ANSWER_FIX} reverted"
        ]
    )


def test_a_failure_not_matching_expect_shows_both(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(GUARDED.replace("AssertionError: wrong answer 41", "NaNDetected"))
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*PR {ANSWER_FIX} reverted: expected a failure matching 'NaNDetected', got:",
            "*AssertionError: wrong answer 41",
        ]
    )


def test_expect_defaults_to_the_fixs_expect(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import pytest\nimport {TARGET_MODULE} as target\n\n"
        f"class WrongAnswer(Exception):\n    pass\n\n"
        f"@pytest.mark.guards_pr({ANSWER_FIX})\n"
        "def test_answer():\n    if target.answer() != 42:\n        raise WrongAnswer('no')\n"
    )
    pytester.runpytest_inprocess().assert_outcomes(passed=2)


def test_an_unknown_pr_in_the_marker_is_a_collection_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.guards_pr(4242, expect='x')\ndef test_x():\n    pass\n"
    )
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*test_an_unknown_pr_in_the_marker_is_a_collection_error.py::test_x: "
            "@pytest.mark.guards_pr(4242, expect='x'): PR 4242 is not registered; "
            f"registered PRs: *{ANSWER_FIX}*"
        ]
    )


def test_a_bad_expect_regex_is_a_collection_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import pytest\n\n@pytest.mark.guards_pr({ANSWER_FIX}, expect='(')\n"
        "def test_x():\n    pass\n"
    )
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            f"*::test_x: @pytest.mark.guards_pr({ANSWER_FIX}, expect='('): expect='(' is not a "
            "valid regex: missing ), unterminated subpattern at position 0"
        ]
    )


def test_a_marker_without_pr_is_a_collection_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile("import pytest\n\n@pytest.mark.guards_pr()\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        ["*::test_x: @pytest.mark.guards_pr(): expected one PR number, e.g. guards_pr(26521)"]
    )


def test_no_variant_when_the_session_already_reverts_the_fix(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(GUARDED)
    result = pytester.runpytest_inprocess("-v", "--revert-pr", str(ANSWER_FIX))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: wrong answer 41"])
    assert "reverted-" not in result.stdout.str()


def test_parametrized_and_class_tests_get_variants(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import pytest\nimport {TARGET_MODULE} as target\n\n"
        f"@pytest.mark.guards_pr({ANSWER_FIX}, expect='AssertionError')\n"
        "@pytest.mark.parametrize('offset', [0, 1])\n"
        "def test_param(offset):\n    assert target.answer() + offset == 42 + offset\n\n"
        "class TestGroup:\n"
        f"    @pytest.mark.guards_pr({ANSWER_FIX}, expect='AssertionError')\n"
        "    def test_method(self):\n        assert target.answer() == 42\n"
    )
    result = pytester.runpytest_inprocess("-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            f"*::test_param[[]1-reverted-{ANSWER_FIX}[]] PASSED*",
            f"*::TestGroup::test_method[[]reverted-{ANSWER_FIX}[]] PASSED*",
        ],
        consecutive=False,
    )


def test_subprocess_variant_survives_a_real_crash(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import os, signal\nimport pytest\nimport {TARGET_MODULE} as target\n\n"
        f"@pytest.mark.guards_pr({ANSWER_FIX}, expect='ChildCrashed: exit status -9', "
        "subprocess=True)\n"
        "def test_crashes_when_reverted():\n"
        "    if target.answer() != 42:\n        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=2)


def test_subprocess_variant_parses_the_child_failure(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        GUARDED.replace('wrong answer 41")', 'wrong answer 41", subprocess=True)')
        + NOT_GUARDING.replace("expect=", "subprocess=True, expect=").split("\n", 3)[3]
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*does not guard PR {ANSWER_FIX}: *::test_first_half passed with PR {ANSWER_FIX} "
            "reverted"
        ]
    )


def test_guards_work_under_xdist(project: FakeProject, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(GUARDED + NOT_GUARDING.split("\n", 3)[3])
    result = pytester.runpytest_subprocess("-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([f"*does not guard PR {ANSWER_FIX}*"])


def test_subprocess_variant_keeps_the_sessions_reverts(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import pytest\nimport {TARGET_MODULE} as target\n\n"
        f"@pytest.mark.guards_pr({ANSWER_FIX}, expect='wrong answer 41 with half 0', "
        "subprocess=True)\n"
        "def test_answer():\n    half, value = target.first_half(), target.answer()\n"
        "    if value != 42:\n"
        "        raise AssertionError(f'wrong answer {value} with half {half}')\n"
    )
    result = pytester.runpytest_subprocess("--revert-pr", str(FIRST_HALF_FIX))
    result.assert_outcomes(passed=2)


def test_an_inline_session_restores_its_reverts_and_the_env(
    project: FakeProject, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SGLANG_DEBUG_REVERT_PR", raising=False)
    pytester.makepyfile(
        f"import {TARGET_MODULE} as target\n\n"
        "def test_sees_the_revert():\n    assert target.answer() == 41\n"
    )
    result = pytester.runpytest_inprocess("--revert-pr", str(ANSWER_FIX))
    result.assert_outcomes(passed=1)
    target = importlib.import_module(TARGET_MODULE)
    assert target.answer() == 42
    assert "SGLANG_DEBUG_REVERT_PR" not in os.environ


NEEDS_BOTH_HALVES = f"""
import pytest
from prtoggle.revert.toggle import active_reverts
import {TARGET_MODULE} as target


@pytest.mark.guards_pr({ANSWER_FIX}, expect="wrong answer")
def test_answer():
    if target.first_half() != 21:
        raise AssertionError("wrong answer: the first half is gone")
    if target.answer() != 42:
        reverts = active_reverts()
        raise AssertionError(f"wrong answer {{target.answer()}}, reverts {{reverts}}")
"""

VARIANTS_FIRST = """
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: "reverted-" not in item.name)
"""


def test_the_variant_reverts_only_its_fix_on_top_of_the_sessions(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        NEEDS_BOTH_HALVES.replace('expect="wrong answer"', 'expect=r"reverts \\(90001, 90004\\)"')
    )
    result = pytester.runpytest_subprocess("-v", "--revert-pr", str(SECOND_HALF_FIX))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*::test_answer[[]reverted-{ANSWER_FIX}[]] PASSED*"])


def test_a_session_revert_that_breaks_the_plain_test_makes_the_variant_an_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(NEEDS_BOTH_HALVES)
    result = pytester.runpytest_subprocess("--revert-pr", str(FIRST_HALF_FIX))
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*cannot judge whether *::test_answer guards PR {ANSWER_FIX}: it already fails "
            f"with the session's reverts (PR {FIRST_HALF_FIX}), before PR {ANSWER_FIX} is "
            "reverted:",
            "AssertionError: wrong answer: the first half is gone",
        ]
    )


def test_a_variant_that_runs_first_asks_a_child_how_the_plain_test_does(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makeconftest(VARIANTS_FIRST)
    pytester.makepyfile(NEEDS_BOTH_HALVES)
    result = pytester.runpytest_subprocess("-v", "--revert-pr", str(FIRST_HALF_FIX))
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*::test_answer[[]reverted-{ANSWER_FIX}[]] ERROR*",
            "*::test_answer[[]fixed[]] FAILED*",
            f"*cannot judge whether *::test_answer guards PR {ANSWER_FIX}: it already fails "
            f"with the session's reverts (PR {FIRST_HALF_FIX})*",
        ]
    )


def test_a_plain_test_that_fails_with_every_fix_in_place_makes_the_variant_an_error(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"import pytest\n\n@pytest.mark.guards_pr({ANSWER_FIX}, expect='AssertionError')\n"
        "def test_always_fails():\n    raise AssertionError('broken anyway')\n"
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*cannot judge whether *::test_always_fails guards PR {ANSWER_FIX}: it already "
            f"fails with every fix in place, before PR {ANSWER_FIX} is reverted:",
            "AssertionError: broken anyway",
        ]
    )


def test_no_guard_variants_runs_guarded_tests_plain(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(GUARDED)
    result = pytester.runpytest_inprocess("-v", "--no-guard-variants")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_answer_is_right PASSED*"])


def test_a_duplicate_marker_makes_one_variant(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        GUARDED.replace(
            "@pytest.mark.guards_pr(",
            f"@pytest.mark.guards_pr({ANSWER_FIX})\n@pytest.mark.guards_pr(",
            1,
        )
    )
    pytester.runpytest_inprocess().assert_outcomes(passed=2)


def test_tests_without_guards_keep_their_ids_whatever_their_parameters(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.parametrize('x', [1], ids=['prefixed'])\n"
        "def test_x(x):\n    pass\n"
    )
    result = pytester.runpytest_inprocess("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_x[[]prefixed[]] PASSED*"])


DRAFTED_PR = 90777
FIXED_ENGINE = "def rows(n):\n    return list(range(n))\n"
FIX_DIFF = """\
diff --git a/prtoggle_drafted_engine.py b/prtoggle_drafted_engine.py
--- a/prtoggle_drafted_engine.py
+++ b/prtoggle_drafted_engine.py
@@ -1,2 +1,2 @@
 def rows(n):
-    return list(range(n - 1))
+    return list(range(n))
"""


def test_a_recipe_drafted_by_new_without_expect_guards_by_the_test_failing(
    project: FakeProject, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project.source_dir / "prtoggle_drafted_engine.py").write_text(FIXED_ENGINE)
    diff = pytester.path / "fix.diff"
    diff.write_text(FIX_DIFF)
    drafts = pytester.path / "drafts"
    argv = ["--from-diff", str(diff), "--source-root", str(project.source_dir)]
    drafted = subprocess.run(
        [sys.executable, "-m", "prtoggle", "new", *argv, "--pr", str(DRAFTED_PR), "--out", drafts],
        env=project.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert drafted.returncode == 0, drafted.stderr
    assert "expect:" not in (drafts / f"{DRAFTED_PR}.yaml").read_text()
    yaml_path = os.pathsep.join([str(project.registry_dir), str(drafts)])
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", yaml_path)
    pytester.makepyfile(
        "import pytest\nimport prtoggle_drafted_engine as engine\n\n"
        f"@pytest.mark.guards_pr({DRAFTED_PR})\n"
        "def test_rows():\n    assert engine.rows(3) == [0, 1, 2]\n"
    )
    result = pytester.runpytest_subprocess("-v", "-rA")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"*::test_rows[[]reverted-{DRAFTED_PR}[]] PASSED*",
            f"PR {DRAFTED_PR} reverted, failed (judged by the test failing: the recipe has no "
            "expect):",
            "AssertionError: assert [[]0, 1] == [[]0, 1, 2]",
        ]
    )


OUT_OF_RANGE_FIX = 90556


def test_revert_pr_all_names_in_the_header_only_the_reverts_in_force(
    project: FakeProject, pytester: pytest.Pytester
) -> None:
    dist_info = project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    (project.registry_dir / f"{OUT_OF_RANGE_FIX}.yaml").write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 40\n"
    )
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--revert-pr", "all")
    header = [line for line in result.outlines if line.startswith("prtoggle")]
    assert len(header) == 1  # the shipped collections' PRs come first, then the project's
    assert header[0].endswith(
        f"{ANSWER_FIX}, {BROKEN_FIX}, {FIRST_HALF_FIX}, {SECOND_HALF_FIX}, {HARMLESS_FIX}"
    )
    assert str(OUT_OF_RANGE_FIX) not in header[0]
