"""The shared shape of a reproduction scenario: options, outcome, and the `python -m` entry."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from prtoggle.protocol import OUTCOME_PREFIX  # last stderr line: this prefix, outcome as JSON

CPU_THREADS = 1
"""torch intra-op threads of a scenario process on CPU: the toy shapes gain nothing from more,
`prtoggle repro` runs several scenarios at once, and OpenMP threads waiting for each other
stall a run many times over on a busy machine."""

DIST_BACKENDS = ("auto", "gloo", "nccl")
"""Collective backends of multi-rank scenarios; auto: nccl when every rank has a GPU."""

ENGINE_MODULES = (
    "fixes.attention",
    "fixes.cuda_graph",
    "fixes.dp_attention",
    "fixes.forward_batch",
    "fixes.kernels",
    "fixes.memory_pool",
    "fixes.model",
    "fixes.speculative",
)
"""What --auto-detect instruments: the engine, not the scenarios or benchmarks."""

AUTO_DETECT_ENV = {
    "PRTOGGLE_AUTO_DETECT": "1",
    "PRTOGGLE_HAND_PROBES": "0",
    "SGLANG_SPEC_NAN_DETECTION": "1",
    "SGLANG_SPEC_OOB_DETECTION": "0",
    "SGLANG_DEBUG_POISON": "1",
}
"""--auto-detect: no hand-placed probe; NaN probes on every engine function's tensors,
padding/graph buffers filled with NaN (poisoned) so a read of padding shows up as NaN, and
(auto_instrumented) a redzone after every tensor the engine allocates."""


@dataclass(frozen=True)
class ScenarioOptions:
    """How to run a scenario: where, with which kernel provider (None: the default), and
    (multi-rank scenarios only) over which collective backend."""

    device: str = "cpu"
    provider: str | None = None
    dist_backend: str = "auto"  # one of DIST_BACKENDS


@dataclass(frozen=True)
class ScenarioOutcome:
    """What a scenario observed: a clean run that matched the reference, or a named failure."""

    outcome: Literal["clean", "failure"]
    error: str | None = None
    site: str | None = None
    message: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def failure_from_exception(exc: BaseException) -> ScenarioOutcome:
    """Describe an exception as a failure; detection errors carry the first site they name."""
    site = getattr(exc, "site", None)
    if site is None:
        sites = getattr(exc, "sites", None)
        if sites:
            site = str(sites[0])
    return ScenarioOutcome(outcome="failure", error=type(exc).__name__, site=site, message=str(exc))


AUTO_DETECT_EXCLUDE = (
    "fixes.kernels.trtllm_fmha._checked_args",
    "fixes.kernels.trtllm_fmha_reference.*",
)
"""Engine functions --auto-detect leaves unwrapped: `_checked_args` returns the decode
kernel's output buffer freshly allocated and uninitialised (torch.empty), not yet written;
the torch reference kernels stand in for GPU kernels, which instrumentation cannot see into
(their dispatcher, `trtllm_fmha.trtllm_batch_*`, is what it probes), and they write that
uninitialised output one request at a time. Excluded, the outcome is the same whether or
not the reference module was imported before instrumenting."""


def run_auto_detect(
    run: Callable[[ScenarioOptions], ScenarioOutcome], options: ScenarioOptions
) -> ScenarioOutcome:
    """Run the scenario with AUTO_DETECT_ENV and every loaded engine module instrumented."""
    os.environ.update(AUTO_DETECT_ENV)
    with auto_instrumented():
        return run(options)


@contextlib.contextmanager
def auto_instrumented() -> Iterator[None]:
    """Under --auto-detect (PRTOGGLE_AUTO_DETECT=1, inherited by spawned ranks): every loaded
    engine module instrumented and every new tensor guarded by a redzone for the body, then
    detect.check(); otherwise nothing.

    Nested (a rank forked inside the parent's body inherits its wrappers), it only checks:
    wrapping the wrappers again would report every crash and NaN twice."""
    from prtoggle import detect

    if os.environ.get("PRTOGGLE_AUTO_DETECT") != "1":
        yield
        return
    if _AUTO_INSTRUMENTATION.active:
        yield
        detect.check()
        return
    loaded = [name for name in ENGINE_MODULES if name in sys.modules]
    _AUTO_INSTRUMENTATION.active = True
    try:
        with (
            detect.instrument_functions(loaded, exclude=AUTO_DETECT_EXCLUDE),
            detect.guarded_allocations(),
        ):
            yield
            detect.check()
    finally:
        _AUTO_INSTRUMENTATION.active = False


def run_scenario_main(
    run: Callable[[ScenarioOptions], ScenarioOutcome], *, description: str, multi_rank: bool = False
) -> None:
    """Parse `--device/--provider` (and `--backend` for a multi-rank scenario), run the
    scenario, report it, and exit 0 (clean) or 1. On CPU the process uses CPU_THREADS torch
    threads (set here, not in `run`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--provider",
        default=None,
        help="kernel provider (torch, triton, flashinfer); default: torch on CPU, triton on CUDA",
    )
    parser.add_argument(
        "--auto-detect",
        action="store_true",
        help="no hand-placed probe: instrument every engine function (NaN) with NaN-filled "
        "padding buffers and a redzone after every tensor, and report what that finds",
    )
    if multi_rank:
        parser.add_argument(
            "--backend",
            default="auto",
            choices=DIST_BACKENDS,
            help="collective backend of the ranks; auto: nccl with --device cuda and one GPU "
            "per rank, gloo otherwise",
        )
    args = parser.parse_args()
    options = ScenarioOptions(
        device=args.device,
        provider=args.provider,
        dist_backend=getattr(args, "backend", "auto"),
    )
    if options.device == "cpu":
        import torch

        torch.set_num_threads(CPU_THREADS)
    try:
        outcome = run_auto_detect(run, options) if args.auto_detect else run(options)
    except Exception as exc:  # a scenario reports every failure, it never hides one
        traceback.print_exc(file=sys.stderr)
        outcome = failure_from_exception(exc)
    if outcome.outcome == "clean":
        sys.stdout.write(f"clean: {outcome.message}\n")
        sys.stderr.write(OUTCOME_PREFIX + outcome.to_json() + "\n")
        sys.exit(0)
    where = f" at {outcome.site}" if outcome.site else ""
    sys.stderr.write(f"{outcome.error}{where}: {outcome.message}\n")
    sys.stderr.write(OUTCOME_PREFIX + outcome.to_json() + "\n")
    sys.exit(1)


@dataclass
class _AutoInstrumentation:
    """Process-global: whether auto_instrumented's wrappers are in force (a fork keeps them)."""

    active: bool = False


_AUTO_INSTRUMENTATION = _AutoInstrumentation()
