"""A server's processes as sglang's launch_server has them, on CPU, each reporting its reverts.

`python server_like.py PRS TARGET... [--self]`: the main process (with --self it calls
`prtoggle.maybe_revert_pr_fix()` itself first) starts a *spawned* scheduler, which imports
the real `sglang.srt.managers.scheduler` and calls sglang's own `maybe_revert_pr_fix()` from
there, as `Scheduler.__init__` does, then imports each TARGET's module (the real backends).
The scheduler starts a spawned worker and a forked child, which call sglang's toggle again.
Each process prints one JSON line:
its role, pid, which of PRS `prtoggle.is_reverted` says are in force, and which TARGETs run
code that differs from their source file's (compiled afresh here: the unreverted code).
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import types
from pathlib import Path


def main() -> None:
    prs = [int(pr) for pr in sys.argv[1].split(",")]
    targets = [arg for arg in sys.argv[2:] if arg != "--self"]
    if "--self" in sys.argv:
        import prtoggle

        prtoggle.maybe_revert_pr_fix()
    report("main", prs, targets)
    scheduler = multiprocessing.get_context("spawn").Process(
        target=run_scheduler, args=(prs, targets)
    )
    scheduler.start()
    scheduler.join()
    sys.exit(scheduler.exitcode)


def run_scheduler(prs: list[int], targets: list[str]) -> None:
    from sglang.srt.managers import scheduler

    scheduler.maybe_revert_pr_fix()  # Scheduler.__init__, before init_model_worker
    for target in targets:
        import_module_of(target)
    report("scheduler", prs, targets)
    statuses = []
    for method, role in (("spawn", "worker"), ("fork", "forked")):
        child = multiprocessing.get_context(method).Process(
            target=run_worker, args=(role, prs, targets)
        )
        child.start()
        child.join()
        statuses.append(child.exitcode)
    sys.exit(max(statuses))


def run_worker(role: str, prs: list[int], targets: list[str]) -> None:
    from sglang.srt.debug_utils.pr_fix_toggle import maybe_revert_pr_fix

    maybe_revert_pr_fix()  # sglang's own toggle, asked again
    for target in targets:
        import_module_of(target)
    report(role, prs, targets)


def report(role: str, prs: list[int], targets: list[str]) -> None:
    import prtoggle

    line = {
        "role": role,
        "pid": os.getpid(),
        "in_force": [pr for pr in prs if prtoggle.is_reverted(pr)],
        "differs": [t for t in targets if role != "main" and differs_from_source(t)],
    }
    print(json.dumps(line), flush=True)


def import_module_of(target: str) -> object:
    """Import the longest module prefix of `target`, then walk to the function."""
    parts = target.split(".")
    for index in range(len(parts) - 1, 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:index]))
        except ImportError:
            continue
        for name in parts[index:]:
            found = getattr(found, name)
        return found
    raise ImportError(target)


def differs_from_source(target: str) -> bool:
    function = import_module_of(target)
    code = function.__code__  # type: ignore[attr-defined]
    path = code.co_filename
    module_code = compile(Path(path).read_text(), path, "exec", dont_inherit=True)
    pristine = find_code(module_code, code.co_qualname)
    if pristine is None:
        raise LookupError(f"{code.co_qualname} not in {path}")
    return bool(code != pristine)


def find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname:
                return const
            found = find_code(const, qualname)
            if found is not None:
                return found
    return None


if __name__ == "__main__":
    main()
