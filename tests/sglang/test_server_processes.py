"""A server's processes on real sglang: spawned scheduler calling sglang's own toggle, workers.

`server_like.py` is launch_server's process tree on CPU: a spawned scheduler importing the
real `sglang.srt.managers.scheduler` and calling sglang's own `maybe_revert_pr_fix()` (as
`Scheduler.__init__` does), a spawned worker and a forked child below it. Without prtoggle's
takeover of sglang's toggle, the scheduler dies on sglang's stale 27460 text or on a PR sglang
does not register (21649).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.sglang

SERVER_LIKE = Path(__file__).with_name("server_like.py")
MLA = "sglang.srt.layers.attention.flashinfer_mla_backend.FlashInferMLAMultiStepDraftBackend"
TARGETS = {
    27460: [f"{MLA}.init_cuda_graph_state", f"{MLA}.common_template"],
    21649: ["sglang.srt.layers.attention.trtllm_mha_backend.TRTLLMHAAttnBackend.forward_extend"],
    26329: ["sglang.srt.speculative.eagle_utils._eagle_prefill_tail_tokens"],
}
LABELS = {
    27460: "fixes/27460, sglang/27460",
    21649: "fixes/21649, sglang/21649",
    26329: "sglang-upstream/26329",
}
ROLES = ["main", "scheduler", "worker", "forked"]
# What `-r all` holds on sglang 0.5.23 (test_collections.py pins the selection itself).
ALL_APPLICABLE = [21649, 22832, 24856, 25015, 26329, 26521, 26972, 27360, 27460]


def run_server(
    prs: list[int], env: dict[str, str], *, under_run: bool, revert: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, object]]]:
    """Run server_like.py reverting `revert` (default: `prs`); each process checks `prs`."""
    checked = ",".join(map(str, prs))
    spec = checked if revert is None else revert
    targets = [target for pr in prs if pr in TARGETS for target in TARGETS[pr]]
    program = [sys.executable, str(SERVER_LIKE), checked, *targets]
    if under_run:
        command = [sys.executable, "-m", "prtoggle", "run", "-r", spec, "--", *program]
    else:
        command = [*program, "--self"]
        env = {**env, "SGLANG_DEBUG_REVERT_PR": spec}
    result = subprocess.run(
        command,
        env={**env, "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, {report["role"]: report for report in reports}


def failure(result: subprocess.CompletedProcess[str]) -> str:
    """What a failed run of the server shows: its exit status, its reports, its stderr's end."""
    tail = result.stderr[-3000:]
    return f"exit status {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{tail}"


def prtoggle_lines(stderr: str) -> list[str]:
    """What prtoggle said on the run's stderr: children say nothing, `run` one line."""
    return [line for line in stderr.splitlines() if line.startswith("prtoggle")]


def in_force_pattern(prs: list[int]) -> str:
    """`run`'s line: the PRs, in how many processes, which recipes landed, which never did."""
    named = f"PR {prs[0]}" if len(prs) == 1 else "PRs " + ", ".join(map(str, prs))
    landed = ", ".join(
        label for pr in prs for label in LABELS[pr].split(", ") if "fixes/" not in label
    )
    idle = ", ".join(label for pr in prs for label in LABELS[pr].split(", ") if "fixes/" in label)
    tail = f"; never imported, so not reverted: {idle}" if idle else ""
    return (
        re.escape(f"prtoggle run: {named} in force in ")
        + r"(\d+)"
        + re.escape(f" processes ({landed}){tail}")
    )


@pytest.mark.parametrize(
    "prs",
    [[27460], [21649], [26329], [21649, 27460]],
    ids=["27460", "21649", "26329-sglangs-own-text", "list"],
)
def test_prtoggle_run_reverts_in_the_spawned_scheduler_calling_sglangs_toggle_and_below_it(
    prs: list[int], sglang_env: dict[str, str]
) -> None:
    result, reports = run_server(prs, sglang_env, under_run=True)
    assert result.returncode == 0, failure(result)
    assert sorted(reports) == sorted(ROLES)
    targets = [target for pr in prs for target in TARGETS[pr]]
    for role in ROLES:
        assert reports[role]["in_force"] == prs, role
        assert reports[role]["differs"] == ([] if role == "main" else targets), role
    [line] = prtoggle_lines(result.stderr)  # the children (the demo engine's never imported)
    count = re.fullmatch(in_force_pattern(prs), line)
    assert count is not None, line
    assert int(count[1]) >= len(ROLES)  # also multiprocessing's resource tracker
    assert "Traceback" not in result.stderr


def test_prtoggle_run_all_reverts_every_applicable_recipe_in_each_server_process(
    sglang_env: dict[str, str],
) -> None:
    result, reports = run_server(ALL_APPLICABLE, sglang_env, under_run=True, revert="all")
    assert result.returncode == 0, failure(result)
    assert sorted(reports) == sorted(ROLES)
    targets = [target for pr in ALL_APPLICABLE if pr in TARGETS for target in TARGETS[pr]]
    for role in ROLES:
        assert reports[role]["in_force"] == ALL_APPLICABLE, role
        assert reports[role]["differs"] == ([] if role == "main" else targets), role
    left_out, in_force = prtoggle_lines(result.stderr)
    assert "-r all: left out" in left_out
    assert "1 stale (sglang-upstream/27338)" in left_out
    assert re.match(r"prtoggle run: PRs [\d, ]+ in force in \d+ processes \(", in_force)
    assert "Traceback" not in result.stderr


def test_prtoggle_run_of_the_stale_27338_starts_no_server_process(
    sglang_env: dict[str, str],
) -> None:
    result, reports = run_server([27338], sglang_env, under_run=True)
    assert (result.returncode, reports) == (2, {})
    assert result.stderr.startswith("error: 27338: no recipe applies to the installed code: ")
    assert len(result.stderr.splitlines()) == 1


def test_a_program_calling_maybe_revert_pr_fix_itself_passes_its_reverts_to_every_child(
    sglang_env: dict[str, str],
) -> None:
    result, reports = run_server([27460], sglang_env, under_run=False)
    assert result.returncode == 0, failure(result)
    for role in ROLES:
        assert reports[role]["in_force"] == [27460], role
        assert reports[role]["differs"] == ([] if role == "main" else TARGETS[27460]), role
    assert prtoggle_lines(result.stderr) == []  # children are quiet; no `run` parent to say it


def test_the_exit_report_is_printed_once_by_each_process_a_fork_included(
    tmp_path: Path, sglang_env: dict[str, str]
) -> None:
    (tmp_path / "lonely.py").write_text("def value():\n    return 1\n")
    (tmp_path / "lonelies").mkdir()
    (tmp_path / "lonelies" / "99105.yaml").write_text(
        "patches:\n  - target: lonely.value\n    edits:\n"
        "      - match: return 1\n        replacement: return 2\n"
    )
    program = f"""\
        import importlib.util, os, sys
        spec = importlib.util.spec_from_file_location("lonely", {str(tmp_path / "lonely.py")!r})
        module = importlib.util.module_from_spec(spec)
        sys.modules["lonely"] = module
        spec.loader.exec_module(module)  # behind the import system: never patched
        print(module.value(), flush=True)
        child = os.fork()
        if child:
            os.waitpid(child, 0)
        """
    env = {**sglang_env, "PRTOGGLE_YAML_PATH": str(tmp_path / "lonelies")}
    spec = "lonelies:99105"  # a bare number leaves out a recipe whose package is not importable
    command = ["run", "-r", spec, "--", sys.executable, "-c", textwrap.dedent(program)]
    result = subprocess.run(
        [sys.executable, "-m", "prtoggle", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (result.returncode, result.stdout) == (78, "1\n")  # the run says it did not land
    report = (
        "prtoggle: PR 99105 was requested but never reverted: lonely.value imported and not patched"
    )
    lines = result.stderr.splitlines()
    assert lines[:2] == [report, report]  # the forked child's, then the parent's
    assert lines[2].startswith("prtoggle run: PR 99105 never reverted in process ")
    assert len(lines) == 3


def test_sglangs_toggle_imported_before_prtoggle_came_into_force_is_taken_over_too(
    sglang_env: dict[str, str],
) -> None:
    code = textwrap.dedent("""\
        from sglang.srt.debug_utils.pr_fix_toggle import maybe_revert_pr_fix as bound_early
        import prtoggle
        from prtoggle.revert import sglang_toggle
        print(sglang_toggle.is_taken_over(), prtoggle.maybe_revert_pr_fix())
        print(bound_early(), sglang_toggle.is_taken_over(), prtoggle.is_reverted(21649))
        """)
    env = {**sglang_env, "SGLANG_DEBUG_REVERT_PR": "21649", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "False (21649,)\nNone True True\n"), (
        result.stderr
    )
