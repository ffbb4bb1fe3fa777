"""Tests for the toy attention model: deterministic weights, dense reference is causal."""

from __future__ import annotations

import math

import torch

from fixes.model.toy_attention_model import ToyAttentionModel, ToyModelConfig

CPU = torch.device("cpu")


def test_same_seed_gives_same_weights_and_other_seed_differs() -> None:
    first = ToyAttentionModel(ToyModelConfig(seed=3), device=CPU)
    again = ToyAttentionModel(ToyModelConfig(seed=3), device=CPU)
    other = ToyAttentionModel(ToyModelConfig(seed=4), device=CPU)
    assert torch.equal(first.layers[1].wo, again.layers[1].wo)
    assert not torch.equal(first.layers[1].wo, other.layers[1].wo)


def test_reference_is_causal_a_later_token_never_changes_earlier_rows() -> None:
    model = ToyAttentionModel(ToyModelConfig(), device=CPU)
    short = model.reference(torch.tensor([5, 6, 7]))
    longer = model.reference(torch.tensor([5, 6, 7, 8]))
    assert short.shape == (3, model.config.hidden_size)
    torch.testing.assert_close(longer[:3], short, atol=1e-5, rtol=0)
    assert not torch.allclose(longer[3], short[2])


def test_attention_layers_describe_the_configured_heads() -> None:
    config = ToyModelConfig(num_layers=3, num_q_heads=4, num_kv_heads=2, head_dim=8)
    model = ToyAttentionModel(config, device=CPU)
    assert [layer.layer_id for layer in model.attention_layers] == [0, 1, 2]
    layer = model.attention_layers[0]
    assert (layer.num_q_heads, layer.num_kv_heads, layer.head_dim) == (4, 2, 8)
    assert layer.scaling == 1.0 / math.sqrt(8)
