"""A tiny deterministic draft model (seeded random weights) for the multi-layer EAGLE worker."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class DraftOutput:
    """Per-token output of one draft layer: hidden states and next-token logits."""

    hidden_states: torch.Tensor  # [num_tokens, hidden_size]
    logits: torch.Tensor  # [num_tokens, vocab_size], float32


@dataclass
class TinyDraftModel:
    """`h' = tanh(h W + E[token])`, `logits = h' U`: per token, no attention, same on every device.

    Weights come from a CPU generator seeded with `seed`, so two models with the same
    seed agree bit for bit on CPU and closely on CUDA.
    """

    hidden_size: int
    vocab_size: int
    seed: int
    device: torch.device
    dtype: torch.dtype = torch.float32
    embedding: torch.Tensor = field(init=False)
    hidden_weight: torch.Tensor = field(init=False)
    lm_head: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        generator = torch.Generator().manual_seed(self.seed)
        scale = 1.0 / math.sqrt(self.hidden_size)

        def weights(*shape: int, std: float) -> torch.Tensor:
            values = torch.randn(*shape, generator=generator) * std
            return values.to(device=self.device, dtype=self.dtype)

        self.embedding = weights(self.vocab_size, self.hidden_size, std=0.5)
        self.hidden_weight = weights(self.hidden_size, self.hidden_size, std=scale)
        self.lm_head = weights(self.hidden_size, self.vocab_size, std=scale)

    def forward(self, input_ids: torch.Tensor, hidden_states: torch.Tensor) -> DraftOutput:
        """One draft layer over `[num_tokens]` ids and `[num_tokens, hidden]` input states."""
        mixed = hidden_states.to(self.dtype) @ self.hidden_weight
        out = torch.tanh(mixed + self.embedding[input_ids.long()])
        return DraftOutput(hidden_states=out, logits=(out @ self.lm_head).float())


def draft_models(
    *, num_steps: int, hidden_size: int, vocab_size: int, seed: int, device: torch.device
) -> list[TinyDraftModel]:
    """One model per draft step (multi-layer EAGLE: step `i` runs layer `i`), seeds `seed + i`."""
    return [
        TinyDraftModel(
            hidden_size=hidden_size, vocab_size=vocab_size, seed=seed + step, device=device
        )
        for step in range(num_steps)
    ]


def next_step_input_ids(
    input_ids: torch.Tensor, *, tokens_per_req: int, new_tokens: torch.Tensor
) -> torch.Tensor:
    """Shift each request's window of `tokens_per_req` ids left by one; append its new token."""
    windows = input_ids.view(-1, tokens_per_req)
    shifted = torch.cat([windows[:, 1:], new_tokens.view(-1, 1).to(input_ids.dtype)], dim=1)
    return shifted.reshape(-1)


def reference_draft_extend(
    models: list[TinyDraftModel],
    *,
    input_ids: torch.Tensor,
    hidden_states: torch.Tensor,
    select_index: torch.Tensor,
    tokens_per_req: int,
) -> list[DraftOutput]:
    """Every step's output, computed plainly: the oracle the worker's paths must match."""
    outputs = []
    for model in models:
        output = model.forward(input_ids, hidden_states)
        outputs.append(output)
        new_tokens = output.logits[select_index].argmax(dim=-1)
        input_ids = next_step_input_ids(
            input_ids, tokens_per_req=tokens_per_req, new_tokens=new_tokens
        )
        hidden_states = output.hidden_states
    return outputs
