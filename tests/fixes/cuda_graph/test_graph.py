"""Tests for fixes.cuda_graph: warm-up/capture/replay protocol and phases (CPU path)."""

from __future__ import annotations

import re

import pytest
import torch

from fixes.cuda_graph.graph import WARMUP_RUNS, capture, graph_memory_pool
from prtoggle import detect

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def fresh_clock(fresh_detection_state: None) -> None:
    """Phase "eager", step 0 (with the rest of detection state fresh) for every test."""


def test_capture_runs_two_warmups_then_the_capture_under_named_phases() -> None:
    phases: list[str] = []
    static_in = torch.tensor([1.0, 2.0])

    def forward() -> torch.Tensor:
        phases.append(detect.current_phase())
        return static_in * 2

    graph = capture(forward, device=CPU)
    assert WARMUP_RUNS == 2
    assert phases == ["capture-warmup", "capture-warmup", "capture"]
    assert graph.graph is None and graph.output.tolist() == [2.0, 4.0]
    assert detect.current_phase() == "eager"


def test_replay_recomputes_from_static_inputs_into_the_same_output_tensor() -> None:
    static_in = torch.tensor([1.0, 2.0])
    graph = capture(lambda: (static_in * 3, {"sum": static_in.sum()}), device=CPU)
    captured_tensor = graph.output[0]
    static_in.copy_(torch.tensor([5.0, 7.0]))
    out = graph.replay()
    assert out[0] is captured_tensor
    assert out[0].tolist() == [15.0, 21.0] and out[1]["sum"].item() == 12.0


def test_replay_with_a_different_output_structure_is_refused() -> None:
    calls = {"n": 0}

    def forward() -> tuple[torch.Tensor, ...]:
        calls["n"] += 1
        return (torch.ones(1),) if calls["n"] <= 3 else (torch.ones(1), torch.ones(1))

    graph = capture(forward, device=CPU)
    with pytest.raises(
        TypeError, match=re.escape("replay output does not have the captured structure")
    ):
        graph.replay()


def test_cpu_has_no_graph_memory_pool() -> None:
    assert graph_memory_pool(CPU) is None


@pytest.mark.gpu
def test_cuda_capture_replays_a_real_graph_with_new_inputs() -> None:
    device = torch.device("cuda")
    static_in = torch.tensor([1.0, 2.0], device=device)
    graph = capture(lambda: static_in * 2, device=device, pool=graph_memory_pool(device))
    assert graph.graph is not None
    static_in.copy_(torch.tensor([3.0, 4.0], device=device))
    assert graph.replay().tolist() == [6.0, 8.0]
