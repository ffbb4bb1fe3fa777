"""One target's check result: does its revert apply, and why not (apart from the checker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CHECK_STATUSES", "CheckStatus", "TargetCheck"]

CHECK_STATUSES = ("ok", "stale", "absent", "not-applicable", "error")
CheckStatus = Literal["ok", "stale", "absent", "not-applicable", "error"]


@dataclass(frozen=True)
class TargetCheck:
    """Whether one target of one fix reverts cleanly; `message` says why when not.

    `status`: ok (applies, compiles, takes effect), stale (a match is not found once, or
    the target's module or function is gone: the code moved on), absent (the target's
    top-level package is not installed, or not in the checked tree), not-applicable (the
    recipe's `applies_to` range excludes the version of the tree or of the installed
    distribution), error (anything else: the edit is refused or does not compile, the
    module fails to import, ...).
    `source` is the checked tree or archive, None for the imported modules. `found_as`
    names where the target's function is defined when the target names it elsewhere (a
    re-export), as the runtime finds it.
    """

    pr: int
    target: str
    ok: bool
    message: str
    status: CheckStatus = "ok"
    collection: str = ""
    source: str | None = None
    found_as: str | None = None

    @property
    def reason(self) -> str:
        """`message` without a leading `<target>: `: for a line that names the target already."""
        prefix = f"{self.target}: "
        return self.message[len(prefix) :] if self.message.startswith(prefix) else self.message

    @property
    def failed(self) -> bool:
        """Stale or error; absent fails only for a strict caller, not-applicable never."""
        return self.status in ("stale", "error")
