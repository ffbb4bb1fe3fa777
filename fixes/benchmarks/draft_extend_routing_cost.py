"""PR #24856 cost: draft extend through the context kernel (fixed) or decode kernel (reverted)."""

from __future__ import annotations

from fixes.benchmarks import common
from fixes.benchmarks.trtllm_state import attention_shape, measure_draft_extend

ACCEPT_LENGTH = 4
"""Every request accepts the same number of tokens: the one batch the decode kernel handles."""


def measure(options: common.BenchOptions) -> common.BenchResult:
    """Time `forward_extend` on a DRAFT_EXTEND_V2 batch with equal accept lengths."""
    bs = attention_shape(options).bs
    return measure_draft_extend(
        options,
        accept_lengths=[ACCEPT_LENGTH] * bs,
        name="draft_extend_routing_cost",
        timed="TRTLLMHAAttnBackend.forward_extend, DRAFT_EXTEND_V2, equal accept lengths",
        shape_extras={"accept_length": ACCEPT_LENGTH},
        note="decode kernel (reverted) valid only because accept lengths are equal; "
        "upstream saw it up to ~4.7% faster",
    )


if __name__ == "__main__":
    common.run_bench_main(measure, description=__doc__ or "")
