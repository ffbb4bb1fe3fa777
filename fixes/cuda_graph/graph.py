"""CUDA graph capture and replay with sglang's protocol; the same calls run eagerly on CPU."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from prtoggle import detect

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE

logger = logging.getLogger(__name__)

T = TypeVar("T")

WARMUP_RUNS = 2
"""Eager runs before capture, as sglang's runners do (they also allocate lazily-built state)."""


@dataclass
class CapturedGraph(Generic[T]):
    """One captured forward: replay it to recompute `output` from the static inputs.

    On CUDA, `graph` is a real `torch.cuda.CUDAGraph` and `output` the tensors its
    kernels write. On CPU there is no graph: replay re-runs `forward` eagerly and copies
    the result into the same `output` tensors, so callers see the same static-buffer
    semantics on both devices.
    """

    forward: Callable[[], T]
    output: T
    graph: torch.cuda.CUDAGraph | None

    def replay(self) -> T:
        with detect.phase("replay"):
            if self.graph is not None:
                self.graph.replay()
            else:
                _copy_into(self.output, self.forward())
        return self.output


def capture(
    forward: Callable[[], T],
    *,
    device: torch.device,
    pool: _POOL_HANDLE | None = None,
    stream: torch.cuda.Stream | None = None,
) -> CapturedGraph[T]:
    """Warm `forward` up twice eagerly, then capture a third run.

    The caller has already built static input buffers and called its backend's
    `init_forward_metadata_capture_cuda_graph`; `forward` must read only those buffers.
    """
    if device.type == "cuda":
        return _capture_on_cuda(forward, pool=pool, stream=stream)
    with detect.phase("capture-warmup"):
        for _ in range(WARMUP_RUNS):
            forward()
    with detect.phase("capture"):
        output = forward()
    return CapturedGraph(forward=forward, output=output, graph=None)


def graph_memory_pool(device: torch.device) -> _POOL_HANDLE | None:
    """A memory pool shared by the graphs of one runner (None on CPU)."""
    if device.type != "cuda":
        return None
    return torch.cuda.graph_pool_handle()


def _capture_on_cuda(
    forward: Callable[[], T], *, pool: _POOL_HANDLE | None, stream: torch.cuda.Stream | None
) -> CapturedGraph[T]:
    capture_stream = stream or torch.cuda.Stream()
    capture_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture_stream), detect.phase("capture-warmup"):
        for _ in range(WARMUP_RUNS):
            forward()
    torch.cuda.current_stream().wait_stream(capture_stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with detect.phase("capture"), torch.cuda.graph(graph, pool=pool, stream=capture_stream):
        output = forward()
    torch.cuda.synchronize()
    logger.debug("captured a CUDA graph on stream %s", capture_stream)
    return CapturedGraph(forward=forward, output=output, graph=graph)


def _copy_into(static: object, fresh: object) -> None:
    """Copy `fresh` into the static output, tensor by tensor (tuples, lists, dicts)."""
    if isinstance(static, torch.Tensor):
        if not isinstance(fresh, torch.Tensor):
            raise TypeError(f"replay produced {type(fresh).__name__}, capture a tensor")
        static.copy_(fresh)
    elif isinstance(static, tuple | list):
        if not isinstance(fresh, tuple | list) or len(fresh) != len(static):
            raise TypeError("replay output does not have the captured structure")
        for s, f in zip(static, fresh, strict=True):
            _copy_into(s, f)
    elif isinstance(static, dict):
        if not isinstance(fresh, dict) or fresh.keys() != static.keys():
            raise TypeError("replay output does not have the captured keys")
        for key, value in static.items():
            _copy_into(value, fresh[key])
    elif static is not None:
        raise TypeError(f"cannot replay an output of type {type(static).__name__}")
