"""The attention backend interface: every hook is required, `forward` routes by mode."""

from __future__ import annotations

import pytest
import torch

from fixes.attention.base import AttentionBackend, AttentionLayer
from fixes.forward_batch import ForwardBatch, ForwardMode
from fixes.model.toy_requests import build_stack

LAYER = AttentionLayer(layer_id=0, num_q_heads=1, num_kv_heads=1, head_dim=4, scaling=0.5)


class _Recorder(AttentionBackend):
    """Records which forward ran; the metadata hooks do nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        pass

    def init_cuda_graph_state(self, *, max_bs: int) -> None:
        pass

    def init_forward_metadata_capture_cuda_graph(self, **kwargs: object) -> None:
        pass

    def init_forward_metadata_replay_cuda_graph(self, **kwargs: object) -> None:
        pass

    def forward_decode(self, q, k, v, layer, forward_batch, *, save_kv_cache=True):
        self.calls.append(("decode", save_kv_cache))
        return q

    def forward_extend(self, q, k, v, layer, forward_batch, *, save_kv_cache=True):
        self.calls.append(("extend", save_kv_cache))
        return q


def _batch(mode: ForwardMode) -> ForwardBatch:
    stack = build_stack(device=torch.device("cpu"))
    batch = stack.extend_batch(stack.new_requests(1), [[1, 2]])
    batch.forward_mode = mode
    return batch


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (ForwardMode.DECODE, "decode"),
        (ForwardMode.IDLE, "decode"),
        (ForwardMode.EXTEND, "extend"),
        (ForwardMode.TARGET_VERIFY, "extend"),
        (ForwardMode.DRAFT_EXTEND_V2, "extend"),
    ],
)
def test_forward_routes_decode_and_idle_to_forward_decode_and_the_rest_to_extend(
    mode: ForwardMode, expected: str
) -> None:
    backend = _Recorder()
    q = torch.ones(2, 4)
    assert backend.forward(q, q, q, LAYER, _batch(mode), save_kv_cache=False) is q
    assert backend.calls == [(expected, False)]


def test_a_backend_without_every_hook_cannot_be_built() -> None:
    class Partial(AttentionBackend):
        def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
            pass

    with pytest.raises(TypeError, match="abstract method"):
        Partial()
