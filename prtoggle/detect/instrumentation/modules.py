"""detect.instrument(): NaN (and optionally Inf) probes on the outputs of every submodule.

    with detect.instrument(model, name="model"):
        model(batch)
    detect.check()   # NaNDetected: "... first-hit order: nan at model.layers.2.mlp: ..."

Every submodule's output tensors (also nested in tuples, lists and dicts) are probed under
the submodule's path, `model.layers.2.mlp`, nested ones as `model.layers.2[0]` or
`model.out[logits]`. Hooks fire after a submodule returns, inner modules before outer, so
the first writer of a NaN is the first site in first-hit order. While detection is off
(config.nan_detection_enabled()), a hook reads the switches and returns: no launch.

Fused (the default): outputs are collected and probed together, one launch per group of at
most MAX_GROUP tensors, when a layer (a child of an nn.ModuleList or nn.Sequential) or the
outermost instrumented call returns; first hits keep the collection order. A tensor that is
changed in place after its module returned but before its group is probed is seen as it is
then: use fuse=False (one launch per submodule output, probed as it returns) where exact
attribution of in-place writers matters. Both are sync-free and legal inside CUDA graph
capture once the device's table exists (detect.prepare_device(), or warm-up runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prtoggle.detect import config
from prtoggle.detect.probes import site_probes
from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle


@dataclass
class _Collector:
    """Outputs waiting for their group launch, and how deep the hooks are in nested calls."""

    check_inf: bool
    fuse: bool
    provider: str | None
    pending: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    depth: int = 0


@dataclass
class Instrumentation:
    """The hooks instrument() placed: a context manager; remove() takes every hook off."""

    name: str
    sites: tuple[str, ...]
    hooks: list[RemovableHandle]
    collector: _Collector

    def remove(self) -> None:
        """Remove every hook and drop pending outputs (idempotent)."""
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()
        self.collector.pending.clear()

    def flush(self) -> None:
        """Probe the outputs collected so far now (fused mode probes them at layer ends)."""
        _flush(self.collector)

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def instrument(
    module: torch.nn.Module,
    *,
    name: str = "model",
    check_inf: bool = False,
    fuse: bool = True,
    provider: str | None = None,
) -> Instrumentation:
    """Probe the outputs of `module` and every submodule, named by path under `name`."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise DetectUsageError(
            f"instrument(): expected a torch.nn.Module, got {type(module).__name__}"
        )
    if not isinstance(name, str) or not name.strip():
        raise DetectUsageError(f"instrument(): name must be a non-empty string, got {name!r}")
    collector = _Collector(check_inf=check_inf, fuse=fuse, provider=provider)
    layers = _layer_paths(module)
    hooks: list[RemovableHandle] = []
    sites = []
    for path, submodule in module.named_modules():
        site = f"{name}.{path}" if path else name
        sites.append(site)
        hooks.append(submodule.register_forward_pre_hook(_enter_hook(collector)))
        hook = _exit_hook(collector, site, ends_group=not path or path in layers)
        hooks.append(submodule.register_forward_hook(hook, always_call=True))
    return Instrumentation(name=name, sites=tuple(sites), hooks=hooks, collector=collector)


def named_tensors(site: str, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(site, tensor) for every float tensor in `value`, nested ones named `site[i]` or
    `site[key]`."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.numel() > 0:
            yield site, value
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            yield from named_tensors(f"{site}[{index}]", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from named_tensors(f"{site}[{key}]", item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from named_tensors(f"{site}.{item.name}", getattr(value, item.name, None))


def _enter_hook(collector: _Collector) -> Any:
    """A forward pre-hook that counts the nesting depth (no environment read)."""

    def enter(module: torch.nn.Module, args: Any) -> None:
        collector.depth += 1

    return enter


def _exit_hook(collector: _Collector, site: str, *, ends_group: bool) -> Any:
    """A forward hook probing (or collecting) the module's output tensors under `site`."""

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        collector.depth -= 1
        if not config.nan_detection_enabled():
            if collector.depth <= 0:
                collector.pending.clear()
            return
        collector.pending.extend(named_tensors(site, output))
        full = len(collector.pending) >= site_probes.MAX_GROUP
        if not collector.fuse or ends_group or full or collector.depth <= 0:
            _flush(collector)

    return leave


def _flush(collector: _Collector) -> None:
    """Probe the pending outputs (one launch per MAX_GROUP tensors and kind), then drop them."""
    named, collector.pending = collector.pending, []
    if not named:
        return
    site_probes.record_float_tensors(named, kind="nan", provider=collector.provider)
    if collector.check_inf:
        site_probes.record_float_tensors(named, kind="inf", provider=collector.provider)


def _layer_paths(module: torch.nn.Module) -> set[str]:
    """Paths of the modules held by an nn.ModuleList or nn.Sequential: the model's layers."""
    import torch

    layers: set[str] = set()
    for path, submodule in module.named_modules():
        if isinstance(submodule, torch.nn.ModuleList | torch.nn.Sequential):
            layers.update(
                f"{path}.{child}" if path else child for child, _ in submodule.named_children()
            )
    return layers
