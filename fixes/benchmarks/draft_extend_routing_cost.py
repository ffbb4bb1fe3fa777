"""PR #24856 cost: draft extend through the context kernel (fixed) or decode kernel (reverted)."""

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

ACCEPT_LENGTH = 4
"""Every request accepts the same number of tokens: the one batch the decode kernel handles."""


def measure(options: BenchOptions) -> BenchResult:
    """Time `forward_extend` on a DRAFT_EXTEND_V2 batch with equal accept lengths."""
    device = bench_device(options)
    shape = attention_shape(options)
    state = build_draft_extend_state(
        shape,
        accept_lengths=[ACCEPT_LENGTH] * shape.bs,
        device=device,
        provider=options.provider,
    )
    timing = time_pair(state.forward_extend, device=device, options=options)
    return make_result(
        name="draft_extend_routing_cost",
        timed="TRTLLMHAAttnBackend.forward_extend, DRAFT_EXTEND_V2, equal accept lengths",
        timing=timing,
        pr=options.pr,
        shape={
            **shape.record(),
            "accept_length": ACCEPT_LENGTH,
            "provider": options.provider or "default",
        },
        note="decode kernel (reverted) valid only because accept lengths are equal; "
        "upstream saw it up to ~4.7% faster",
    )


if __name__ == "__main__":
    run_bench_main(measure, description=__doc__ or "")
