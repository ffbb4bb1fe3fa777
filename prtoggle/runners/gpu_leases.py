"""One GPU per child: which GPUs a parent may hand out, and a lease per running child.

With `--device cuda` and several GPUs, commands that run children in parallel give each
child its own GPU through `CUDA_VISIBLE_DEVICES` (so a child sees exactly one device, as
`cuda:0`). Children beyond the number of GPUs share them, least-loaded first. No torch
at import; counting GPUs imports torch inside the function and does not initialise CUDA
in the parent (children initialise their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

__all__ = ["CUDA_VISIBLE_DEVICES", "GpuLeases", "visible_gpus"]

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def visible_gpus(env: Mapping[str, str], *, count: Callable[[], int] | None = None) -> list[str]:
    """GPU ids this process may hand to children: its own CUDA_VISIBLE_DEVICES entries when
    set (ids or UUIDs, kept as written), else `0 .. count()-1` (default: torch's count)."""
    listed = env.get(CUDA_VISIBLE_DEVICES)
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    return [str(index) for index in range((count or _torch_device_count)())]


class GpuLeases:
    """Leases GPUs to concurrently running children, the least-leased GPU first."""

    def __init__(self, gpus: Sequence[str]) -> None:
        self._leases = dict.fromkeys(gpus, 0)
        self._lock = threading.Lock()

    @contextmanager
    def lease(self) -> Iterator[str]:
        """A GPU id for one child, returned when the block ends."""
        with self._lock:
            gpu = min(self._leases, key=lambda g: self._leases[g])
            self._leases[gpu] += 1
        try:
            yield gpu
        finally:
            with self._lock:
                self._leases[gpu] -= 1


def _torch_device_count() -> int:
    import torch

    return int(torch.cuda.device_count())
