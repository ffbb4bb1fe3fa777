"""Start-up hook for child processes: apply SGLANG_DEBUG_REVERT_PR before the program runs.

`prtoggle.revert.toggle.child_env` puts this directory first on PYTHONPATH. The hook first
runs the sitecustomize it shadows (if any), then, when SGLANG_DEBUG_REVERT_PR is not
empty, imports the prtoggle it belongs to and hands over to the child contract,
`prtoggle.revert.child.start()`: revert the named fixes (targets not imported yet are
patched as soon as their module has finished importing), or refuse with one `prtoggle:`
line on stderr and status 78, now or at a later import; report to a `prtoggle run` parent.
When PRTOGGLE_TRACE_DIR is set it also records what the run imports and runs
(`prtoggle.revert.run_trace`). It reads prtoggle/protocol.py (a few constants) as a file
and imports prtoggle only when a revert or a trace is asked for.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent


def _chain_to_shadowed_sitecustomize() -> None:
    """Run the next `sitecustomize` on sys.path, as if this one did not exist."""
    others = [entry for entry in sys.path if _resolved(entry) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _apply_reverts() -> None:
    protocol = _load_protocol()
    if not os.environ.get(protocol.REVERT_ENV, "").strip():
        return
    _import_own_prtoggle()
    from prtoggle.revert import child  # stdlib, protocol and errors only at import

    child.start()  # reverts, or refuses and exits 78; never an unreverted run


@functools.lru_cache(maxsize=1)
def _load_protocol() -> ModuleType:
    """prtoggle/protocol.py of this copy, loaded as a file: no package import, no torch."""
    spec = importlib.util.spec_from_file_location(
        "_prtoggle_bootstrap_protocol", _HERE.parent / "protocol.py"
    )
    assert spec is not None and spec.loader is not None  # a .py path always has a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_own_prtoggle() -> None:
    """Import the prtoggle this bootstrap belongs to, whatever else sys.path holds.

    Another (older) prtoggle on the path would not match this bootstrap; the package is
    loaded from the directory above this one, without changing sys.path.
    """
    if "prtoggle" in sys.modules:
        return
    package_dir = _HERE.parent
    spec = importlib.util.spec_from_file_location(
        "prtoggle", package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load prtoggle from {package_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["prtoggle"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["prtoggle"]
        raise


def _resolved(entry: str) -> Path | None:
    try:
        return Path(entry or os.getcwd()).resolve()
    except OSError:
        return None


def _start_trace() -> None:
    """Record what this run imports and runs when PRTOGGLE_TRACE_DIR asks (bisect --git)."""
    protocol = _load_protocol()
    directory = os.environ.get(protocol.TRACE_ENV, "")
    if not directory:
        return
    _import_own_prtoggle()
    from prtoggle.revert import run_trace  # stdlib only

    packages = run_trace.packages_from(os.environ.get(protocol.TRACE_PACKAGES_ENV, ""))
    run_trace.start(directory, packages=packages)


try:
    _chain_to_shadowed_sitecustomize()
finally:
    _start_trace()
    _apply_reverts()
