"""One PR number in several collections on real sglang 0.5.23: the built-in upstream collection.

sglang's own registered recipes (its pr_fix_toggle.py) are the built-in `sglang-upstream`;
ours (`yaml/sglang`) is preferred where it applies, sglang's text where it applies and
ours does not, and a request with no recipe that applies is refused before anything runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from prtoggle.errors import RevertSpecError
from prtoggle.recipes.registry import default_registry
from prtoggle.revert import toggle

pytestmark = pytest.mark.sglang

STALE_27338 = (
    "27338: no recipe applies to the installed code: sglang-upstream/27338 is stale: its match "
    "text is not in the installed code: sglang.srt.layers.attention.flashinfer_backend."
    "FlashInferMultiStepDraftBackend.init_cuda_graph_state: edit 1 of 1 ({toggle}:69) matched "
    "0 times in {site}/sglang/srt/layers/attention/flashinfer_backend.py:2630-2646; expected "
    "exactly 1.; `prtoggle check 27338 --collection sglang-upstream` shows the nearest lines; "
    "add a recipe for the installed version (a PRTOGGLE_YAML_PATH collection)"
)
OUT_OF_RANGE_22832 = (
    "sglang:22832: no recipe applies to the installed code: sglang/22832 is out of range: "
    "installed sglang 0.5.23, range sglang>=0.5.11,<0.5.15; use a recipe for the installed "
    "version or install a version in that range"
)


def prtoggle_cli(
    args: list[str], env: dict[str, str], *, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
    )


def chosen(spec: str) -> list[str]:
    registry = default_registry()
    requests = toggle.parse_revert_requests(spec, registry=registry)
    selections = toggle.select_reverts(requests, registry=registry)
    return [recipe.label for selection in selections for recipe in selection.recipes]


def stale_27338() -> str:
    toggle_file = default_registry().in_collection("sglang-upstream").recipes[0].path
    site = toggle_file.parents[3]
    return STALE_27338.format(toggle=toggle_file, site=site)


def test_sglangs_registered_recipes_are_a_built_in_collection(
    sglang_env: dict[str, str],
) -> None:
    result = prtoggle_cli(["list", "--json", "--collection", "sglang-upstream"], sglang_env)
    assert result.returncode == 0, result.stderr
    assert [record["pr"] for record in json.loads(result.stdout)] == [
        25015,
        26329,
        26972,
        27338,
        27360,
        27460,
    ]


def test_27460_uses_our_rebased_recipe_and_26329_sglangs_own_text() -> None:
    assert chosen("27460") == ["fixes/27460", "sglang/27460"]
    assert chosen("26329") == ["sglang-upstream/26329"]
    assert chosen("sglang:27460") == ["sglang/27460"]


def test_27338_is_refused_up_front_with_the_recipe_the_reason_and_what_to_do(
    sglang_env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    code = f"open({str(marker)!r}, 'w')"
    result = prtoggle_cli(["run", "-r", "27338", "--", sys.executable, "-c", code], sglang_env)
    assert (result.returncode, result.stdout, marker.exists()) == (2, "", False)
    assert result.stderr == f"error: {stale_27338()}\n"
    with pytest.raises(RevertSpecError) as in_process:
        toggle.apply_revert(27338)
    assert str(in_process.value) == stale_27338()


def test_a_qualified_revert_outside_its_range_is_refused_and_the_plain_number_is_not(
    sglang_env: dict[str, str],
) -> None:
    with pytest.raises(RevertSpecError) as caught:
        toggle.apply_revert("sglang:22832")
    assert str(caught.value) == OUT_OF_RANGE_22832
    assert chosen("22832") == ["fixes/22832"]


def test_show_26521_shows_both_collections(sglang_env: dict[str, str]) -> None:
    result = prtoggle_cli(["show", "26521", "--json"], sglang_env)
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert [(r["collection"], "diffs" in r) for r in records] == [
        ("fixes", True),
        ("sglang", False),
    ]
    assert "outside the recipe's range sglang>=0.5.14,<0.5.15" in records[1]["error"]


def test_bisect_names_the_culprit_once_and_sglangs_out_of_range_24856_is_absent(
    sglang_env: dict[str, str], tmp_path: Path
) -> None:
    app = tmp_path / "app.py"
    app.write_text(
        "import sys, prtoggle\nsys.exit(1 if prtoggle.is_reverted('fixes:24856') else 0)\n"
    )
    result = prtoggle_cli(
        [
            "bisect",
            "--mode",
            "ddmin",
            "--cold",
            "-r",
            "21649,24856",
            "--",
            sys.executable,
            str(app),
        ],
        sglang_env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "conflict" not in result.stdout
    assert result.stdout.splitlines()[-2:] == [
        "culprit: 24856 (ddmin, 4 runs)",
        "reverting 24856 alone makes the command fail",
    ]


def test_run_all_runs_and_names_what_it_left_out(sglang_env: dict[str, str]) -> None:
    code = "import os; print(os.environ['SGLANG_DEBUG_REVERT_PR'])"
    result = prtoggle_cli(["run", "-r", "all", "--", sys.executable, "-c", code], sglang_env)
    assert result.returncode == 0, result.stderr
    [note] = [line for line in result.stderr.splitlines() if not line.startswith("prtoggle run:")]
    assert note == (
        "prtoggle: -r all: left out 5 recipes that do not apply here: 3 out-of-range "
        "(sglang/22832, sglang/24856, sglang/26521); 1 stale (sglang-upstream/27338); "
        "1 shadowed (sglang-upstream/27460); `prtoggle list` says why"
    )
    assert result.stdout.splitlines()[-1] == (
        "fixes:21649,sglang:21649,fixes:22832,fixes:24856,sglang-upstream:25015,"
        "sglang-upstream:26329,fixes:26521,sglang-upstream:26972,sglang-upstream:27360,"
        "fixes:27460,sglang:27460"
    )


def test_run_all_waits_only_for_the_prs_it_kept_to_land() -> None:
    from prtoggle.commands.run import run_environment

    notes: list[str] = []
    command = [sys.executable, "-c", "pass"]
    prs, env = run_environment(["all"], command=command, notes=notes, base={})
    assert prs == (21649, 22832, 24856, 25015, 26329, 26521, 26972, 27360, 27460)  # no 27338
    assert env["SGLANG_DEBUG_REVERT_PR"].split(",")[:2] == ["fixes:21649", "sglang:21649"]
    assert "1 stale (sglang-upstream/27338)" in "\n".join(notes)


def test_coverage_of_sglangs_22832_is_refused_never_reported_guarded(
    sglang_env: dict[str, str],
) -> None:
    args = ["coverage", "--require-guard", "--collection", "sglang", "-r", "22832", "--"]
    result = prtoggle_cli([*args, sys.executable, "-m", "pytest", "tests/regression"], sglang_env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {OUT_OF_RANGE_22832}\n"


def test_zero_is_off_and_a_qualified_revert_is_in_force_with_that_recipe_only(
    sglang_env: dict[str, str],
) -> None:
    code = (
        "import prtoggle\n"
        "print(prtoggle.maybe_revert_pr_fix(), prtoggle.is_reverted('sglang:27460'), "
        "prtoggle.is_reverted('fixes:27460'))\n"
    )
    for value, expected in (("0", "() False False"), ("sglang:27460", "(27460,) True False")):
        env = {**sglang_env, "SGLANG_DEBUG_REVERT_PR": value}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert (done.returncode, done.stdout.strip()) == (0, expected), done.stderr


def test_check_leaves_sglangs_own_text_to_its_collection(sglang_env: dict[str, str]) -> None:
    everything = prtoggle_cli(["check", "--json"], sglang_env)
    assert everything.returncode == 0, everything.stdout[-2000:] + everything.stderr
    assert {row["collection"] for row in json.loads(everything.stdout)} == {"fixes", "sglang"}
    upstream = prtoggle_cli(["check", "--json", "--collection", "sglang-upstream"], sglang_env)
    stale = {row["pr"] for row in json.loads(upstream.stdout) if row["status"] == "stale"}
    assert (upstream.returncode, stale) == (1, {27338, 27460})
