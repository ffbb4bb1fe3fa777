"""What a warm server imports before it forks: its preload, the trace of it, more later.

The server imports the modules named before TRACE_FROM_HERE untraced, then, when
PRTOGGLE_TRACE_DIR asks (`bisect --git`), the rest under the trace (revert/run_trace.py).
pytest brings the installed pytest plugins. The variables the imports read are noted
(warm_environ.py); no collection runs until the heap they made is frozen. `import_more` adds
modules later, by the same rules. Process-global: meant for the server's own process, before
its forks.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Callable

from prtoggle.protocol import TRACE_ENV, TRACE_FROM_HERE, TRACE_PACKAGES_ENV
from prtoggle.runners.warm_environ import record_more_reads, stop_recording


def split_at_trace_mark(names: list[str]) -> tuple[list[str], list[str]]:
    """The preload's modules before TRACE_FROM_HERE (none without it), and after it."""
    if TRACE_FROM_HERE not in names:
        return [], names
    mark = names.index(TRACE_FROM_HERE)
    return names[:mark], names[mark + 1 :]


def preload(name: str) -> None:
    """Import `name` now; one that fails is left out (the child then imports it and fails).
    With pytest come the plugins pytest itself imports at start (`_preload_pytest_plugins`)."""
    try:
        importlib.import_module(name)
    except Exception:  # the child imports it again and reports the error itself
        sys.modules.pop(name, None)
        return
    if name == "pytest":
        _preload_pytest_plugins()


def maybe_start_trace(*, preloading: bool = False) -> Callable[[], None]:
    """Record what runs from now on when PRTOGGLE_TRACE_DIR asks (`bisect --git`): in the
    server, its preload (`preloading`; the returned function writes it and stops); in a
    forked run, the run (written at its exit), as the start-up hook of a fresh child does."""
    directory = os.environ.get(TRACE_ENV, "")
    if not directory:
        return lambda: None
    from prtoggle.revert import run_trace

    packages = run_trace.packages_from(os.environ.get(TRACE_PACKAGES_ENV, ""))
    return run_trace.start(directory, packages=packages, preload=preloading)


def collections_off() -> None:
    """No automatic collection until freeze_preloaded_heap (CPython's advice for a process
    that forks without exec): over sglang's growing heap, the ones its import set off took
    about 1.5 s of a 6.5 s preload, and another 0.35 s ended the trace in the middle of
    writing it. The one collection before the freeze frees what they would have."""
    gc.disable()


def import_more(names: list[str], *, preloaded: list[str]) -> None:
    """After the preload (`preloaded`, extended with `names`): import `names` too, untraced,
    noting the variables they read, and freeze the heap again."""
    collections_off()
    record_more_reads()
    for name in names:
        preload(name)
    preloaded.extend(names)
    stop_recording(preloaded)
    freeze_preloaded_heap()


def freeze_preloaded_heap() -> None:
    """Move every object the preload made into the collector's permanent generation
    (CPython's advice for a process that forks without exec): a child's collections then
    skip them (pytest collects twice as it ends; over sglang's heap that was about 0.7 s
    per run) and the pages the children share stay shared. Collections are on again after
    it: objects a run makes are collected as usual."""
    gc.collect()
    gc.freeze()
    gc.enable()


def cuda_initialised() -> bool:
    """Whether the imports initialised CUDA (a context made here cannot cross a fork)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_initialized())


def _preload_pytest_plugins() -> None:
    """Import the modules of the installed pytest plugins (the `pytest11` entry points) that
    pytest imports as each run starts, unless PYTEST_DISABLE_PLUGIN_AUTOLOAD keeps it from
    them: a run then finds them imported (an sglang unit test's run: 0.47 s, 0.28 s)."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return
    from importlib.metadata import entry_points

    for point in entry_points(group="pytest11"):
        preload(point.module)
