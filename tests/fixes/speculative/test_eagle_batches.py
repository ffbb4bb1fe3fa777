"""The verify result and DRAFT_EXTEND_V2 batch built for the multi-layer EAGLE worker."""

from __future__ import annotations

import torch

from fixes.forward_batch import DraftExtendInput, ForwardMode
from fixes.speculative.eagle_batches import draft_extend_after_verify


def test_the_batch_holds_each_requests_window_row_and_accept_length() -> None:
    generator = torch.Generator().manual_seed(0)
    batch, verify = draft_extend_after_verify(
        rows=[5, 2],
        accept_lengths=[3, 1],
        num_steps=3,
        hidden_size=8,
        vocab_size=11,
        prefix_len=10,
        pool_rows=6,
        max_context_len=16,
        generator=generator,
        device=torch.device("cpu"),
    )
    assert batch.forward_mode is ForwardMode.DRAFT_EXTEND_V2
    assert batch.req_pool_indices.tolist() == [5, 2]
    assert batch.extend_start_loc is not None and batch.extend_start_loc.tolist() == [0, 4]
    assert batch.extend_seq_lens_cpu == [4, 4]
    assert batch.seq_lens_cpu.tolist() == [10, 10]
    assert isinstance(batch.spec_info, DraftExtendInput)
    assert batch.spec_info.accept_lengths_cpu == [3, 1]
    assert verify.accept_lens.tolist() == [3, 1]
    assert tuple(verify.hidden_states.shape) == (8, 8)
    assert torch.equal(batch.input_ids, verify.next_token_ids)
    again = torch.Generator().manual_seed(0)
    assert torch.equal(verify.hidden_states, torch.randn(8, 8, generator=again))
