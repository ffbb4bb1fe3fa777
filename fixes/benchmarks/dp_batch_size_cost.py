"""PR #21649 cost: context-kernel batch size from the metadata (fixed) or the batch (reverted)."""

from __future__ import annotations

from fixes.benchmarks.common import (
    BenchOptions,
    BenchResult,
    bench_device,
    make_result,
    run_bench_main,
    time_pair,
)
from fixes.benchmarks.trtllm_state import attention_shape, build_draft_extend_state

ACCEPT_CYCLE = (1, 3, 2, 4)
"""Accept lengths, repeated over the batch (draft extend, as in EAGLE v2 under DP attention)."""


def measure(options: BenchOptions) -> BenchResult:
    """Time `forward_extend` on a draft-extend batch that DP attention did not pad."""
    device = bench_device(options)
    shape = attention_shape(options)
    accept_lengths = [ACCEPT_CYCLE[b % len(ACCEPT_CYCLE)] for b in range(shape.bs)]
    state = build_draft_extend_state(
        shape, accept_lengths=accept_lengths, device=device, provider=options.provider
    )
    timing = time_pair(state.forward_extend, device=device, options=options)
    return make_result(
        name="dp_batch_size_cost",
        timed="TRTLLMHAAttnBackend.forward_extend, DRAFT_EXTEND_V2, batch not padded",
        timing=timing,
        pr=options.pr,
        shape={
            **shape.record(),
            "accept_length_cycle": list(ACCEPT_CYCLE),
            "provider": options.provider or "default",
        },
        note="same context kernel and batch size either way (no DP padding): expect ~1.0",
    )


if __name__ == "__main__":
    run_bench_main(measure, description=__doc__ or "")
