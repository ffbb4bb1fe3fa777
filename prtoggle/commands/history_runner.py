"""The runner of `bisect --git`'s probes: a warm worker preloading what the command imports.

The worker's server starts importing while the range is read: the heavy modules, pytest
(with its plugins) and the range's package modules that the command's own files import at
their top and inside the functions it runs (runners/command_imports.py; one of those that
initialises CUDA sends it back to the top-level imports). Modules of other packages are
imported before the trace of the first run starts: no candidate changes their functions.
After a first run of WIDEN_AFTER_SECONDS or more, the package's modules it imported and the
worker had not, the worker's server imports too, in place, before the next probe (each
probe imported them again: about 1 s a probe for some sglang tests; a quicker run keeps
them imported after its revert, as a fresh process does). Once the tiers
are known, the worker's server reads ahead the files their commits change that the run
imported (patching/prepared_sources.py): each probe's revert then finds them read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from prtoggle.protocol import TRACE_ENV, TRACE_PACKAGES_ENV
from prtoggle.recipes.authoring.history import HistoryCommit
from prtoggle.revert.run_trace import RunTrace
from prtoggle.runners.command_imports import command_imports, command_lazy_imports
from prtoggle.runners.output_tail import TAIL_BYTES
from prtoggle.runners.warm_client import (
    HEAVY_MODULES,
    CommandRunner,
    WarmWorker,
    command_runner,
)
from prtoggle.runners.warm_eligibility import env_without_revert

__all__ = ["WIDEN_AFTER_SECONDS", "prepare_changed_files", "probe_runner", "widen_after_first_run"]

WIDEN_AFTER_SECONDS = 1.0
"""A first run this long may have imported much that the warm worker did not preload."""


def probe_runner(
    stack: contextlib.ExitStack[bool | None],
    *,
    command: tuple[str, ...],
    packages: Collection[str],
    trace_env: Mapping[str, str],
    warm: bool,
) -> tuple[CommandRunner, WarmWorker | None]:
    """The runner of the probes, entered on `stack`, and its warm worker (None and plain
    children when not `warm`). `packages`: the top-level packages the range changes;
    `trace_env`: the variables that trace the first run (the worker's preload with it)."""
    if not warm:
        return stack.enter_context(command_runner(warm=False, output_limit=TAIL_BYTES)), None
    tops = {*packages, "pytest", "_pytest"}
    wanted = [
        name
        for name in ("pytest", *command_imports(command, cwd=Path.cwd()))
        if name.split(".", 1)[0] in tops
    ]
    preload = list(dict.fromkeys((*HEAVY_MODULES, *wanted)))
    ours = [name for name in preload if name.split(".", 1)[0] in packages]
    worker = stack.enter_context(
        WarmWorker(
            untraced=tuple(name for name in preload if name not in ours),
            preload=tuple(ours),
            base_env={**env_without_revert(os.environ), **trace_env},
            output_limit=TAIL_BYTES,
        )
    )
    lazy = command_lazy_imports(command, cwd=Path.cwd())
    worker.widen([name for name in lazy if name.split(".", 1)[0] in tops])
    worker.start()  # (widen started it when the tests import more inside functions)
    return worker.run, worker


def widen_after_first_run(
    worker: WarmWorker, *, seconds: float, trace: RunTrace, packages: Collection[str]
) -> int:
    """After a first run of WIDEN_AFTER_SECONDS or more: later runs fork from a server that
    also imported the modules of `packages` the run imported (in the run's order),
    untraced. How many modules were added (0: not widened, or the preload had them all)."""
    if seconds < WIDEN_AFTER_SECONDS:
        return 0
    names = [
        name
        for name in trace.names
        if name.split(".", 1)[0] in packages and name not in trace.preloaded
    ]
    env = {k: v for k, v in worker.base_env.items() if k not in (TRACE_ENV, TRACE_PACKAGES_ENV)}
    return worker.widen(names, base_env=env)


def prepare_changed_files(
    worker: WarmWorker | None, commits: Iterable[HistoryCommit], *, located: Mapping[str, str]
) -> None:
    """Have `worker`'s server read ahead the files `commits` change (in their order) that
    the run imported (`located`: file under the source folder -> its path)."""
    if worker is not None:
        worker.prepare_sources(
            [located[file] for commit in commits for file in commit.files if file in located]
        )
