"""What a `bisect --git` search keeps: probes, tiers of candidates, the answer, and the small
rules of reading them (which files a run says did not land, the next index to probe, the
command that reproduces a verdict)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from prtoggle.commands.history_reach import Reach
from prtoggle.commands.history_verdicts import FailureRule, ProbeRun, Verdict, counts_text
from prtoggle.protocol import YAML_PATH_ENV
from prtoggle.recipes.authoring.history import HistoryCommit, HistoryRecipe

HistoryMode = Literal["ordered", "attribute"]
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")


@dataclass(frozen=True)
class Probe:
    """A set of commits reverted, COMMAND's runs under it, and the majority's verdict."""

    label: str
    reverted: tuple[str, ...]
    verdict: Verdict
    runs: tuple[ProbeRun, ...]
    reason: str = ""
    recipe: HistoryRecipe | None = None
    stayed: tuple[HistoryCommit, ...] = ()
    """The commits whose changes this probe's partial revert left as they are."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "reverted": list(self.reverted),
            "verdict": self.verdict,
            "reason": self.reason,
            "whole": self.recipe.whole if self.recipe is not None else True,
            "not_reverted": list(self.recipe.not_reverted) if self.recipe is not None else [],
            "stayed": [commit.sha for commit in self.stayed],
            "runs": [
                {
                    "outcome": run.outcome,
                    "signature": run.signature,
                    "exit_code": run.exit_code,
                    "seconds": round(run.seconds, 3),
                    "note": run.note,
                }
                for run in self.runs
            ],
        }


@dataclass
class HistoryAnswer:
    """The search's answer: the culprit (or the suspects that cannot be ruled out), the
    probes that decided it, the confirmation with the culprit alone reverted, and the
    command that reproduces the verdict."""

    mode: HistoryMode
    culprits: list[HistoryCommit] = field(default_factory=list)
    suspects: list[HistoryCommit] = field(default_factory=list)
    conclusion: str = ""
    probes: list[Probe] = field(default_factory=list)
    deciding: list[int] = field(default_factory=list)
    confirmation: Probe | None = None
    reproduce: str = ""
    rule: FailureRule = field(default_factory=FailureRule)
    notes: list[str] = field(default_factory=list)
    """What the search said on the way (the reach of the traced run, a widened search)."""
    reach: Reach | None = None

    @property
    def found(self) -> bool:
        return bool(self.culprits)

    @property
    def inconclusive(self) -> list[Probe]:
        return [probe for probe in self.probes if probe.verdict == "skip"]


@dataclass(frozen=True)
class Tier:
    """A set of candidates searched as one list: its name in the report, its commits
    (oldest first), and whether probes revert only the files of modules the run imported."""

    name: str
    commits: list[HistoryCommit]
    imported_only: bool = False


@dataclass
class Bounds:
    """Where a binary search over `candidates` stopped: the newest index shown bad, the
    oldest index above it shown good (len(candidates): nothing reverted), the probes by
    index; the commits between them could not be judged."""

    candidates: list[HistoryCommit]
    bad: int
    good: int
    verdicts: dict[int, Probe]

    @property
    def culprit(self) -> HistoryCommit:
        return self.candidates[self.bad]

    @property
    def undecided(self) -> list[HistoryCommit]:
        return self.candidates[self.bad + 1 : self.good]

    @property
    def decided(self) -> bool:
        return self.good - self.bad == 1


def not_landed_files(probe: Probe, commits: Sequence[HistoryCommit]) -> set[str]:
    """The files (under the source folder) of the modules whose revert the runs of `probe`
    say did not land, among those the commits change."""
    files = {file for commit in commits for file in commit.files}
    found: set[str] = set()
    for run in probe.runs:
        if run.outcome != "other" or run.signature != "not reverted":
            continue
        for dotted in set(_DOTTED.findall(f"{run.note} {run.signature}")):
            parts = dotted.split(".")
            for end in range(len(parts), 0, -1):
                stem = "/".join(parts[:end])
                hit = next((f for f in (f"{stem}.py", f"{stem}/__init__.py") if f in files), None)
                if hit is not None:
                    found.add(hit)
                    break
    return found


def runs_summary(probe: Probe) -> str:
    """`2 good, 1 other` of a probe's runs, or `no run`."""
    return counts_text(probe.runs) or "no run"


def reproduce_line(recipe: HistoryRecipe | None, command: Sequence[str]) -> str:
    """The shell line that runs COMMAND with `recipe` reverted ('' without a recipe)."""
    if recipe is None or not recipe.spec:
        return ""
    return (
        f"{YAML_PATH_ENV}={_quoted(str(recipe.directory))} prtoggle run -r {recipe.spec} -- "
        + " ".join(_quoted(part) for part in command)
    )


def first_line(exc: BaseException) -> str:
    """An error's first line (300 characters at most), else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def next_untested(bad: int, good: int, skipped: set[int]) -> int | None:
    """The untested index strictly between the bounds nearest their midpoint."""
    middle = (bad + good) // 2
    inside = [i for i in range(bad + 1, good) if i not in skipped]
    return min(inside, key=lambda i: (abs(i - middle), i)) if inside else None


def _quoted(text: str) -> str:
    return shlex.quote(text)
