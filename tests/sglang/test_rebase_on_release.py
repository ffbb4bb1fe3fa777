"""`prtoggle rebase` of real recipes onto the sglang 0.5.23 wheel: moved, re-anchored, declined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prtoggle.cli.main import cli
from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import load_recipe

pytestmark = pytest.mark.sglang
MOONCAKE_REASON = (
    "merged onto the most similar window, the edit does not apply cleanly there (its new "
    "match is not unique in the function, or the result is not the merged text); rewrite "
    "this edit by hand"
)

RECIPE_26972_BEFORE_THE_MOVE = """\
pr: 26972
title: sglang's revert recipe for PR 26972, as written when its target was in mem_cache.common
url: https://github.com/sgl-project/sglang/pull/26972
patches:
  - target: sglang.srt.mem_cache.common.get_req_to_token_extra_context_len
    edits:
      - match: |
          extra = max(extra, get_alloc_reserve_per_decode() + page_size - 1)
        replacement: |
          pass
"""
TARGET_27338 = (
    "sglang.srt.layers.attention.flashinfer_backend.FlashInferMultiStepDraftBackend."
    "init_cuda_graph_state"
)
RECIPE_27338 = f"""\
pr: 27338
title: sglang's revert recipe for PR 27338 (its text in sglang 0.5.23)
patches:
  - target: {TARGET_27338}
    edits:
      - match: |
          (self.speculative_num_steps, max_bs * self.topk * self.max_context_len),
        replacement: |
          (self.speculative_num_steps, max_bs * self.max_context_len),
"""
RECIPE_DRAFTED_ON_0_5_22 = """\
pr: 7
title: drafted by `new --from-diff` from the 0.5.21 -> 0.5.22 diff, for 0.5.22
patches:
- target: sglang.srt.mem_cache.pool_host.mla.MLATokenToKVPoolHost.init_kv_buffer
  edits:
  - match: |
      alloc_func = ALLOC_MEMORY_FUNCS[self._transfer_device.type]
      if getattr(self.device_pool, "dsa_kv_cache_store_fp8", False):
    replacement: |
      alloc_func = ALLOC_MEMORY_FUNCS[self.device_pool.device]
      if getattr(self.device_pool, "dsa_kv_cache_store_fp8", False):
  - match: |
      alloc_func = ALLOC_MEMORY_FUNCS[self._transfer_device.type]
    replacement: |
      alloc_func = ALLOC_MEMORY_FUNCS[self.device_pool.device]
"""
RECIPE_NIXL_SENDER_DRAFTED_ON_0_5_22 = """\
pr: 12
title: drafted by `new --from-diff` from the 0.5.21 -> 0.5.22 diff of nixl/conn.py, for 0.5.22
patches:
- target: sglang.srt.disaggregation.nixl.conn.NixlKVSender.__init__
  edits:
  - match: |
      req_has_disagg_prefill_dp_rank: bool = False,
    prepend: |
      dest_tp_ranks: List[int],
      pp_rank: int,
  - match: |
      req_has_disagg_prefill_dp_rank,
    prepend: |
      dest_tp_ranks,
      pp_rank,
"""
RECIPE_MOONCAKE_SENDER_DRAFTED_ON_0_5_22 = """\
pr: 13
title: drafted by `new --from-diff` from the 0.5.21 -> 0.5.22 diff of mooncake/conn.py, for 0.5.22
patches:
- target: sglang.srt.disaggregation.mooncake.conn.MooncakeKVSender.__init__
  edits:
  - match: |
      req_has_disagg_prefill_dp_rank: bool = False,
    prepend: |
      dest_tp_ranks: List[int],
      pp_rank: int,
  - match: |
      req_has_disagg_prefill_dp_rank,
    prepend: |
      dest_tp_ranks,
      pp_rank,
  - match: |
      self.init_time = time.time()
    prepend: |
      self.conclude_state = None
"""
RECIPE_26329 = """\
pr: 26329
title: sglang's revert recipe for PR 26329 (already applies to 0.5.23)
patches:
  - target: sglang.srt.speculative.eagle_utils._eagle_prefill_tail_tokens
    edits:
      - match: |
          tail_tokens = next_token_ids.to(batch.input_ids.dtype)
        prepend: |
          return next_token_ids.to(batch.input_ids.dtype)
"""


@pytest.fixture
def older(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A collection `older` of real recipe texts written for earlier sglang code."""
    folder = tmp_path / "older"
    folder.mkdir()
    texts = (RECIPE_26972_BEFORE_THE_MOVE, RECIPE_27338, RECIPE_DRAFTED_ON_0_5_22)
    texts += (RECIPE_NIXL_SENDER_DRAFTED_ON_0_5_22, RECIPE_MOONCAKE_SENDER_DRAFTED_ON_0_5_22)
    for text in texts:
        pr = text.split("\n", 1)[0].split()[1]
        (folder / f"{pr}.yaml").write_text(text)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(folder))
    return folder


def rebase(pr: int, wheel: Path, out: Path) -> tuple[int, dict[str, object]]:
    args = ["rebase", str(pr), "--collection", "older", "--source-root", str(wheel)]
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "--json"], prog_name="prtoggle")
    return result.exit_code, json.loads(result.stdout)


def test_a_target_that_moved_module_is_found_by_its_body(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    code, record = rebase(26972, sglang_wheel, tmp_path / "out")
    assert (code, record) == (
        0,
        {
            "pr": 26972,
            "collection": "older",
            "status": "rebased",
            "edits": [
                {
                    "target": "sglang.srt.mem_cache.allocation_sizing."
                    "get_req_to_token_extra_context_len",
                    "old_target": "sglang.srt.mem_cache.common.get_req_to_token_extra_context_len",
                    "status": "moved",
                    "similarity": 1.0,
                    "reason": "",
                }
            ],
        },
    )
    written = load_recipe(tmp_path / "out" / "26972.yaml")
    assert written.title == RECIPE_26972_BEFORE_THE_MOVE.split("\n")[1][len("title: ") :]
    assert [c.status for c in check_recipe(written, tree=open_source_tree(sglang_wheel))] == ["ok"]


def test_an_edit_whose_context_drifted_is_re_anchored_by_a_three_way_merge(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    code, record = rebase(7, sglang_wheel, tmp_path / "out")
    assert code == 0
    assert record["status"] == "rebased"
    edits = record["edits"]
    assert isinstance(edits, list)
    assert [(e["status"], e["similarity"]) for e in edits] == [
        ("re-anchored", 0.854),
        ("exact", 1.0),
    ]
    written = load_recipe(tmp_path / "out" / "7.yaml")
    first = written.patches[0].edits[0]
    assert (first.match, first.text) == (
        "alloc_func = ALLOC_MEMORY_FUNCS[self._transfer_device.type]\n"
        "if self.dsa_kv_cache_store_fp8:\n",
        "alloc_func = ALLOC_MEMORY_FUNCS[self.device_pool.device]\n"
        "if self.dsa_kv_cache_store_fp8:\n",
    )
    assert [c.status for c in check_recipe(written, tree=open_source_tree(sglang_wheel))] == ["ok"]


def test_27338_restructured_on_0_5_23_is_declined_and_nothing_is_written(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    code, record = rebase(27338, sglang_wheel, tmp_path / "out")
    target = TARGET_27338
    assert (code, record["status"]) == (1, "failed")
    assert record["edits"] == [
        {
            "target": target,
            "old_target": target,
            "status": "not-found",
            "similarity": 0.673,
            "reason": "the code changed the same or an adjacent line the edit changes, so the "
            "two changes cannot be merged: the match's '(self.speculative_num_steps, max_bs * "
            "self.topk * self.max_context_len),' now reads 'max_bs, self.topk, "
            "self.max_context_len' (line 6 of the function); rewrite this edit by hand",
        }
    ]
    assert not (tmp_path / "out").exists()


def test_a_sender_folded_into_two_as_similar_base_classes_is_a_tie_declined_naming_both(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    """0.5.23 emptied NixlKVSender into CommonKVSender, whose __init__ has the signature of
    the abstract BaseKVSender.__init__: a revert onto either could be the wrong one."""
    args = ["rebase", "12", "--collection", "older", "--source-root", str(sglang_wheel)]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    old = "sglang.srt.disaggregation.nixl.conn.NixlKVSender.__init__"
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"could not rebase older/12: no unambiguous place for edits 1 and 2 ({old}): moved "
        "candidates sglang.srt.disaggregation.base.conn.BaseKVSender.__init__ (similarity "
        "0.908) and sglang.srt.disaggregation.common.conn.CommonKVSender.__init__ (0.908) are "
        "too close to tell apart (margin 0.1); nothing written"
    )
    assert not (tmp_path / "out").exists()


def test_a_moved_target_found_by_similarity_still_declines_an_edit_that_cannot_be_placed(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    """MooncakeKVSender.__init__'s code is CommonKVSender.__init__'s on 0.5.23, which no
    longer passes its arguments on to a super().__init__ call: the second edit has no place."""
    code, record = rebase(13, sglang_wheel, tmp_path / "out")
    old = "sglang.srt.disaggregation.mooncake.conn.MooncakeKVSender.__init__"
    new = "sglang.srt.disaggregation.common.conn.CommonKVSender.__init__"
    assert (code, record["status"]) == (1, "failed")
    edits = record["edits"]
    assert isinstance(edits, list)
    assert [{k: v for k, v in e.items() if k != "reason"} for e in edits] == [
        {"target": new, "old_target": old, "status": "moved", "similarity": 1.0},
        {"target": new, "old_target": old, "status": "not-found", "similarity": 0.816},
    ]
    assert [e["reason"] for e in edits] == ["", MOONCAKE_REASON]
    assert not (tmp_path / "out").exists()


def test_a_recipe_that_applies_is_unchanged_and_not_rewritten(
    older: Path, sglang_wheel: Path, tmp_path: Path
) -> None:
    (older / "26329.yaml").write_text(RECIPE_26329)
    code, record = rebase(26329, sglang_wheel, tmp_path / "out")
    assert (code, record["status"]) == (0, "unchanged")
    assert not (tmp_path / "out").exists()
