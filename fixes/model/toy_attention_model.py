"""A few attention layers with deterministic weights, run paged (any backend) or densely."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fixes.attention.base import AttentionBackend, AttentionLayer
from fixes.forward_batch import ForwardBatch

__all__ = ["ToyAttentionModel", "ToyModelConfig"]


@dataclass(frozen=True)
class ToyModelConfig:
    """Sizes of the toy model; no positional encoding (attention order comes from causality)."""

    num_layers: int = 2
    num_q_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    vocab_size: int = 97
    seed: int = 0

    @property
    def hidden_size(self) -> int:
        return self.num_q_heads * self.head_dim


@dataclass
class _LayerWeights:
    wq: torch.Tensor  # [hidden, Hq*D]
    wk: torch.Tensor  # [hidden, Hkv*D]
    wv: torch.Tensor  # [hidden, Hkv*D]
    wo: torch.Tensor  # [Hq*D, hidden]


class ToyAttentionModel:
    """Embedding, then `num_layers` residual attention layers writing K/V into the pool."""

    def __init__(
        self, config: ToyModelConfig, *, device: torch.device, dtype: torch.dtype = torch.float32
    ) -> None:
        self.config = config
        self.device = device
        self.dtype = dtype
        generator = torch.Generator().manual_seed(config.seed)
        hidden, kv_width = config.hidden_size, config.num_kv_heads * config.head_dim

        def weight(rows: int, cols: int) -> torch.Tensor:
            w = torch.randn(rows, cols, generator=generator) / math.sqrt(rows)
            return w.to(device=device, dtype=dtype)

        self.embedding = weight(config.vocab_size, hidden) * math.sqrt(config.vocab_size)
        self.layers = [
            _LayerWeights(
                wq=weight(hidden, hidden),
                wk=weight(hidden, kv_width),
                wv=weight(hidden, kv_width),
                wo=weight(hidden, hidden),
            )
            for _ in range(config.num_layers)
        ]
        self.attention_layers = [
            AttentionLayer(
                layer_id=i,
                num_q_heads=config.num_q_heads,
                num_kv_heads=config.num_kv_heads,
                head_dim=config.head_dim,
                scaling=1.0 / math.sqrt(config.head_dim),
            )
            for i in range(config.num_layers)
        ]

    def forward(self, forward_batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        """Hidden states `[num_tokens, hidden]` of the batch's new tokens, through `backend`."""
        hidden = self.embedding[forward_batch.input_ids.long()]
        for weights, layer in zip(self.layers, self.attention_layers, strict=True):
            q, k, v = hidden @ weights.wq, hidden @ weights.wk, hidden @ weights.wv
            attn = backend.forward(q, k, v, layer, forward_batch)
            hidden = hidden + attn @ weights.wo
        return hidden

    def reference(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Dense causal forward over one request's whole sequence: `[len, hidden]`."""
        cfg = self.config
        hidden = self.embedding[token_ids.long()]
        n = int(token_ids.shape[0])
        causal = torch.ones(n, n, dtype=torch.bool, device=self.device).tril()
        group = cfg.num_q_heads // cfg.num_kv_heads
        for weights, layer in zip(self.layers, self.attention_layers, strict=True):
            q = (hidden @ weights.wq).view(n, cfg.num_q_heads, cfg.head_dim).float()
            k = (hidden @ weights.wk).view(n, cfg.num_kv_heads, cfg.head_dim).float()
            v = (hidden @ weights.wv).view(n, cfg.num_kv_heads, cfg.head_dim).float()
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * layer.scaling
            weights_qk = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            attn = torch.einsum("hqk,khd->qhd", weights_qk, v).reshape(n, -1).to(self.dtype)
            hidden = hidden + attn @ weights.wo
        return hidden
