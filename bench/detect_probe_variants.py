"""Kernel and grouping variants of detect.instrument's probes, side by side (needs a GPU).

The decode step of bench/detect_overhead.py, written as nn.Modules and instrumented (355
outputs per step), CUDA-graph replayed. Each variant captures its own graph with the probe
launch configured differently; rounds interleave the variants. Ratios are to the same step
without probes (``none-module``).

- ``instrument``: the shipped configuration (one launch per layer, BLOCK_SIZE, NUM_WARPS,
  PROGRAMS_PER_SM of prtoggle/detect/probes/triton_provider.py);
- ``layers-N``: one launch per N layers (MAX_GROUP raised to hold them);
- ``warps-W`` / ``block-B`` / ``per-sm-P``: one launch constant changed;
- ``launch-floor``: the same launches (grid, arguments) of a kernel that loads each
  program's first block and does nothing else: what the launches cost by themselves;
- ``old``: with ``--old-kernel PATH``, a previous triton_provider.py (e.g. ``git show
  REV:prtoggle/detect/probes/triton_provider.py > old.py``), its completion counter fed from the
  table's claim locks.

Usage: ``python bench/detect_probe_variants.py [--batch 1 64] [--old-kernel old.py]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detect_overhead import (
    LlamaDecodeStep,
    LlamaModel,
    Shape,
    _graph,
    _time_ms,
)

from prtoggle import detect
from prtoggle.detect.probes import site_probes, triton_provider

instrument_module = importlib.import_module(
    "prtoggle.detect.instrumentation.modules"
)  # not the function


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iters", type=int, default=10, help="replays per round")
    parser.add_argument("--old-kernel", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/detect_probe_variants.py needs a CUDA GPU")
    step = LlamaDecodeStep(Shape(), max_batch=max(args.batch), device=torch.device("cuda"))
    modules = LlamaModel(step)
    old = _load_old_kernel(args.old_kernel) if args.old_kernel else None
    device = torch.cuda.get_device_name()
    print(f"device: {device}  torch {torch.__version__}  triton {triton.__version__}")
    for batch in args.batch:
        runs = _variants(modules, batch, old)
        ms = _measure(runs, rounds=args.rounds, iters=args.iters)
        base = ms["none-module"]
        print(f"batch {batch}: none-module {base:.3f} ms/step")
        for name, value in ms.items():
            extra_us = (value - base) * 1000
            print(f"  {name:16s} {value:8.3f} ms  x{value / base:.4f}  +{extra_us:.1f} us")
    detect.check()  # random weights make no NaN: a report here would be a false positive


def _variants(
    modules: LlamaModel, batch: int, old: ModuleType | None
) -> dict[str, Callable[[], None]]:
    def forward() -> torch.Tensor:
        return modules(batch)

    def probed(**settings: Any) -> Callable[[], None]:
        with _configured(modules, **settings), detect.instrument(modules, name="model"):
            return _graph(forward, nan_env=True)

    runs = {"none-module": _graph(forward, nan_env=False), "instrument": probed()}
    if old is not None:
        runs["old"] = probed(record_float=old.record_float)
    runs["launch-floor"] = probed(record_float=_record_floor)
    runs["layers-2"] = probed(layers_per_launch=2)
    runs["layers-4"] = probed(layers_per_launch=4)
    runs["warps-2"] = probed(NUM_WARPS=2)
    runs["warps-8"] = probed(NUM_WARPS=8)
    runs["block-2048"] = probed(BLOCK_SIZE=2048)
    runs["per-sm-1"] = probed(PROGRAMS_PER_SM=1)
    return runs


@contextlib.contextmanager
def _configured(
    modules: torch.nn.Module,
    *,
    layers_per_launch: int = 1,
    record_float: Callable[..., None] | None = None,
    **constants: int,
) -> Iterator[None]:
    """Set the launch constants, the float provider and the layer grouping while capturing."""
    saved = {name: getattr(triton_provider, name) for name in constants}
    saved_record, saved_group = triton_provider.record_float, site_probes.MAX_GROUP
    saved_layers = instrument_module._layer_paths
    for name, value in constants.items():
        setattr(triton_provider, name, value)
    if record_float is not None:
        triton_provider.record_float = record_float  # type: ignore[assignment]
    if layers_per_launch > 1:
        site_probes.MAX_GROUP = 12 * layers_per_launch
        count = len(modules.layers)  # type: ignore[arg-type]
        ends = {f"layers.{i}" for i in range(count) if (i + 1) % layers_per_launch == 0}
        instrument_module._layer_paths = lambda module: ends | {f"layers.{count - 1}"}  # type: ignore[assignment]
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(triton_provider, name, value)
        triton_provider.record_float = saved_record  # type: ignore[assignment]
        site_probes.MAX_GROUP = saved_group
        instrument_module._layer_paths = saved_layers  # type: ignore[assignment]


def _record_floor(table: Any, items: Any, *, check_inf: bool) -> None:
    """The shipped launch (grid, arguments) of a kernel that only loads first blocks."""
    _floor_kernel[(triton_provider._programs(items),)](
        tuple(item.flat for item in items),
        tuple(item.flat.numel() for item in items),
        COUNT_TENSORS=len(items),
        BLOCK=triton_provider.BLOCK_SIZE,
        num_warps=triton_provider.NUM_WARPS,
    )


@triton.jit(do_not_specialize=["ns"])
def _floor_kernel(xs, ns, COUNT_TENSORS: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    flags = tl.zeros([BLOCK], dtype=tl.int1)
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    for k in tl.static_range(COUNT_TENSORS):
        x = tl.load(xs[k] + offsets, mask=offsets < ns[k], other=0.0)
        flags |= x == 12345.0  # keeps the load; never true for these weights
    if tl.max(flags.to(tl.int32), axis=0) > 0:
        tl.store(xs[0] + offsets, tl.zeros([BLOCK], dtype=tl.float32), mask=offsets < 0)


def _load_old_kernel(path: Path) -> ModuleType:
    """A previous triton_provider.py, its `table.finished` read from `table.claim_locks`."""
    copy = Path("/tmp/old_triton_probes.py")
    copy.write_text(path.read_text().replace("table.finished", "table.claim_locks"))
    spec = importlib.util.spec_from_file_location("old_triton_probes", copy)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_triton_probes"] = module
    spec.loader.exec_module(module)
    return module


def _measure(runs: dict[str, Callable[[], None]], *, rounds: int, iters: int) -> dict[str, float]:
    for run in runs.values():
        for _ in range(3):
            run()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            samples[name].append(_time_ms(run, iters))
    return {name: statistics.median(values) for name, values in samples.items()}


if __name__ == "__main__":
    main()
