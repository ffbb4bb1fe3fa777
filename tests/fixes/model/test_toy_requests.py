"""Tests for toy requests: slot allocation and the ForwardBatch fields of each mode."""

from __future__ import annotations

import torch

from fixes.forward_batch import DraftDecodeInput, ForwardMode
from fixes.model.toy_requests import build_stack, random_tokens


def test_extend_batch_records_lengths_starts_and_slots_from_req_to_token() -> None:
    stack = build_stack(device=torch.device("cpu"), page_size=4)
    requests = stack.new_requests(2)
    batch = stack.extend_batch(requests, [[1, 2, 3], [4, 5]])
    assert batch.forward_mode is ForwardMode.EXTEND
    assert (batch.batch_size, batch.seq_lens.tolist(), batch.extend_seq_lens_cpu) == (
        2,
        [3, 2],
        [3, 2],
    )
    assert batch.extend_start_loc is not None and batch.extend_start_loc.tolist() == [0, 3]
    assert batch.input_ids.tolist() == [1, 2, 3, 4, 5]
    r2t = stack.req_to_token_pool.req_to_token
    expected = [*r2t[requests[0].row, :3].tolist(), *r2t[requests[1].row, :2].tolist()]
    assert batch.out_cache_loc.tolist() == expected
    assert all(slot >= 4 for slot in expected)  # page 0 is the padding page

    second = stack.extend_batch(requests, [[6], [7]], mode=ForwardMode.DECODE)
    assert second.seq_lens.tolist() == [4, 3]
    assert second.extend_prefix_lens is not None
    assert second.extend_prefix_lens.tolist() == [3, 2]
    assert requests[0].token_ids == [1, 2, 3, 6]


def test_draft_decode_batches_keep_prefix_lengths_and_step_slots() -> None:
    stack = build_stack(device=torch.device("cpu"), page_size=4)
    requests = stack.new_requests(2)
    stack.extend_batch(requests, [[1, 2], [3, 4, 5]])
    batches = stack.draft_decode_batches(requests, [[7, 8], [9, 10]], num_steps=2)
    assert [b.input_ids.tolist() for b in batches] == [[7, 9], [8, 10]]
    assert [b.seq_lens.tolist() for b in batches] == [[2, 3], [2, 3]]
    assert [b.positions.tolist() for b in batches] == [[2, 3], [3, 4]]
    r2t = stack.req_to_token_pool.req_to_token
    assert batches[1].out_cache_loc.tolist() == [
        int(r2t[requests[0].row, 3]),
        int(r2t[requests[1].row, 4]),
    ]
    assert batches[0].spec_info == DraftDecodeInput(topk=1, num_steps=2)
    assert requests[0].token_ids == [1, 2]  # drafts are speculative, not cached tokens


def test_random_tokens_are_deterministic_per_seed() -> None:
    assert random_tokens([2, 3], vocab_size=10, seed=1) == random_tokens(
        [2, 3], vocab_size=10, seed=1
    )
    assert [len(t) for t in random_tokens([2, 3], vocab_size=10, seed=1)] == [2, 3]
