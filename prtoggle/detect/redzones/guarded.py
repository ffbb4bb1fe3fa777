"""detect.guarded_allocations(): a redzone after every tensor a torch op allocates (ASan-like).

    with detect.guarded_allocations():
        run_the_engine()      # a kernel writing past the end of any tensor torch made here
    detect.check()            # RedzoneViolation: "redzone of buffer aten.zeros_like.default
                              #   in fixes.attention...forward_extend: 1536 bytes overwritten"

A torch dispatch mode moves every tensor an op returns in new memory (not a view of, or the
same memory as, one of its inputs) into an allocation with a redzone after it
(buffers.guarded_copy(): data, shape, strides kept), named by the op and the innermost
Python function outside torch that called it (the ops of prtoggle's own probes are left
alone). Kernels that read or write
through raw pointers (Triton, CUDA, or CPU stand-ins that access past a tensor's end within
its allocation, as a GPU kernel does) then write into the redzone instead of a neighbour;
check() compares every redzone, freed copies' last comparison included. Reads past the end
read the canary and change nothing: code that addresses memory itself can report them with
detect.check_read() (a load check); GPU kernels' loads are not seen.

The mode is process-global while active (torch dispatch modes are per thread: threads
started inside the block are not guarded). Every op output is copied once: a debugging mode
for eager CPU (and CUDA) runs, not for timing. Inside a CUDA graph capture nothing is guarded
(the graph's pool reuses the memory of its temporaries, which a redzone would report as
overwritten): a capture in the block runs as without it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prtoggle.detect.probes import witness
from prtoggle.detect.redzones import buffers

if TYPE_CHECKING:
    import torch

_LIBRARY_PREFIXES = ("torch", "contextlib", "functools", "typing")


@contextlib.contextmanager
def guarded_allocations(*, redzone_bytes: int = buffers.DEFAULT_REDZONE_BYTES) -> Iterator[None]:
    """Within the block, every new tensor a torch op returns gets a redzone of
    `redzone_bytes` after its storage (checked by check())."""
    with _GuardingMode.create(redzone_bytes):
        yield


def allocation_site(op: object) -> str | None:
    """`OP in module.function` for the innermost caller outside torch (and this module);
    None when that caller is prtoggle itself (the probes' own temporaries)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back  # type: ignore[assignment]
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        package = module.split(".", maxsplit=1)[0]
        if package == "prtoggle":
            return None
        if package not in _LIBRARY_PREFIXES:
            return f"{op} in {module}.{frame.f_code.co_qualname}"
        frame = frame.f_back  # type: ignore[assignment]
    return str(op)


class _GuardingMode:
    """Factory for the dispatch mode (torch is imported only when the mode is entered)."""

    @staticmethod
    def create(redzone_bytes: int) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten, tree_map

        class GuardingMode(TorchDispatchMode):
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                result = func(*args, **kwargs)
                site = allocation_site(func)
                if site is None or witness.is_capturing():  # the graph pool reuses memory
                    return result
                inputs = {
                    _address(value)
                    for value in tree_flatten((args, kwargs))[0]
                    if _is_plain_tensor(value)
                }

                def guard(value: Any) -> Any:
                    if not _is_plain_tensor(value) or _address(value) in inputs:
                        return value
                    if value.untyped_storage().nbytes() == 0:
                        return value
                    return buffers.guarded_copy(value, name=site, redzone_bytes=redzone_bytes)

                return tree_map(guard, result)

        return GuardingMode()


def _is_plain_tensor(value: object) -> bool:
    """A strided tensor with real memory (not meta, sparse or a tensor subclass)."""
    import torch

    return (
        type(value) is torch.Tensor
        and value.layout == torch.strided
        and value.device.type != "meta"
    )


def _address(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage().data_ptr())
