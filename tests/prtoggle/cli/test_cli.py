"""Tests for the prtoggle CLI: list, show, check, run, errors and the no-torch start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    python_command,
)
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli
from prtoggle.cli.show import CAPTURE_NOTE

__all__ = ["fake_project"]  # the fixture, imported for pytest

REGISTERED = f"{ANSWER_FIX}, {BROKEN_FIX}, {FIRST_HALF_FIX}, {SECOND_HALF_FIX}, {HARMLESS_FIX}"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="prtoggle")


def test_list_shows_every_fix_and_whether_its_revert_applies(fake_project: FakeProject) -> None:
    result = invoke("list", "--wide")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "PR",
        "COLLECTION",
        "MERGED",
        "COMPONENT",
        "SYMPTOM",
        "APPLIES",
        "TITLE",
    ]
    assert lines[1].split() == [
        str(ANSWER_FIX),
        "registry",
        "2026-03-01",
        TARGET_MODULE,
        "wrong-output",
        "yes",
        "fake",
        "fix",
        str(ANSWER_FIX),
    ]
    assert lines[2].split()[:6] == [
        str(BROKEN_FIX),
        "registry",
        "2026-01-01",
        TARGET_MODULE,
        "wrong-output",
        "NO",
    ]
    assert len(lines) == 6


def test_list_json_carries_metadata_and_problems(fake_project: FakeProject) -> None:
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.output
    records = {record["pr"]: record for record in json.loads(result.output)}
    assert sorted(records) == [
        ANSWER_FIX,
        BROKEN_FIX,
        FIRST_HALF_FIX,
        SECOND_HALF_FIX,
        HARMLESS_FIX,
    ]
    answer = records[ANSWER_FIX]
    assert (answer["applies"], answer["problems"], answer["merged"]) == (True, [], "2026-03-01")
    assert answer["collection"] == "registry"
    assert answer["repro"] == "prtoggle_fake_scenario"
    assert answer["targets"] == [f"{TARGET_MODULE}.answer"]
    broken = records[BROKEN_FIX]
    assert broken["applies"] is False
    assert len(broken["problems"]) == 1
    assert broken["problems"][0].startswith(f"{TARGET_MODULE}.answer: ")


def test_show_prints_metadata_and_the_revert_diff(fake_project: FakeProject) -> None:
    result = invoke("show", str(ANSWER_FIX))
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith(f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n")
    assert "  merged:    2026-03-01\n" in text
    assert "  expect:    WrongAnswer\n" in text
    assert f"  targets:   {TARGET_MODULE}.answer\n" in text
    assert "-    value = 42\n+    value = 41\n" in text
    assert CAPTURE_NOTE not in text


def test_show_json_includes_each_target_diff(fake_project: FakeProject) -> None:
    result = invoke("show", str(FIRST_HALF_FIX), "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.output)
    assert record["pr"] == FIRST_HALF_FIX
    assert record["acts_at_capture"] is False
    assert record["bench"] is None
    [diff] = record["diffs"]
    assert diff["target"] == f"{TARGET_MODULE}.first_half"
    assert "-    half = 21\n+    half = 0\n" in diff["diff"]


def test_show_json_names_the_benchmark_module_of_a_shipped_fix() -> None:
    result = invoke("show", "--collection", "fixes", "24856", "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.output)
    assert record["bench"] == "fixes.benchmarks.draft_extend_routing_cost"


def test_show_of_a_capture_time_fix_carries_the_capture_note() -> None:
    result = invoke("show", "--collection", "fixes", "26521")  # the shipped demo recipe
    assert result.exit_code == 0, result.output
    assert f"  note:      {CAPTURE_NOTE}\n" in result.output
    assert CAPTURE_NOTE == (
        "acts at CUDA graph capture: revert before capture; a graph captured with the fix keeps it"
    )


def test_show_of_a_broken_revert_prints_metadata_then_the_error(
    fake_project: FakeProject,
) -> None:
    result = invoke("show", str(BROKEN_FIX))
    assert result.exit_code == 2
    assert result.stdout.startswith(f"PR {BROKEN_FIX}: fake fix {BROKEN_FIX}\n")
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) >= 1


def test_show_unknown_pr_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = invoke("show", "12345")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"error: PR 12345 is not registered; registered PRs: {REGISTERED} "
    )
    assert len(result.stderr.splitlines()) == 1


def second_collection(fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A collection `sglang` holding ANSWER_FIX again (sglang's text: patches only)."""
    directory = fake_project.registry_dir.parent / "sglang"
    directory.mkdir()
    (directory / f"{ANSWER_FIX}.yaml").write_text(
        f"patches:\n  - target: {TARGET_MODULE}.answer\n    edits:\n"
        "      - match: value = 42\n        replacement: value = 40\n"
        "  - target: absent_engine.layers.forward\n    edits:\n      - match: x = 1\n"
    )
    monkeypatch.setenv(
        "PRTOGGLE_YAML_PATH", os.pathsep.join([str(fake_project.registry_dir), str(directory)])
    )
    return directory


def test_show_of_a_pr_in_two_collections_shows_one_section_per_collection(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_collection(fake_project, monkeypatch)
    absent = (
        f"PR {ANSWER_FIX} (sglang): package absent_engine is not installed here, nor in "
        f"{os.getcwd()}, so there is no source to diff; `prtoggle check --source-root DIR` "
        "reads a source tree instead"
    )
    result = invoke("show", str(ANSWER_FIX))
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    first, second = result.stdout.split(f"\nPR {ANSWER_FIX}: ")
    assert first.startswith(f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n  collection: registry\n")
    assert "-    value = 42\n+    value = 41\n" in first
    assert second.startswith("(untitled)\n  collection: sglang\n")
    assert second.endswith(f"  not shown: {absent}\n")
    records = json.loads(invoke("show", str(ANSWER_FIX), "--json").stdout)
    assert [(r["collection"], len(r.get("diffs", [])), r.get("error")) for r in records] == [
        ("registry", 1, None),
        ("sglang", 0, absent),
    ]
    chosen = invoke("show", str(ANSWER_FIX), "--collection", "sglang", "--json")
    assert (chosen.exit_code, chosen.stdout, chosen.stderr) == (2, "", f"error: {absent}\n")
    shown = invoke("show", str(ANSWER_FIX), "--collection", "registry")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(
        f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n  collection: registry\n"
    )
    assert "collection: sglang" not in shown.stdout


def test_list_shows_each_collection_and_absent_packages(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_collection(fake_project, monkeypatch)
    records = json.loads(invoke("list", "--json").output)
    assert [(r["pr"], r["collection"]) for r in records][-2:] == [
        (HARMLESS_FIX, "registry"),
        (ANSWER_FIX, "sglang"),
    ]
    sglang = records[-1]
    assert (sglang["title"], sglang["applies"]) == ("", None)
    text = invoke("list", "--collection", "sglang")
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[1].split() == [
        str(ANSWER_FIX),
        "sglang",
        "-",
        "-",
        "absent",
        "-",
    ]
    unknown = invoke("list", "--collection", "vllm")
    assert (unknown.exit_code, unknown.stderr.splitlines()[0][:45]) == (
        2,
        "error: no recipe collection named 'vllm'; col",
    )


def test_check_reports_each_target_and_fails_on_a_broken_revert(
    fake_project: FakeProject,
) -> None:
    result = invoke("check")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert f"{ANSWER_FIX}  {TARGET_MODULE}.answer: ok" in lines
    [broken] = [line for line in lines if line.startswith(str(BROKEN_FIX))]
    assert broken.startswith(f"{BROKEN_FIX}  {TARGET_MODULE}.answer: STALE: ")
    assert lines[-2:] == [
        "4 of 5 targets of 5 fixes revert cleanly",
        f"hint: `prtoggle rebase {BROKEN_FIX} --collection registry` proposes an updated "
        "recipe for the stale one",
    ]


def test_check_of_good_fixes_exits_zero(fake_project: FakeProject) -> None:
    result = invoke("check", str(ANSWER_FIX), str(FIRST_HALF_FIX))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "2 of 2 targets of 2 fixes revert cleanly"


def test_check_source_root_json(fake_project: FakeProject) -> None:
    source_root = str(fake_project.source_dir)
    result = invoke("check", "--source-root", source_root, "--json", str(BROKEN_FIX))
    assert result.exit_code == 1
    [record] = json.loads(result.output)
    assert (record["pr"], record["target"], record["ok"]) == (
        BROKEN_FIX,
        f"{TARGET_MODULE}.answer",
        False,
    )
    assert record["message"] != ""


def test_check_missing_source_root_is_a_usage_error(fake_project: FakeProject) -> None:
    result = invoke("check", "--source-root", "/no/such/dir")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: Invalid value for '--source-root': Path '/no/such/dir' does not exist "
        "(see `prtoggle check --help`)\n",
    )


def test_an_unknown_option_is_one_error_line_not_click_usage_text(
    fake_project: FakeProject,
) -> None:
    result = invoke("list", "--bogus")
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        "error: No such option '--bogus' (see `prtoggle list --help`)\n",
    )


def test_an_unknown_command_names_the_commands() -> None:
    result = invoke("lsit")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: no command 'lsit': expected one of bench, bisect, check, coverage, "
        "import-sglang, list, new, rebase, repro, run, show (see `prtoggle --help`)\n",
    )


def test_run_rejects_an_unknown_pr_before_starting(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", "777", "--", "true")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: -r='777': PR 777 is not registered; registered PRs: {REGISTERED}\n"
    )


def test_run_rejects_a_malformed_spec(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", "12x", "--", "true")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: -r='12x': '12x' is not a PR number; expected PR numbers or COLLECTION:PR "
        "(e.g. sglang:27460) separated by commas or spaces, or 'all'; "
        f"registered PRs: {REGISTERED}\n"
    )


def test_run_refuses_a_revert_that_does_not_apply_before_starting(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    result = invoke("run", "-r", str(BROKEN_FIX), "--", "touch", str(marker))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: PR {BROKEN_FIX} does not revert cleanly on the current code "
        f"({TARGET_MODULE}.answer: {TARGET_MODULE}.answer: edit 1 of 1 ("
    )
    assert result.stderr.endswith(
        f"expected exactly 1.); `prtoggle check {BROKEN_FIX} --collection registry` shows "
        "the nearest matching lines\n"
    )
    assert result.stderr.count("\n") == 1
    assert not marker.exists()


def test_run_names_a_missing_program(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", str(ANSWER_FIX), "--", "no-such-program-xyz")
    assert result.exit_code == 2
    assert result.stderr == ("error: cannot run 'no-such-program-xyz': No such file or directory\n")


def test_run_requires_a_command(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", str(ANSWER_FIX))
    assert (result.exit_code, result.stderr) == (
        2,
        "error: Missing argument 'COMMAND...' (see `prtoggle run --help`)\n",
    )


def test_run_checks_targets_found_in_the_working_directory_before_starting(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    # The target module is only in the working directory, where `python -c` finds it.
    marker = tmp_path / "started"
    env = {**fake_project.env(), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    code = f"import {TARGET_MODULE}; open({str(marker)!r}, 'w').close()"
    # -P: this prtoggle does not have its working directory on sys.path either
    prtoggle_run = [sys.executable, "-P", "-m", "prtoggle", "run", "-r", str(BROKEN_FIX), "--"]
    result = subprocess.run(
        [*prtoggle_run, sys.executable, "-c", code],
        env=env,
        cwd=fake_project.source_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stderr
    assert result.stderr.startswith(
        f"error: PR {BROKEN_FIX} does not revert cleanly on the current code ({TARGET_MODULE}."
    )
    assert not marker.exists()


@pytest.mark.parametrize("status", [0, 3, 125])
def test_run_passes_the_exit_status_through(fake_project: FakeProject, status: int) -> None:
    command = python_command(f"import sys; sys.exit({status})")
    assert invoke("run", "-r", str(ANSWER_FIX), "--", *command).exit_code == status


def test_run_reports_a_signal_as_128_plus_its_number(fake_project: FakeProject) -> None:
    command = python_command("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert invoke("run", "-r", str(ANSWER_FIX), "--", *command).exit_code == 128 + 15


def test_run_reverts_in_a_child_that_never_imports_prtoggle(fake_project: FakeProject) -> None:
    code = f"import {TARGET_MODULE} as m, sys; sys.exit(m.answer())"
    fixed = subprocess.run(python_command(code), env=fake_project.env(), check=False)
    assert fixed.returncode == 42
    reverted = subprocess.run(
        ["prtoggle", "run", "-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}", "--", *python_command(code)],
        env=fake_project.env(),
        check=False,
    )
    assert reverted.returncode == 41


def test_run_accepts_repeated_r_options_and_command_options(fake_project: FakeProject) -> None:
    code = (
        f"import {TARGET_MODULE} as m, sys; sys.exit(m.answer() + m.first_half() + m.second_half())"
    )
    result = subprocess.run(
        [
            "prtoggle",
            "run",
            "-r",
            str(ANSWER_FIX),
            "-r",
            str(SECOND_HALF_FIX),
            *python_command(code),
        ],
        env=fake_project.env(),
        check=False,
    )
    assert result.returncode == 41 + 21 + 0


def test_python_dash_m_prtoggle_help_lists_the_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "prtoggle", "--help"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("Usage: prtoggle [OPTIONS] COMMAND [ARGS]...")
    for command in ("bisect", "check", "list", "repro", "run", "show"):
        assert f"\n  {command} " in result.stdout


@pytest.mark.parametrize("command", ["list", "show", "check", "run", "repro", "bisect", "bench"])
def test_every_command_has_help_with_examples(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert f"  Examples:\n    prtoggle {command}" in result.output


def test_the_examples_of_show_and_list_run_on_the_shipped_recipes() -> None:
    for command in ("show", "list"):
        examples = invoke(command, "--help").output.split("Examples:\n", 1)[1].splitlines()
        for line in filter(None, (example.strip() for example in examples)):
            result = invoke(*line.split()[1:])
            assert result.exit_code == 0, f"{line}: {result.output}"


def test_importing_the_cli_does_not_import_torch() -> None:
    code = "import prtoggle.cli.main, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "argv", [["list"], ["show", "--collection", "fixes", "26521"], ["list", "--json"]]
)
def test_listing_commands_do_not_import_torch(argv: list[str]) -> None:
    code = (
        f"import sys\nfrom prtoggle.cli.main import main\nsys.argv = ['prtoggle', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    status = exc.code\n"
        "assert status in (0, None), status\nassert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_check_of_an_unknown_pr_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = invoke("check", str(ANSWER_FIX), "4711")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: PR 4711 is not registered; registered PRs: {REGISTERED} "
    )


def test_a_broken_registry_is_a_one_line_error(fake_project: FakeProject) -> None:
    (fake_project.registry_dir / "bad.yaml").write_text("pr: [unclosed\n")
    result = invoke("list")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {fake_project.registry_dir / 'bad.yaml'}:")
    assert "Traceback" not in result.output


def test_repro_takes_a_collection_and_names_the_known_ones(fake_project: FakeProject) -> None:
    result = invoke("repro", "--all", "--collection", "vllm")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: no recipe collection named 'vllm'; collections: registry "
        f"({fake_project.registry_dir})\n"
    )


def test_run_refuses_a_revert_outside_its_range_before_starting_the_program(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    """A recipe for other versions does not take part: the request is refused, exit 2."""
    path = fake_project.registry_dir / "90013.yaml"
    path.write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 41\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    marker = tmp_path / "started"
    refused = subprocess.run(
        ["prtoggle", "run", "-r", "90013", "--", *python_command(f"open({str(marker)!r}, 'w')")],
        env=fake_project.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (refused.returncode, refused.stderr, marker.exists()) == (
        2,
        "error: 90013: no recipe applies to the installed code: registry/90013 is out of "
        "range: installed prtoggle-fake 2.3, range prtoggle-fake>=1.0,<2.0; use a recipe for "
        "the installed version or install a version in that range\n",
        False,
    )


def test_bare_prtoggle_prints_its_usage_not_an_error_line() -> None:
    result = invoke()
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: prtoggle [OPTIONS] COMMAND [ARGS]...\n\n")
    assert "\nCommands:\n  bench " in result.stderr
    assert result.stdout == ""


def test_run_of_pytest_gives_no_assert_rewrite_warning_for_prtoggle(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    (tmp_path / "test_answer.py").write_text(
        f"import {TARGET_MODULE} as m\n\ndef test_answer():\n    assert m.answer() == 41\n"
    )
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        ["prtoggle", "run", "-r", str(ANSWER_FIX), "--", *pytest_argv, "test_answer.py"],
        env=fake_project.env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert "PytestAssertRewriteWarning" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("1 passed in ")


def test_run_all_keeps_what_applies_and_names_what_it_left_out_in_one_line(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    (fake_project.registry_dir / "90013.yaml").write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 41\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    for pr in (BROKEN_FIX, HARMLESS_FIX):  # keep one revert per target, all applying
        (fake_project.registry_dir / f"{pr}.yaml").unlink()
    seen = tmp_path / "seen"
    code = f"import os; open({str(seen)!r}, 'w').write(os.environ['SGLANG_DEBUG_REVERT_PR'])"
    result = invoke("run", "-r", "all", "--", *python_command(code))
    assert (result.exit_code, result.stderr) == (
        0,
        "prtoggle: -r all: left out 1 recipe(s) that do not apply here: 1 out-of-range "
        "(registry/90013); `prtoggle list` says why\n"
        f"prtoggle run: PRs {ANSWER_FIX}, {FIRST_HALF_FIX}, {SECOND_HALF_FIX} requested in 1 "
        "process, but no process imported its code, so nothing was reverted (registry/"
        f"{ANSWER_FIX}, registry/{FIRST_HALF_FIX}, registry/{SECOND_HALF_FIX})\n",
    )
    assert seen.read_text() == (
        f"registry:{ANSWER_FIX},registry:{FIRST_HALF_FIX},registry:{SECOND_HALF_FIX}"
    )


def test_zero_in_the_variable_means_no_revert_as_in_sglang(fake_project: FakeProject) -> None:
    code = (
        f"import prtoggle, {TARGET_MODULE} as m; print(prtoggle.maybe_revert_pr_fix(), m.answer())"
    )
    result = subprocess.run(
        python_command(code),
        env={**fake_project.env(), "SGLANG_DEBUG_REVERT_PR": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "() 42\n", "")
