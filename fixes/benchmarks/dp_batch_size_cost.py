"""PR #21649 cost: context-kernel batch size from the metadata (fixed) or the batch (reverted)."""

from __future__ import annotations

from fixes.benchmarks import common
from fixes.benchmarks.trtllm_state import attention_shape, measure_draft_extend

ACCEPT_CYCLE = (1, 3, 2, 4)
"""Accept lengths, repeated over the batch (draft extend, as in EAGLE v2 under DP attention)."""


def measure(options: common.BenchOptions) -> common.BenchResult:
    """Time `forward_extend` on a draft-extend batch that DP attention did not pad."""
    bs = attention_shape(options).bs
    return measure_draft_extend(
        options,
        accept_lengths=[ACCEPT_CYCLE[b % len(ACCEPT_CYCLE)] for b in range(bs)],
        name="dp_batch_size_cost",
        timed="TRTLLMHAAttnBackend.forward_extend, DRAFT_EXTEND_V2, batch not padded",
        shape_extras={"accept_length_cycle": list(ACCEPT_CYCLE)},
        note="same context kernel and batch size either way (no DP padding): expect ~1.0",
    )


if __name__ == "__main__":
    common.run_bench_main(measure, description=__doc__ or "")
