"""sglang 0.5.23's own recipes (pr_fix_toggle.py) through import-sglang, check, run, and the API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from stand_ins import TAIL_SCRIPT, prefill_batch

import prtoggle

pytestmark = pytest.mark.sglang

EXPECTED = {25015: "ok", 26329: "ok", 26972: "ok", 27338: "stale", 27360: "ok", 27460: "stale"}
RECIPE_26329 = """
patches:
  - target: sglang.srt.speculative.eagle_utils._eagle_prefill_tail_tokens
    edits:
      - match: |
          tail_tokens = next_token_ids.to(batch.input_ids.dtype)
        prepend: |
          return next_token_ids.to(batch.input_ids.dtype)
"""


def prtoggle_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def upstream(tmp_path: Path, sglang_env: dict[str, str]) -> Path:
    out = tmp_path / "sglang-upstream"
    result = prtoggle_cli(["import-sglang", "--out", str(out)], sglang_env)
    assert result.returncode == 0, result.stderr
    return out


def statuses(result: subprocess.CompletedProcess[str]) -> dict[int, str]:
    rows = json.loads(result.stdout)
    found: dict[int, set[str]] = {}
    for row in rows:
        assert row["collection"] == "sglang-upstream"
        found.setdefault(row["pr"], set()).add(row["status"])
    return {pr: "stale" if "stale" in seen else seen.pop() for pr, seen in found.items()}


def test_import_sglang_writes_the_six_recipes_unchanged_and_is_idempotent(
    upstream: Path, sglang_env: dict[str, str]
) -> None:
    assert sorted(int(path.stem) for path in upstream.glob("*.yaml")) == sorted(EXPECTED)
    assert RECIPE_26329 in (upstream / "26329.yaml").read_text()
    again = prtoggle_cli(["import-sglang", "--out", str(upstream)], sglang_env)
    assert again.stdout.splitlines()[-1].endswith(": 0 written, 6 unchanged")


@pytest.mark.parametrize("where", ["import", "tree", "wheel"])
def test_check_finds_27338_and_27460_of_sglangs_own_recipes_stale(
    where: str, upstream: Path, sglang_env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    import sglang

    roots = {
        "import": [],
        "tree": ["--source-root", str(Path(sglang.__file__).parents[1])],
        "wheel": ["--source-root", str(request.getfixturevalue("sglang_wheel"))],
    }[where]
    env = {**sglang_env, "PRTOGGLE_YAML_PATH": str(upstream)}
    result = prtoggle_cli(["check", "--collection", "sglang-upstream", "--json", *roots], env)
    assert statuses(result) == EXPECTED, result.stderr[-2000:]
    assert result.returncode == 1


def test_sglangs_and_prtoggles_apply_patches_from_config_behave_the_same() -> None:
    from sglang.srt.debug_utils.source_patcher import apply_patches_from_config
    from sglang.srt.speculative import eagle_utils

    function = eagle_utils._eagle_prefill_tail_tokens
    original = function.__code__

    def tail() -> list[int]:
        return function(prefill_batch(), torch.tensor([5, 6])).tolist()

    assert tail() == [5, 99]
    results = {}
    for name, apply in [("sglang", apply_patches_from_config), ("prtoggle", None)]:
        states = (apply or prtoggle.apply_patches_from_config)(RECIPE_26329)
        results[name] = (tail(), [state.target_fn for state in states])
        for state in reversed(states):
            state.restore()
        assert function.__code__ is original
    assert results["sglang"] == results["prtoggle"] == ([5, 6], [function])


def test_prtoggle_run_reverts_26329_in_a_program_that_never_imports_prtoggle(
    upstream: Path, sglang_env: dict[str, str]
) -> None:
    env = {**sglang_env, "PRTOGGLE_YAML_PATH": str(upstream)}
    fixed = subprocess.run(
        [sys.executable, "-c", TAIL_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    reverted = prtoggle_cli(["run", "-r", "26329", "--", sys.executable, "-c", TAIL_SCRIPT], env)
    assert fixed.stdout.splitlines()[-1:] == ["[5, 99] False"], fixed.stderr[-2000:]
    assert reverted.stdout.splitlines()[-1:] == ["[5, 6] True"], reverted.stderr[-2000:]
