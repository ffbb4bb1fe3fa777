"""history_verdicts: how `bisect --git` judges one run (good, the regression, or another
outcome with its reason) and a probe's runs by majority."""

from __future__ import annotations

import re

import pytest

from prtoggle.commands.history_verdicts import (
    FailureRule,
    ProbeRun,
    counts_text,
    failed_import,
    failure_signature,
    judge_run,
    majority,
)
from prtoggle.runners.child_process import CommandRun

PYTEST_FAILED = "F\nFAILED test/t.py::test_a - AssertionError: 2 != 17\n1 failed in 0.1s\n"
IMPORT_ERROR = (
    'Traceback (most recent call last):\n  File "t.py", line 1\n'
    "ModuleNotFoundError: No module named 'pkg.new'\n"
)


def _run(code: int | None, stdout: str = "", stderr: str = "") -> CommandRun:
    return CommandRun(("python", "t.py"), code, 1.5, stdout, stderr, timeout=60.0)


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (_run(0), ("good", "", "")),
        (_run(1, PYTEST_FAILED), ("bad", "AssertionError: 2 != 17", "")),
        (_run(1, "", IMPORT_ERROR), ("bad", "ModuleNotFoundError: No module named 'pkg.new'", "")),
        (_run(None), ("other", "timeout", "killed after 60 s")),
        (_run(-9), ("other", "crash", "killed by SIGKILL")),
        (_run(137), ("other", "crash", "killed by SIGKILL")),
        (_run(125, "", "Skipped: no GPU\n"), ("other", "exit 125", "skip: exit 125")),
    ],
)
def test_any_failure_of_the_command_counts_and_timeouts_crashes_and_skips_do_not(
    run: CommandRun, expected: tuple[str, str, str]
) -> None:
    judged = judge_run(run, FailureRule())
    assert (judged.outcome, judged.signature, judged.note) == expected


def test_a_fingerprint_counts_only_failures_whose_output_matches_it() -> None:
    rule = FailureRule(pattern=re.compile(r"2 != 17"))
    assert judge_run(_run(1, PYTEST_FAILED), rule).outcome == "bad"
    other = judge_run(_run(1, "", IMPORT_ERROR), rule)
    assert (other.outcome, other.note) == (
        "other",
        "fails differently: ModuleNotFoundError: No module named 'pkg.new'",
    )
    assert rule.describe() == "a failure whose output matches '2 != 17'"
    assert FailureRule().describe() == (
        "any failure of the command (not a timeout, crash or skip; --fingerprint narrows it)"
    )


def test_a_pytest_assertion_summary_names_the_assertion() -> None:
    summary = "FAILED t.py::test_x - assert -3 == 3\n"
    assert failure_signature(summary, "") == "AssertionError: assert -3 == 3"
    assert failure_signature("", "") == ""


PYTEST_IMPORT = """\
test/unit/test_x.py:3: in <module>
    import pkg.extra
>   from pkg.core import scale
E   ImportError: cannot import name 'scale' from 'pkg.core' (/src/pkg/core.py)

python/pkg/extra.py:1: ImportError
"""
PYTHON_IMPORT = """\
Traceback (most recent call last):
  File "/src/run.py", line 1, in <module>
    import pkg.extra
  File "/src/python/pkg/extra.py", line 1, in <module>
    import pkg.kernels.new
ModuleNotFoundError: No module named 'pkg.kernels.new'
"""


def test_a_failed_import_names_the_frames_down_to_the_file_whose_import_failed() -> None:
    site = failed_import(PYTEST_IMPORT)
    assert site is not None
    assert (site.name, site.module, site.frames) == (
        "scale",
        "pkg.core",
        ("test/unit/test_x.py", "python/pkg/extra.py"),
    )
    missing = failed_import(PYTHON_IMPORT)
    assert missing is not None
    assert (missing.name, missing.frames) == (
        "pkg.kernels.new",
        ("/src/run.py", "/src/python/pkg/extra.py"),
    )
    assert failed_import(PYTEST_FAILED) is None


def _runs(*outcomes: str) -> list[ProbeRun]:
    return [ProbeRun(o, "timeout" if o == "other" else "", 1, 1.0, "t") for o in outcomes]  # type: ignore[arg-type]


def test_a_probe_is_the_majority_of_its_runs_and_inconclusive_without_one() -> None:
    assert majority(_runs("bad", "bad", "good"), 3) == ("bad", "")
    assert majority(_runs("other", "other", "good"), 3) == ("skip", "t")
    assert majority(_runs("bad", "good"), 3) == ("skip", "no majority of 3: 1 bad, 1 good")
    assert counts_text(_runs("good", "other", "good")) == "2 good, 1 other"
