"""prtoggle: revert bug fixes at run time, catch what they prevented (PYTEST_DONT_REWRITE)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prtoggle.errors import PartialRevertWarning, PrToggleError

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports these on first use
    from prtoggle.revert.source_patcher import CodePatcher, apply_edits, apply_patches_from_config
    from prtoggle.revert.toggle import (
        is_reverted,
        maybe_revert_pr_fix,
        patched_targets,
        pending_targets,
        reverted,
    )

__all__ = [
    "CodePatcher",
    "PartialRevertWarning",
    "PrToggleError",
    "apply_edits",
    "apply_patches_from_config",
    "is_reverted",
    "maybe_revert_pr_fix",
    "patched_targets",
    "pending_targets",
    "reverted",
]
__version__ = "0.1.0"

_TOGGLE_EXPORTS = frozenset(
    {"is_reverted", "maybe_revert_pr_fix", "patched_targets", "pending_targets", "reverted"}
)
_SOURCE_PATCHER_EXPORTS = frozenset({"CodePatcher", "apply_edits", "apply_patches_from_config"})


def __getattr__(name: str) -> Any:
    """Resolve the toggle API on first use, keeping `import prtoggle` cheap."""
    if name in _TOGGLE_EXPORTS:
        from prtoggle.revert import toggle

        return getattr(toggle, name)
    if name in _SOURCE_PATCHER_EXPORTS:
        from prtoggle.revert import source_patcher

        return getattr(source_patcher, name)
    raise AttributeError(f"module 'prtoggle' has no attribute {name!r}")
