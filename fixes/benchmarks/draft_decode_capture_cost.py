"""PR #26521 cost: draft-decode capture metadata with (fixed) or without (reverted) the copy."""

from __future__ import annotations

import torch

from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.benchmarks import common
from fixes.benchmarks.trtllm_state import attention_shape, build_paged_stack
from fixes.forward_batch import DraftDecodeInput, ForwardMode

NUM_STEPS = 3
STEP_ID = 0
CAPTURE_FILL_SEQ_LEN = 1
"""What a CUDA graph runner's static seq_lens hold at capture."""


def measure(options: common.BenchOptions) -> common.BenchResult:
    """Time `init_forward_metadata_capture_cuda_graph` of a draft-decode step backend."""
    device = common.bench_device(options)
    shape = attention_shape(options)
    stack = build_paged_stack(shape, device=device)
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        provider=options.provider,
        speculative_step_id=STEP_ID,
    )
    backend.init_cuda_graph_state(max_bs=shape.bs)
    req_pool_indices = torch.zeros(shape.bs, dtype=torch.int64, device=device)
    seq_lens = torch.full((shape.bs,), CAPTURE_FILL_SEQ_LEN, dtype=torch.int32, device=device)
    spec_info = DraftDecodeInput(topk=1, num_steps=NUM_STEPS)

    def capture_metadata() -> None:
        backend.init_forward_metadata_capture_cuda_graph(
            bs=shape.bs,
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            forward_mode=ForwardMode.DECODE,
            spec_info=spec_info,
        )

    timing = common.time_pair(capture_metadata, device=device, options=options)
    return common.make_result(
        name="draft_decode_capture_cost",
        timed=f"TRTLLMHAAttnBackend.init_forward_metadata_capture_cuda_graph, draft decode "
        f"step {STEP_ID}",
        timing=timing,
        pr=options.pr,
        shape=shape.record() | {"num_steps": NUM_STEPS, "seq_lens_fill": CAPTURE_FILL_SEQ_LEN},
        note="capture-time only (runs once per captured batch size); reverted skips one small copy",
    )


if __name__ == "__main__":
    common.run_bench_main(measure, description=__doc__ or "")
