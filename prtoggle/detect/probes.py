"""The env-gated, sync-free device probes: maybe_detect_nan / maybe_detect_inf / maybe_detect_oob.

With its variable off a probe reads one environment entry and returns: no import, no launch.
On, it validates its arguments on the host (metadata only, never tensor values), then runs one
provider over the flat (row-major) view of the tensor into the witness row of its site:
"triton" (default on CUDA: one fused kernel) or "torch" (default elsewhere: device-side torch
ops). Neither reads a value back to the host, so probes are legal inside CUDA graph capture
once the device's table exists (see prepare_device()).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from prtoggle.detect import clock, config, witness
from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch

PROVIDERS = ("torch", "triton")


def maybe_detect_nan(t: torch.Tensor | None, site: str, *, provider: str | None = None) -> None:
    """Record NaNs in float tensor `t` under `site` (SGLANG_SPEC_NAN_DETECTION=1)."""
    if not config.nan_detection_enabled():
        return
    flat = _float_input(t, site, kind="nan")
    if flat is not None:
        row, when = _row_and_when("nan", site, flat.device)
        _provider(provider, flat.device).record_nan(row, when, flat)


def maybe_detect_inf(t: torch.Tensor | None, site: str, *, provider: str | None = None) -> None:
    """Record +/-inf in float tensor `t` under `site` (SGLANG_SPEC_NAN_DETECTION=1)."""
    if not config.nan_detection_enabled():
        return
    flat = _float_input(t, site, kind="inf")
    if flat is not None:
        row, when = _row_and_when("inf", site, flat.device)
        _provider(provider, flat.device).record_inf(row, when, flat)


def maybe_detect_oob(
    indices: torch.Tensor | None,
    low: int | torch.Tensor,
    high: int | torch.Tensor,
    site: str,
    *,
    provider: str | None = None,
) -> None:
    """Record values of `indices` outside [low, high) under `site` (SGLANG_SPEC_OOB_DETECTION=1).

    `low` and `high` are Python ints or 1-element integer tensors on `indices`' device (e.g. a
    per-step bound held in a device buffer, read when the probe runs or replays).
    """
    if not config.oob_detection_enabled() or indices is None:
        return
    import torch

    _require_tensor(indices, site, argument="indices")
    if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
        raise DetectUsageError(
            f"maybe_detect_oob({site!r}): indices must be an integer tensor, got {indices.dtype}"
        )
    low_bound = _bound(low, indices, site, name="low")
    high_bound = _bound(high, indices, site, name="high")
    if indices.numel() == 0:
        return
    row, when = _row_and_when("oob", site, indices.device)
    flat = _flat(indices)
    _provider(provider, indices.device).record_oob(row, when, flat, low_bound, high_bound)


def prepare_device(device: str | torch.device) -> None:
    """Allocate `device`'s witness table now (outside capture), so that probes first seen
    during CUDA graph capture need no allocation."""
    import torch

    witness.default_registry().table_for(torch.device(device), when=clock.current_when())


def _float_input(t: torch.Tensor | None, site: str, *, kind: str) -> torch.Tensor | None:
    """The flat view of `t` to probe, or None when there is nothing a NaN/Inf can be in."""
    if t is None:
        return None
    _require_tensor(t, site, argument="t")
    if t.is_complex():
        raise DetectUsageError(
            f"maybe_detect_{kind}({site!r}): complex tensors are not supported, got {t.dtype}; "
            f"probe torch.view_as_real(t) instead"
        )
    if not t.is_floating_point() or t.numel() == 0:
        return None  # integers and booleans hold no NaN or Inf
    return _flat(t)


def _require_tensor(value: Any, site: str, *, argument: str) -> None:
    """Raise unless `value` is a torch.Tensor."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise DetectUsageError(
            f"probe {site!r}: {argument} must be a torch.Tensor or None, got {type(value).__name__}"
        )


def _bound(
    value: int | torch.Tensor, indices: torch.Tensor, site: str, *, name: str
) -> int | torch.Tensor:
    """Validate a range bound: a Python int in int64 range, or a 1-element int device tensor."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_floating_point() or value.dtype == torch.bool:
            raise DetectUsageError(
                f"maybe_detect_oob({site!r}): {name} tensor must hold exactly one integer, "
                f"got shape {tuple(value.shape)} dtype {value.dtype}"
            )
        if value.device != indices.device:
            raise DetectUsageError(
                f"maybe_detect_oob({site!r}): {name} is on {value.device} but indices are on "
                f"{indices.device}; keep the bound on the same device"
            )
        return value.reshape(())
    if isinstance(value, bool) or not isinstance(value, int):
        raise DetectUsageError(
            f"maybe_detect_oob({site!r}): {name} must be an int or a 1-element integer "
            f"tensor, got {type(value).__name__}"
        )
    if not witness.INT64_MIN <= value <= witness.INT64_MAX:
        raise DetectUsageError(f"maybe_detect_oob({site!r}): {name}={value} is outside int64")
    return value


def _row_and_when(kind: str, site: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The witness row of (kind, site) on `device` and that device's `when` scalar."""
    registry = witness.default_registry()
    slot = registry.slot_for(kind, site)
    table = registry.table_for(device, when=clock.current_when())
    clock.sync_device_clock()
    return table.rows[slot], table.when


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A 1-D row-major contiguous view (or copy, for non-contiguous input) of `t`."""
    return t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)


def _provider(provider: str | None, device: torch.device) -> ModuleType:
    """The provider module: `provider` if given, else Triton on CUDA and torch elsewhere."""
    name = provider if provider is not None else ("triton" if device.type == "cuda" else "torch")
    if name not in PROVIDERS:
        raise DetectUsageError(
            f"unknown probe provider {name!r}: expected one of {', '.join(PROVIDERS)}"
        )
    if name == "torch":
        from prtoggle.detect import torch_probes

        return torch_probes
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise DetectUsageError(
            f"probe provider 'triton' needs a CUDA tensor or TRITON_INTERPRET=1 "
            f"(set before triton is imported); got a tensor on {device}"
        )
    from prtoggle.detect import triton_probes

    return triton_probes
