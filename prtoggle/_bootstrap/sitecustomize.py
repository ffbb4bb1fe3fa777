"""Start-up hook for child processes: apply SGLANG_DEBUG_REVERT_PR before the program runs.

`prtoggle.toggle.child_env` puts this directory first on PYTHONPATH. The hook first
runs the sitecustomize it shadows (if any), then, when SGLANG_DEBUG_REVERT_PR is not
empty, reverts the named fixes (targets not imported yet are patched on import). A
revert request that cannot be honoured (bad value, unknown PR, broken registry, an edit
that does not apply) prints one `prtoggle:` line on stderr and exits with status 78:
the child never runs silently unreverted.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_EXIT_CODE = 78  # prtoggle.toggle.BOOTSTRAP_FAILURE_EXIT_CODE


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
    if not os.environ.get("SGLANG_DEBUG_REVERT_PR", "").strip():
        return
    try:
        import prtoggle  # noqa: F401
    except ImportError:
        sys.path.append(str(_HERE.parent.parent))
    try:
        from prtoggle.errors import PrToggleError
        from prtoggle.toggle import maybe_revert_pr_fix

        maybe_revert_pr_fix()
    except (PrToggleError, ImportError) as exc:
        sys.stderr.write(f"prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: {exc}\n")
        sys.stderr.flush()
        os._exit(_EXIT_CODE)


def _resolved(entry: str) -> Path | None:
    try:
        return Path(entry or os.getcwd()).resolve()
    except OSError:
        return None


try:
    _chain_to_shadowed_sitecustomize()
finally:
    _apply_reverts()
