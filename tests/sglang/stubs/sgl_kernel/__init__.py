"""Import-time stand-in for sgl_kernel (sglang's CUDA kernels), used by prtoggle's sglang suite.

`sglang.srt.layers.attention.flashattention_backend` (the target of sglang's recipe for
PR 27360) binds `from sgl_kernel import merge_state_v2` at import. The real package is a
CUDA binary that cannot load on this CPU-only machine. The suite never runs those kernels:
this stand-in gives the names, and calling any of them raises.
"""

from __future__ import annotations

from typing import Any, NoReturn

IS_PRTOGGLE_STUB = True


def unavailable(name: str) -> NoReturn:
    """Raise: the stand-in has no behaviour, only names for sglang's imports."""
    raise RuntimeError(
        f"sgl_kernel.{name} was called, but this is prtoggle's sglang-suite stand-in "
        "(tests/sglang/stubs/sgl_kernel); the real CUDA kernels cannot load here"
    )


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(name)

    return _stand_in
