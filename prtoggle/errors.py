"""prtoggle's errors (root PrToggleError) and, apart, what detection finds (root Finding)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class PrToggleError(Exception):
    """Base of every error prtoggle raises on purpose; the CLI prints it as one line."""


class RegistryError(PrToggleError):
    """A fix YAML file is malformed, or the set of registered fixes is inconsistent."""


class UnknownPRError(PrToggleError):
    """A PR number was asked for that no registry directory defines."""


class RevertSpecError(PrToggleError):
    """The value of SGLANG_DEBUG_REVERT_PR (or a -r option) is malformed."""


class PatchApplicationError(PrToggleError):
    """An edit does not apply to its target (no match, several matches, bad result)."""


class EditMatchError(PatchApplicationError):
    """An edit's match is not found exactly once in its target's source (the code moved on)."""


class TargetResolutionError(PatchApplicationError):
    """A patch target names a module or attribute that does not exist."""


class UnsupportedTargetError(PatchApplicationError):
    """A patch target is of a kind whose code cannot be swapped safely."""


class VersionRangeError(PatchApplicationError):
    """A revert was asked for where the installed package is outside the recipe's range."""


class PartialRevertWarning(UserWarning):
    """A revert was put in force whose recipe leaves some changes of the fix as they are."""


class MissingDependencyError(PrToggleError):
    """A command needs what is not installed here: the `detect` extra or the demo engine."""


class RunnerError(PrToggleError):
    """A child command or scenario could not be started or classified."""


class CommandUsageError(PrToggleError):
    """A command's arguments do not go together or name nothing it can use (`--all` and PRs,
    no PR): the CLI prints it as a usage error, pointing at the command's `--help`."""


class Finding(Exception):
    """Root of what detection finds in the program it watches: a fault of that program,
    not a tool error, so `except PrToggleError` around a run never swallows one.

    The message names every site hit, first writer first. `hits` holds the hit records
    (prtoggle.detect.findings.hits.SiteHit / RedzoneHit) in first-hit order, redzones
    last; `sites` their site names; `first` the first writer (or None).
    """

    def __init__(
        self, message: str, *, sites: tuple[str, ...] = (), hits: Sequence[Any] = ()
    ) -> None:
        super().__init__(message)
        self.sites = sites
        self.hits = tuple(hits)

    @property
    def first(self) -> Any:
        """The hit first in execution order (None when the finding carries no hit records)."""
        return self.hits[0] if self.hits else None


DetectionError = Finding
"""The name of Finding before issue 28 (then a PrToggleError); kept for callers."""


class NaNDetected(Finding):
    """A NaN reached a probed tensor."""


class InfDetected(Finding):
    """An infinity reached a probed tensor."""


class OOBDetected(Finding):
    """An index or size fell outside the range its consumer can handle."""


class RedzoneViolation(Finding):
    """Bytes past the end of a guarded buffer were overwritten."""


class RedzoneRead(RedzoneViolation):
    """A kernel read bytes past the end of a guarded buffer (its redzone), reported by
    detect.check_read() at the read."""


class PaddingLeakDetected(Finding):
    """Real rows of an output changed with the values (or amount) of padding around them."""


class DetectUsageError(PrToggleError):
    """A detection API got an invalid argument or setting (mode, phase, site, dtype, bound)."""
