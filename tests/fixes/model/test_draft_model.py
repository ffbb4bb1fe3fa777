"""The tiny draft model: seeded weights, per-token output, and the window shift between steps."""

from __future__ import annotations

import torch

from fixes.model.draft_model import (
    TinyDraftModel,
    draft_models,
    next_step_input_ids,
    reference_draft_extend,
)

CPU = torch.device("cpu")


def test_same_seed_gives_identical_weights_and_outputs() -> None:
    first = TinyDraftModel(hidden_size=8, vocab_size=16, seed=4, device=CPU)
    second = TinyDraftModel(hidden_size=8, vocab_size=16, seed=4, device=CPU)
    ids, hidden = torch.tensor([1, 5, 9]), torch.randn(3, 8)
    assert torch.equal(first.forward(ids, hidden).logits, second.forward(ids, hidden).logits)


def test_each_step_gets_its_own_layer() -> None:
    models = draft_models(num_steps=3, hidden_size=8, vocab_size=16, seed=0, device=CPU)
    assert [model.seed for model in models] == [0, 1, 2]
    assert not torch.equal(models[0].hidden_weight, models[1].hidden_weight)


def test_output_of_a_token_depends_only_on_that_token() -> None:
    model = TinyDraftModel(hidden_size=8, vocab_size=16, seed=1, device=CPU)
    ids, hidden = torch.tensor([3, 4]), torch.randn(2, 8)
    both = model.forward(ids, hidden).hidden_states
    alone = model.forward(ids[1:], hidden[1:]).hidden_states
    torch.testing.assert_close(both[1:], alone)


def test_next_step_input_ids_shift_each_window_and_append_its_new_token() -> None:
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    shifted = next_step_input_ids(ids, tokens_per_req=3, new_tokens=torch.tensor([7, 8]))
    assert shifted.tolist() == [2, 3, 7, 5, 6, 8]


def test_reference_chains_hidden_states_and_ids_from_step_to_step() -> None:
    models = draft_models(num_steps=2, hidden_size=8, vocab_size=16, seed=0, device=CPU)
    ids, hidden = torch.tensor([1, 2, 3, 4]), torch.randn(4, 8)
    select = torch.tensor([1, 3])
    outputs = reference_draft_extend(
        models, input_ids=ids, hidden_states=hidden, select_index=select, tokens_per_req=2
    )
    new_tokens = outputs[0].logits[select].argmax(-1)
    second_ids = next_step_input_ids(ids, tokens_per_req=2, new_tokens=new_tokens)
    expected = models[1].forward(second_ids, outputs[0].hidden_states)
    assert torch.equal(outputs[1].hidden_states, expected.hidden_states)
