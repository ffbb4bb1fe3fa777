"""What the revert toggles cost: import, CLI start, the unset check, apply and restore.

Runs on CPU. Usage: ``python bench/toggle_cost.py [--json]``. Each figure is the median
of repeated runs; process-level figures start fresh interpreters.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from prtoggle.patching.targets import import_target
from prtoggle.recipes.registry import Registry, default_registry
from prtoggle.revert import toggle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {
        "python -c pass (s)": _process_seconds(["-c", "pass"], args.repeat),
        "python -c 'import prtoggle' (s)": _process_seconds(["-c", "import prtoggle"], args.repeat),
        "prtoggle list (s)": _process_seconds(["-m", "prtoggle", "list"], args.repeat),
        "maybe_revert_pr_fix(), variable unset (us)": _unset_check_us(),
    }
    figures.update(_apply_restore_us(args.repeat))
    figures["untouched function keeps its code object"] = _untouched_code_identity()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    for name, value in figures.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{name:55s} {shown}")


def _process_seconds(argv: list[str], repeat: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], check=True, env=env, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _unset_check_us() -> float:
    os.environ.pop("SGLANG_DEBUG_REVERT_PR", None)
    return _median_us(toggle.maybe_revert_pr_fix, 20_000)


def _demo_engine_recipes() -> Registry:
    """The `fixes` collection: the demo engine's five fixes (importable on any machine)."""
    return default_registry().in_collection("fixes")


def _apply_restore_us(repeat: int) -> dict[str, float]:
    registry = _demo_engine_recipes()
    figures = {}
    for pr in registry.prs():
        for patch in registry.get(pr).patches:  # import targets outside the timing
            import_target(patch.target)
        applies, restores = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            toggle.apply_revert(pr, registry=registry)
            middle = time.perf_counter()
            toggle.restore(pr)
            applies.append(middle - start)
            restores.append(time.perf_counter() - middle)
        figures[f"apply revert {pr} (us)"] = statistics.median(applies) * 1e6
        figures[f"restore {pr} (us)"] = statistics.median(restores) * 1e6
    return figures


def _untouched_code_identity() -> bool:
    """With a fix reverted, every function it does not target keeps its code object."""
    from fixes.attention import trtllm_mha_backend

    backend = trtllm_mha_backend.TRTLLMHAAttnBackend
    untouched = {
        name: f.__code__
        for name, f in vars(backend).items()
        if callable(f) and hasattr(f, "__code__")
    }
    registry = _demo_engine_recipes()
    with toggle.reverted(*registry.prs(), registry=registry):
        targeted = {p.target.rsplit(".", 1)[-1] for f in registry.recipes for p in f.patches}
        return all(
            vars(backend)[name].__code__ is code
            for name, code in untouched.items()
            if name not in targeted
        )


def _median_us(fn: Callable[[], object], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - start) / count * 1e6


if __name__ == "__main__":
    main()
