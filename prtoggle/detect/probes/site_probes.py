"""The env-gated, sync-free device probes: maybe_detect_nan / maybe_detect_inf / maybe_detect_oob.

Names and signatures are sglang's (`maybe_detect_nan(tensor, msg="")`,
`maybe_detect_oob(indices, low, high, msg)`): `msg` is the site name the witness table keys
on; an empty one names the caller (`module:line`). With its variables off a probe reads
its switches (config.py) and returns: no import, no launch. On, it validates its arguments
on the host (metadata only, never tensor values), then runs one provider over the flat
(row-major) view of the tensor into the witness row of its site: "triton" (default on CUDA:
one fused kernel) or "torch" (default elsewhere: device-side torch ops). Neither reads a
value back to the host, so probes are legal inside CUDA graph capture once the device's
table exists (see prepare_device()). record_float_tensors() probes several tensors with one
launch (detect.instrument() uses it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from prtoggle.detect import config
from prtoggle.detect.probes import clock, witness
from prtoggle.detect.probes.witness import ProbeItem
from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch

PROVIDERS = ("torch", "triton")
MAX_GROUP = 16
"""The most tensors one record_float_tensors() launch covers (more: several launches)."""


def maybe_detect_nan(
    tensor: torch.Tensor | None, msg: str = "", *, provider: str | None = None
) -> None:
    """Record NaNs in a float tensor under site `msg` (SGLANG_SPEC_NAN_DETECTION=1 or an
    sglang alias, see config.py); an empty `msg` names the caller."""
    if config.nan_detection_enabled() and config.hand_probes_enabled():
        _detect_float("nan", tensor, msg or _caller_site(), provider)


def maybe_detect_inf(
    tensor: torch.Tensor | None, msg: str = "", *, provider: str | None = None
) -> None:
    """Record +/-inf in a float tensor under site `msg` (SGLANG_SPEC_NAN_DETECTION=1 or
    SGLANG_ENABLE_ASYNC_ASSERT / SGLANG_INVARIANT_CHECK, see config.py)."""
    if config.inf_detection_enabled() and config.hand_probes_enabled():
        _detect_float("inf", tensor, msg or _caller_site(), provider)


def maybe_detect_oob(
    indices: torch.Tensor | None,
    low: int | torch.Tensor,
    high: int | torch.Tensor,
    msg: str,
    *,
    provider: str | None = None,
) -> None:
    """Record values of `indices` outside [low, high) under site `msg`
    (SGLANG_SPEC_OOB_DETECTION=1 or an sglang alias, see config.py).

    `low` and `high` are Python ints or 1-element integer tensors on `indices`' device (e.g. a
    per-step bound held in a device buffer, read when the probe runs or replays).
    """
    if not config.oob_detection_enabled() or indices is None or not config.hand_probes_enabled():
        return
    import torch

    site = msg or _caller_site()
    _require_tensor(indices, site, argument="indices")
    if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
        raise DetectUsageError(
            f"maybe_detect_oob({site!r}): indices must be an integer tensor, got {indices.dtype}"
        )
    low_bound = _bound(low, indices, site, name="low")
    high_bound = _bound(high, indices, site, name="high")
    if indices.numel() == 0:
        return
    table = _table(indices.device)
    item = _item("oob", site, indices)
    _provider(provider, indices.device).record_oob(table, item, low_bound, high_bound)


def record_float_tensors(
    named: Sequence[tuple[str, torch.Tensor]], *, kind: str = "nan", provider: str | None = None
) -> None:
    """Probe every (site, float tensor) for `kind` ("nan" or "inf"), MAX_GROUP tensors per
    launch, first hits ordered as listed; not gated by the environment (the caller is)."""
    if kind not in ("nan", "inf"):
        raise DetectUsageError(f"record_float_tensors(): kind must be 'nan' or 'inf', got {kind!r}")
    by_device: dict[str, list[ProbeItem]] = {}
    for site, tensor in named:
        flat = _float_input(tensor, site, kind=kind)
        if flat is not None:
            by_device.setdefault(str(flat.device), []).append(_item(kind, site, tensor, flat))
    for items in by_device.values():
        device = items[0].flat.device
        table, chosen = _table(device), _provider(provider, device)
        for start in range(0, len(items), MAX_GROUP):
            group = items[start : start + MAX_GROUP]
            chosen.record_float(table, group, check_inf=kind == "inf")


def prepare_device(device: str | torch.device) -> None:
    """Allocate `device`'s witness table now (outside capture), so that probes first seen
    during CUDA graph capture need no allocation."""
    import torch

    witness.witness_tables().table_for(torch.device(device), when=clock.current_when())


def _detect_float(kind: str, tensor: torch.Tensor | None, site: str, provider: str | None) -> None:
    """Validate and probe one float tensor (nothing to do for None, empty or integer ones)."""
    flat = _float_input(tensor, site, kind=kind)
    if flat is not None and tensor is not None:
        table = _table(flat.device)
        _provider(provider, flat.device).record_float(
            table, [_item(kind, site, tensor, flat)], check_inf=kind == "inf"
        )


def _float_input(t: torch.Tensor | None, site: str, *, kind: str) -> torch.Tensor | None:
    """The flat view of `t` to probe, or None when there is nothing a NaN/Inf can be in."""
    if t is None:
        return None
    _require_tensor(t, site, argument="tensor")
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


def _table(device: torch.device) -> witness.DeviceTable:
    """`device`'s witness table, its `when` scalar up to date."""
    table = witness.witness_tables().table_for(device, when=clock.current_when())
    clock.sync_device_clock()
    return table


def _item(
    kind: str, site: str, tensor: torch.Tensor, flat: torch.Tensor | None = None
) -> ProbeItem:
    """The probe item of `tensor` under (kind, site): flat view, row, elements per dim-0 row."""
    flat = _flat(tensor) if flat is None else flat
    rows = tensor.shape[0] if tensor.dim() > 0 else 1
    width = flat.numel() // rows if rows > 0 else 0
    return ProbeItem(flat=flat, slot=witness.witness_tables().slot_for(kind, site), row_width=width)


def _caller_site() -> str:
    """`module:line` of the code that called the public probe (the site of an empty msg)."""
    frame = sys._getframe(2)
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_lineno}"


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
        from prtoggle.detect.probes import torch_provider

        return torch_provider
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise DetectUsageError(
            f"probe provider 'triton' needs a CUDA tensor or TRITON_INTERPRET=1 "
            f"(set before triton is imported); got a tensor on {device}"
        )
    from prtoggle.detect.probes import triton_provider

    return triton_provider
