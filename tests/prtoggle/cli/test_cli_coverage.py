"""Tests for `prtoggle coverage`: CliRunner and a real subprocess over a fake suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    FakeProject,
    fake_project,
    invoke,
)
from click.testing import CliRunner
from coverage_fakes import pytest_command, write_suite

from prtoggle.cli.main import cli

__all__ = ["fake_project"]


def test_require_guard_exits_1_naming_every_unguarded_fix(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    html_path = tmp_path / "coverage.html"
    prs = f"{ANSWER_FIX},{FIRST_HALF_FIX},{HARMLESS_FIX},{BROKEN_FIX}"
    argv = [sys.executable, "-m", "prtoggle", "coverage", "--require-guard", "-r", prs]
    argv += ["--jobs", "2", "--html", str(html_path), "--", *pytest_command(suite)]
    result = subprocess.run(
        argv, env=fake_project.env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"coverage: no test guards PR {BROKEN_FIX} (registry): its reverted run failed (the "
        f"revert of PR {BROKEN_FIX} (registry) did not apply: PR {BROKEN_FIX} could not be "
        "reverted when "
    )
    assert last.endswith(f"; PR {HARMLESS_FIX} (registry)")
    lines = result.stdout.splitlines()
    suite_id = "test_target.py"
    assert lines[0] == "PR     COLLECTION  GUARDS  GUARDED BY"
    assert lines[1] == f"{ANSWER_FIX}  registry    1       {suite_id}::test_answer"
    assert lines[2].startswith(f"{BROKEN_FIX}  registry    0       the revert of PR {BROKEN_FIX}")
    assert lines[3:6] == [
        f"{FIRST_HALF_FIX}  registry    2       test_import_time.py::test_imported",
        " " * 27 + f"{suite_id}::test_first_half",
        f"{HARMLESS_FIX}  registry    0       NONE",
    ]
    assert "not judged (1 item):" in lines
    assert (
        f"  {suite_id}::test_always_fails: fails plain: AssertionError: broken with every fix "
        "in place"
    ) in lines
    assert "2 of 4 fixes guarded" in lines
    assert "5 tests (1 failing plain); 5 runs in" in result.stdout
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert f'<p class="alert">No test guards: #{BROKEN_FIX} (registry), #{HARMLESS_FIX}' in page
    assert page.count('class="cell guards"') == 3
    for network in ("http://", "https://", "<script", "<link", "src="):
        assert network not in page


def test_json_lists_each_fix_with_its_guarding_tests_and_the_plain_failures(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    result = CliRunner().invoke(
        cli,
        [
            "coverage",
            "--cold",
            "-r",
            f"{ANSWER_FIX},{HARMLESS_FIX}",
            "--json",
            "--",
            *pytest_command(suite),
        ],
    )
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [(r["pr"], r["collection"], r["guarded_by"]) for r in records] == [
        (ANSWER_FIX, "registry", ["test_target.py::test_answer"]),
        (HARMLESS_FIX, "registry", []),
    ]
    assert records[0]["plain_failing"] == [
        {
            "test": "test_target.py::test_always_fails",
            "outcome": "failed",
            "error": "AssertionError: broken with every fix in place",
        }
    ]
    assert records[1]["tests"]["test_target.py::test_answer"] == "passes"
    assert records[1]["run_error"] is None


def test_an_unknown_collection_is_bad_input_listing_the_collections(
    fake_project: FakeProject,
) -> None:
    result = CliRunner().invoke(cli, ["coverage", "--collection", "nope", "--", "pytest"])
    assert result.exit_code == 2
    assert (
        f"error: no recipe collection named 'nope'; collections: registry "
        f"({fake_project.registry_dir})" in result.output
    )


def test_prs_and_all_together_are_bad_input(fake_project: FakeProject) -> None:
    result = CliRunner().invoke(cli, ["coverage", "-r", str(ANSWER_FIX), "--all", "--", "pytest"])
    assert result.exit_code == 2
    assert "give -r PRS or --all, not both" in result.output


def test_an_unknown_pr_is_bad_input_listing_the_registered_ones(
    fake_project: FakeProject,
) -> None:
    result = CliRunner().invoke(cli, ["coverage", "-r", "4242", "--", "pytest"])
    assert result.exit_code == 2
    assert "error: -r='4242': PR 4242 is not registered; registered PRs: 90001" in result.output


def test_a_command_that_writes_no_report_is_an_error(fake_project: FakeProject) -> None:
    result = CliRunner().invoke(cli, ["coverage", "-r", str(ANSWER_FIX), "--", "true"])
    assert result.exit_code == 2
    assert result.output.endswith(
        "error: the plain run of 'true' wrote no report: exit status 0, no report; "
        "last line: no output\n"
    )


SLEEPING_TEST = """
import os
import time
from pathlib import Path


def test_sleeps():
    pids = Path(os.environ["PIDS_DIR"])
    (pids / f".{os.getpid()}").write_text(str(os.getpid()))
    (pids / f".{os.getpid()}").rename(pids / f"{os.getpid()}.pid")
    time.sleep(120)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_every_running_pytest_and_exits_128_plus_n_within_2_s(
    fake_project: FakeProject, tmp_path: Path, signum: signal.Signals
) -> None:
    suite, pids = tmp_path / "sleeping", tmp_path / "pids"
    suite.mkdir()
    pids.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_sleeping.py").write_text(SLEEPING_TEST)
    argv = [sys.executable, "-m", "prtoggle", "coverage", "-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}"]
    argv += ["--jobs", "2", "--", *pytest_command(suite)]
    process = subprocess.Popen(
        argv,
        env={**fake_project.env(), "PIDS_DIR": str(pids)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(list(pids.glob("*.pid"))) < 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the two pytest runs did not start"
        time.sleep(0.05)
    sent = time.monotonic()
    process.send_signal(signum)
    try:
        _stdout, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    seconds = time.monotonic() - sent
    assert (process.returncode, stderr.splitlines()[-1]) == (
        128 + signum,
        f"interrupted by {signum.name}",
    )
    assert seconds < 2.0
    test_pids = [int(path.read_text()) for path in pids.glob("*.pid")]
    time.sleep(0.2)
    assert [pid for pid in test_pids if _is_running(pid)] == []


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def test_an_html_file_in_a_missing_directory_is_refused_before_any_run(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "coverage.html"
    result = CliRunner().invoke(cli, ["coverage", "--html", str(target), "--", "false"])
    assert result.exit_code == 2
    assert f"{target}: its directory {target.parent} does not exist" in result.output


def other_engine_collection(fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Collection `engine2`: ANSWER_FIX for another package, and FIRST_HALF_FIX out of range."""
    (fake_project.source_dir / "prtoggle_fake_other.py").write_text(
        "def answer():\n    value = 42\n    return value\n"
    )
    directory = fake_project.registry_dir.parent / "engine2"
    directory.mkdir()
    (directory / f"{ANSWER_FIX}.yaml").write_text(
        "patches:\n  - target: prtoggle_fake_other.answer\n    edits:\n"
        "      - match: value = 42\n        replacement: value = 41\n"
    )
    (directory / f"{FIRST_HALF_FIX}.yaml").write_text(
        "applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n"
        "  - target: prtoggle_fake_target.first_half\n    edits:\n"
        "      - match: half = 21\n        replacement: half = 0\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    yaml_path = os.pathsep.join([str(fake_project.registry_dir), str(directory)])
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", yaml_path)
    return directory


def test_collection_reverts_exactly_its_recipe_and_credits_no_other_collections_guard(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_engine_collection(fake_project, monkeypatch)
    suite = write_suite(tmp_path)
    argv = ["coverage", "--require-guard", "--collection", "engine2", "-r", str(ANSWER_FIX)]
    result = CliRunner().invoke(cli, [*argv, "--cold", "--", *pytest_command(suite)])
    assert result.exit_code == 1, result.output
    progress = sorted(line.split(":")[0] for line in result.stderr.splitlines()[:-1])
    assert progress == [f"PR {ANSWER_FIX} (engine2) reverted", "plain"]
    assert result.stderr.splitlines()[-1] == (
        f"coverage: no test guards PR {ANSWER_FIX} (engine2): the suite never imports its code"
    )
    both = CliRunner().invoke(
        cli, ["coverage", "-r", str(ANSWER_FIX), "--json", "--cold", "--", *pytest_command(suite)]
    )
    assert both.exit_code == 0, both.output
    records = json.loads(both.stdout)
    assert [(r["collection"], r["guarded_by"]) for r in records] == [
        ("registry", ["test_target.py::test_answer"]),
        ("engine2", []),
    ]


def test_collection_refuses_its_recipe_outside_the_installed_range_never_reporting_a_guard(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_engine_collection(fake_project, monkeypatch)
    suite = write_suite(tmp_path)
    argv = ["coverage", "--require-guard", "--collection", "engine2", "-r", str(FIRST_HALF_FIX)]
    result = CliRunner().invoke(cli, [*argv, "--", *pytest_command(suite)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: engine2:{FIRST_HALF_FIX}: no recipe applies to the installed code: "
        f"engine2/{FIRST_HALF_FIX} is out of range: installed prtoggle-fake 2.3, range "
        "prtoggle-fake>=1.0,<2.0; use a recipe for the installed version or install a version "
        "in that range\n"
    )


def test_without_a_command_coverage_runs_the_guards_the_selected_recipes_record(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    recipe = fake_project.registry_dir / f"{ANSWER_FIX}.yaml"
    recipe.write_text(recipe.read_text() + "guards: [test_target.py::test_answer]\n")
    argv = [sys.executable, "-m", "prtoggle", "coverage", "-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}"]
    result = subprocess.run(
        argv,
        env=fake_project.env(),
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stderr.splitlines()
    assert said[:2] == [
        f"coverage: registry/{ANSWER_FIX} records 1 guard",
        f"coverage: registry/{FIRST_HALF_FIX} records no guards",
    ]
    rows = result.stdout.splitlines()
    assert rows[1].split() == [str(ANSWER_FIX), "registry", "1", "test_target.py::test_answer"]
    assert rows[2].split() == [str(FIRST_HALF_FIX), "registry", "0", "NONE"]
    assert "1 test; 3 runs in" in result.stdout  # only the recorded guard ran


def test_without_a_command_a_selection_recording_no_guards_is_one_error(
    fake_project: FakeProject,
) -> None:
    result = invoke("coverage", "-r", str(FIRST_HALF_FIX))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: no COMMAND given and the selected recipes (registry/{FIRST_HALF_FIX}) record "
        "no guards; give a pytest COMMAND after `--`, or record the fixes' tests (`prtoggle "
        "new --from-git REV` writes `guards:`) (see `prtoggle coverage --help`)\n"
    )
