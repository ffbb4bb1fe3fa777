"""poisoned_allocations(): a region's torch.zeros/ones/full/empty buffers get redzones.

For engine code you cannot edit (a real sglang backend allocating its CUDA graph buffers
with `torch.zeros(..., device="cuda")`), the redzone of poisoned_buffer() can still be had:

    with detect.poisoned_allocations("mla_draft.init_cuda_graph_state") as routing:
        backend.init_cuda_graph_state(max_bs, max_num_tokens)
    routing.allocations  # [RoutedAllocation("mla_draft.init_cuda_graph_state[0]", ...)]
    ...                  # run the kernels that write the buffers
    detect.check()       # RedzoneViolation naming "mla_draft.init_cuda_graph_state[0]"

With SGLANG_DEBUG_POISON set, every `torch.zeros`, `torch.ones`, `torch.full` and
`torch.empty` called inside the block (on any device, through a TorchFunctionMode) is
allocated as a guarded buffer: the values the call asks for (zeros, ones, the fill value;
`empty` gets the poison value of poisoned_buffer(), as its contents are undefined anyway),
followed by a redzone that check() compares byte by byte. Buffers are named
`PREFIX[k]`, k counting the routed allocations of the block. A call this cannot reproduce
exactly (`out=`, `requires_grad=`, `layout=`, `pin_memory=`, `memory_format=`, a bool
`empty`) is left to torch and listed in `routing.passed_through`. Without
SGLANG_DEBUG_POISON the block changes nothing. Redzones stay registered while each buffer
lives (process-global, like every redzone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prtoggle.detect import config
from prtoggle.detect.redzones import buffers

if TYPE_CHECKING:
    import torch

ROUTED_FACTORIES = ("zeros", "ones", "full", "empty")
_ROUTED_KEYWORDS = frozenset({"size", "fill_value", "dtype", "device"})

TorchCall = Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
"""What handles a torch function call: `handle(func, args, kwargs)` returns its result."""


@dataclass(frozen=True)
class RoutedAllocation:
    """One factory call of the block, allocated as a guarded buffer."""

    name: str
    factory: str  # "zeros" | "ones" | "full" | "empty"
    shape: tuple[int, ...]
    dtype: str  # e.g. "torch.int32"


@dataclass
class AllocationRouting:
    """What one poisoned_allocations() block routed, and what it left to torch."""

    prefix: str
    redzone_bytes: int
    allocations: list[RoutedAllocation] = field(default_factory=list)
    passed_through: list[str] = field(default_factory=list)


@contextmanager
def poisoned_allocations(
    prefix: str, *, redzone_bytes: int = buffers.DEFAULT_REDZONE_BYTES
) -> Iterator[AllocationRouting]:
    """Within the block, allocate torch.zeros/ones/full/empty as guarded buffers named
    `prefix[k]` when SGLANG_DEBUG_POISON is set; otherwise change nothing."""
    buffers.validate_guard_arguments(
        caller="poisoned_allocations", argument="prefix", name=prefix, redzone_bytes=redzone_bytes
    )
    routing = AllocationRouting(prefix, redzone_bytes)
    if not config.poison_enabled():
        yield routing
        return
    with _routing_mode(routing):
        yield routing


def torch_function_mode(handle: TorchCall) -> Any:
    """A TorchFunctionMode handing every torch function called inside it, with a copy of its
    keyword arguments, to `handle(func, args, kwargs)`: the call's result is handle's."""
    from torch.overrides import TorchFunctionMode

    class HandleCalls(TorchFunctionMode):
        def __torch_function__(
            self,
            func: Callable[..., Any],
            types_: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            return handle(func, args, dict(kwargs or {}))

    return HandleCalls()


def _routing_mode(routing: AllocationRouting) -> Any:
    """A TorchFunctionMode sending the routed factory calls to `_allocate`."""
    import torch

    factories = {getattr(torch, name): name for name in ROUTED_FACTORIES}

    def route(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        factory = factories.get(func)
        routed = None if factory is None else _allocate(routing, factory, args, kwargs)
        return func(*args, **kwargs) if routed is None else routed

    return torch_function_mode(route)


def _allocate(
    routing: AllocationRouting, factory: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> torch.Tensor | None:
    """The guarded buffer for one factory call, or None (recorded) to leave it to torch."""
    import torch

    extra = sorted(set(kwargs) - _ROUTED_KEYWORDS)
    try:
        shape, fill = _shape_and_fill(factory, args, kwargs)
    except (KeyError, IndexError, TypeError, ValueError):
        return None  # not a valid call: torch raises its own error for it
    dtype = kwargs.get("dtype") or _default_dtype(factory, fill)
    if extra or (factory == "empty" and dtype == torch.bool):
        why = f"keywords {', '.join(extra)}" if extra else "bool empty"
        routing.passed_through.append(f"{factory}{shape} ({why})")
        return None
    if factory == "empty":
        fill = buffers.poison_value(dtype, routing.prefix)
    name = f"{routing.prefix}[{len(routing.allocations)}]"
    buffer = buffers.guarded_buffer(
        shape,
        dtype=dtype,
        device=kwargs.get("device") or torch.get_default_device(),
        name=name,
        fill=fill,
        redzone_bytes=routing.redzone_bytes,
    )
    routing.allocations.append(RoutedAllocation(name, factory, shape, str(dtype)))
    return buffer


def _shape_and_fill(
    factory: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[int, ...], Any]:
    """The requested shape and fill value of a zeros/ones/full/empty call."""
    if factory == "full":
        size = args[0] if args else kwargs["size"]
        return tuple(int(n) for n in size), (args[1] if len(args) > 1 else kwargs["fill_value"])
    if "size" in kwargs:
        size = kwargs["size"]
    elif len(args) == 1 and not isinstance(args[0], int):
        size = args[0]
    else:
        size = args
    return tuple(int(n) for n in size), (1 if factory == "ones" else 0)


def _default_dtype(factory: str, fill: Any) -> torch.dtype:
    """torch's dtype for a call without `dtype=`: inferred from the fill value for full."""
    import torch

    if factory == "full":
        return torch.tensor(fill).dtype
    return torch.get_default_dtype()
