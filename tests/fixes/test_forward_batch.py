"""Tests for fixes.forward_batch: mode predicates and spec-input helpers."""

from __future__ import annotations

import torch

from fixes.forward_batch import DraftExtendInput, ForwardMode
from fixes.model.toy_requests import build_stack


def test_mode_predicates_split_decode_extend_and_graph_modes() -> None:
    extend_like = {m for m in ForwardMode if m.is_extend()}
    assert extend_like == {
        ForwardMode.EXTEND,
        ForwardMode.TARGET_VERIFY,
        ForwardMode.DRAFT_EXTEND_V2,
    }
    assert {m for m in ForwardMode if m.is_decode_or_idle()} == {
        ForwardMode.DECODE,
        ForwardMode.IDLE,
    }
    assert {m for m in ForwardMode if m.is_cuda_graph()} == set(ForwardMode) - {ForwardMode.EXTEND}
    assert ForwardMode.TARGET_VERIFY.is_target_verify()
    assert not ForwardMode.TARGET_VERIFY.is_draft_extend_v2()
    assert ForwardMode.DRAFT_EXTEND_V2.is_draft_extend_v2()


def test_max_accept_length_comes_from_the_host_copy() -> None:
    spec = DraftExtendInput(
        accept_lengths=torch.tensor([1, 3, 2], dtype=torch.int32), accept_lengths_cpu=[1, 3, 2]
    )
    assert spec.max_accept_length == 3
    empty = DraftExtendInput(
        accept_lengths=torch.zeros(0, dtype=torch.int32), accept_lengths_cpu=[]
    )
    assert empty.max_accept_length == 0


def test_batch_properties_read_host_lengths_and_token_count() -> None:
    stack = build_stack(device=torch.device("cpu"))
    batch = stack.extend_batch(stack.new_requests(2), [[1, 2, 3], [4]])
    assert (batch.seq_lens_sum, batch.num_tokens, batch.device) == (4, 4, torch.device("cpu"))
