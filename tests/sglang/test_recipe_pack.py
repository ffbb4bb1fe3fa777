"""yaml/sglang (prtoggle's maintained pack) on the real sglang 0.5.23 functions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from stand_ins import WIDTH_SCRIPT, cuda_devices_on_cpu

import prtoggle
from prtoggle.recipes.schema import load_recipe

pytestmark = pytest.mark.sglang

PACK = Path(__file__).parents[2] / "yaml" / "sglang"
RECIPES = [
    path
    for path in sorted(PACK.glob("*.yaml"))
    if (found := load_recipe(path).applies_to) is None or found.contains("0.5.23")
]
"""The recipes for 0.5.23; the others (applies_to an older range) are in test_recipe_history."""


def test_the_pack_holds_the_recipes_of_the_seed_fixes_still_in_sglang() -> None:
    assert [path.stem for path in RECIPES] == ["21649", "27460"]


@pytest.mark.parametrize("path", RECIPES, ids=lambda path: path.stem)
def test_every_recipe_applies_to_the_real_functions_and_restores_them_exactly(
    path: Path, sglang_installed: str
) -> None:
    fix = load_recipe(path)
    assert sglang_installed in fix.verified_on
    states = prtoggle.apply_patches_from_config(path.read_text())
    assert [state.target for state in states] == [patch.target for patch in fix.patches]
    originals = [state.original_code for state in states]
    assert all(s.target_fn.__code__ is not o for s, o in zip(states, originals, strict=True))
    for state in reversed(states):
        state.restore()
    assert all(s.target_fn.__code__ is o for s, o in zip(states, originals, strict=True))


def test_reverting_27460_narrows_the_real_mla_draft_graph_buffer_by_topk() -> None:
    import types

    from sglang.srt.layers.attention.flashinfer_mla_backend import (
        FlashInferMLAMultiStepDraftBackend,
    )

    def width() -> int:
        steps = [types.SimpleNamespace(init_cuda_graph_state=lambda *a, **k: None)] * 2
        backend = types.SimpleNamespace(
            speculative_num_steps=3, topk=4, max_context_len=64, attn_backends=steps
        )
        with cuda_devices_on_cpu():
            FlashInferMLAMultiStepDraftBackend.init_cuda_graph_state(backend, 8, 32)
        return int(backend.cuda_graph_kv_indices.shape[1])

    assert width() == 8 * 4 * 64
    with prtoggle.reverted(27460):
        assert width() == 8 * 64
    assert width() == 8 * 4 * 64


def test_sglang_debug_revert_pr_27460_narrows_the_buffer_in_a_real_process(
    sglang_env: dict[str, str],
) -> None:
    script = "import prtoggle; prtoggle.maybe_revert_pr_fix()\n" + WIDTH_SCRIPT
    fixed = subprocess.run(
        [sys.executable, "-c", script],
        env=sglang_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    reverted = subprocess.run(
        [sys.executable, "-c", script],
        env={**sglang_env, "SGLANG_DEBUG_REVERT_PR": "27460"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert fixed.stdout.splitlines()[-1:] == ["(3, 2048)"], fixed.stderr[-2000:]
    assert reverted.stdout.splitlines()[-1:] == ["(3, 512)"], reverted.stderr[-2000:]
