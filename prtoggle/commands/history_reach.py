"""Which commits of a range change code a run used: the modules it imported, the functions it ran.

`bisect --git` runs COMMAND once with nothing reverted and a trace (revert/run_trace.py).
A candidate commit *reaches* that run when one of its changed lines, in a module the run
imported, is module-level code (statements outside any def: imports, constants, class
bodies, decorators; a module the commit added or deleted) or lies in a function the run
ran (matched by qualified name, a nested def counting as the def around it). A line of a
class's body outside its defs (a dataclass field, the class's decorators) is module-level
code and also `CLASS.<body>`: it counts as ran when a method generated from that body ran
(a dataclass's `__init__`; run_trace.py notes those). A commit that
reaches nothing cannot change the run's outcome on its own: its changes are in modules the
run never imported or in functions it never called. The search then looks at the commits
that reach, and falls back to every candidate when they do not explain the failure.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prtoggle.recipes.authoring.guards import is_test_path
from prtoggle.recipes.authoring.history import HistoryCommit, HistoryRange, git_bytes
from prtoggle.revert.run_trace import CLASS_BODY, RunTrace

MODULE_LEVEL = "<module>"
"""The unit a changed line outside any def belongs to."""

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_COMMIT_MARK = "\x1eprtoggle-commit "


@dataclass(frozen=True)
class Hunk:
    """One hunk of a commit's diff of a file: (first line, line count) on each side."""

    old: tuple[int, int]
    new: tuple[int, int]


@dataclass(frozen=True)
class CommitReach:
    """Whether one candidate reaches the traced run, and why (for the report)."""

    commit: HistoryCommit
    reaches: bool
    why: str
    ran_code: bool = False
    """It changes a function the run ran (not only module-level code): searched first."""


@dataclass
class Reach:
    """Every candidate's reach, oldest first."""

    commits: list[CommitReach] = field(default_factory=list)
    located: dict[str, str] = field(default_factory=dict)
    """The files (under the source folder) of the modules the run imported: their paths."""

    @property
    def reaching(self) -> list[HistoryCommit]:
        return [entry.commit for entry in self.commits if entry.reaches]

    @property
    def running(self) -> list[HistoryCommit]:
        """The commits that change a function the run ran."""
        return [entry.commit for entry in self.commits if entry.ran_code]


def commits_reaching(
    history: HistoryRange, trace: RunTrace, *, units: ChangedUnits | None = None
) -> Reach:
    """Each candidate of `history`, judged against `trace` (see the module's docstring).

    `units`: changed_units(history), read before the trace was (a bisect reads it while
    the first run goes on); when None, read now for the files of the modules the run
    imported only."""
    files = _candidate_files(history)
    located = trace.located(files)
    if units is None:
        units = changed_units(history, files=sorted(located))
    reach = Reach(located=located)
    for commit in history.candidates:
        reach.commits.append(_judged(commit, units, located, trace))
    return reach


ChangedUnits = dict[tuple[str, str], frozenset[str] | None]
"""(commit sha, file under the source folder) -> the units (MODULE_LEVEL or a def's
qualified name) its changed lines fall in, on either side; None where the commit adds or
deletes the file. A pair missing counts as None (a change with no hunk: the whole file)."""


def changed_units(history: HistoryRange, *, files: Sequence[str] | None = None) -> ChangedUnits:
    """What each candidate changes, unit by unit, in `files` (every Python file of the
    package a candidate changes, when None): one `git log -p`, one `git cat-file --batch`."""
    candidates = list(history.candidates)
    wanted = sorted(_candidate_files(history)) if files is None else list(files)
    hunks = _changed_lines(history, candidates, wanted)
    contents = _contents(history, {(sha, f) for sha, by_file in hunks.items() for f in by_file})
    units: ChangedUnits = {}
    for (sha, file), sources in contents.items():
        if sources is None:
            units[(sha, file)] = None
            continue
        before, after = sources
        changed = hunks[sha][file]
        found = units_of(before, [line for h in changed for line in _lines(h.old)])
        found |= units_of(after, [line for h in changed for line in _lines(h.new)])
        units[(sha, file)] = frozenset(found)
    return units


def units_of(source: str, lines: Sequence[int]) -> set[str]:
    """The units (MODULE_LEVEL, or a def's qualified name) `lines` (1-based) of `source`
    fall in, with `CLASS.<body>` too for a line of a class's own statements or decorators;
    blank and comment-only lines count for nothing, and any line of a source that does not
    parse counts as MODULE_LEVEL."""
    if not lines:
        return set()
    text = source.splitlines()
    lines = [n for n in lines if n > len(text) or text[n - 1].strip()[:1] not in ("", "#")]
    if not lines:
        return set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {MODULE_LEVEL}
    owners: dict[int, str] = {}
    for name, first, last in _defs(tree.body, prefix=""):
        for line in range(first, last + 1):
            owners.setdefault(line, name)
    bodies: dict[int, str] = {}
    for name, first, last in _classes(tree.body, prefix=""):
        for line in range(first, last + 1):
            bodies[line] = f"{name}.{CLASS_BODY}"  # the innermost class, listed last
    found = {owners.get(line, MODULE_LEVEL) for line in lines}
    return found | {bodies[n] for n in lines if n in bodies and n not in owners}


def _judged(
    commit: HistoryCommit, units: ChangedUnits, located: dict[str, str], trace: RunTrace
) -> CommitReach:
    imported = [f for f in commit.files if f in located]
    if not imported:
        return CommitReach(commit, False, "changes no module the run imported")
    module_level, any_code = "", False
    for file in imported:
        changed = units.get((commit.sha, file))
        if changed is None:
            module_level = module_level or f"adds or deletes {file}, which the run imported"
            continue
        any_code = any_code or bool(changed)
        ran = sorted((changed - {MODULE_LEVEL}) & trace.ran(located[file]))
        if ran:
            return CommitReach(commit, True, _ran_why(file, ran[0]), ran_code=True)
        if MODULE_LEVEL in changed:
            module_level = module_level or f"changes module-level code of {file}"
    if module_level:
        return CommitReach(commit, True, module_level)
    if not any_code:
        return CommitReach(commit, False, "changes only comments and blank lines the run imported")
    return CommitReach(commit, False, "changes only functions the run did not run")


def _ran_why(file: str, unit: str) -> str:
    if unit.endswith(f".{CLASS_BODY}"):
        owner = unit.removesuffix(f".{CLASS_BODY}")
        return f"changes {file}: the fields of {owner}, whose generated methods the run ran"
    return f"changes {file}: {unit}, which the run ran"


def _candidate_files(history: HistoryRange) -> set[str]:
    """The package's Python files (test files aside) some candidate changes."""
    return {
        f for c in history.candidates for f in c.files if f.endswith(".py") and not is_test_path(f)
    }


def _lines(side: tuple[int, int]) -> range:
    """The lines one side of a hunk holds (none where the hunk only adds or only deletes)."""
    start, count = side
    return range(start, start + count)


def _defs(body: Sequence[ast.stmt], *, prefix: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, last line) of each def's own lines (its signature and
    body, not its decorators), methods of classes included; class statements themselves
    and everything else stay module-level."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}{node.name}", node.lineno, node.end_lineno or node.lineno
        elif isinstance(node, ast.ClassDef):
            yield from _defs(node.body, prefix=f"{prefix}{node.name}.")


def _classes(body: Sequence[ast.stmt], *, prefix: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, last line) of each class, decorators included, outer
    classes before the classes nested in them (classes inside a def are the def's)."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield f"{prefix}{node.name}", first, node.end_lineno or node.lineno
            yield from _classes(node.body, prefix=f"{prefix}{node.name}.")


def _changed_lines(
    history: HistoryRange, commits: Sequence[HistoryCommit], files: Sequence[str]
) -> dict[str, dict[str, list[Hunk]]]:
    """commit sha -> file (under the source folder) -> the hunks' new-side (start, count),
    for the `files` each commit changes; one `git log -p` for the whole range."""
    if not files or not commits:
        return {}
    wanted = {commit.sha for commit in commits}
    paths = [f"{history.source_dir}/{f}" if history.source_dir else f for f in files]
    out = _git(
        history,
        "log",
        "--first-parent",
        "-m",
        "--no-renames",
        "-p",
        "-U0",
        "--no-color",
        "--no-ext-diff",
        f"--format={_COMMIT_MARK}%H",
        f"{history.base}..{history.head}",
        "--",
        *paths,
    )
    found: dict[str, dict[str, list[Hunk]]] = {}
    sha, file, header = "", "", False
    for line in out.split("\n"):  # not splitlines(): the commit mark is a line break to it
        if line.startswith(_COMMIT_MARK):
            sha, file, header = line[len(_COMMIT_MARK) :].strip(), "", False
        elif line.startswith("diff --git "):
            file, header = "", True
        elif header and line[:4] in ("--- ", "+++ ") and line[4:].strip() != "/dev/null":
            file = _relative(history, line[4:].strip())
        elif sha in wanted and file and (hunk := _HUNK.match(line)):
            header = False
            old = (int(hunk.group(1)), int(hunk.group(2) or 1))
            new = (int(hunk.group(3)), int(hunk.group(4) or 1))
            found.setdefault(sha, {}).setdefault(file, []).append(Hunk(old, new))
    return found


def _contents(
    history: HistoryRange, wanted: set[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, str] | None]:
    """The text of each (commit, file) before and after the commit; None where the commit
    added or deleted it (the whole module is new or gone: module-level)."""
    keys = sorted(wanted)
    found: dict[tuple[str, str], tuple[str, str] | None] = {}
    specs = []
    for sha, file in keys:
        path = f"{history.source_dir}/{file}" if history.source_dir else file
        specs.append(f"{sha}:{path}\n{sha}^:{path}")
    batch = _git_batch(history, "\n".join(specs) + "\n") if specs else []
    for index, key in enumerate(keys):
        after, before = batch[2 * index], batch[2 * index + 1]
        found[key] = (before, after) if after is not None and before is not None else None
    return found


def _relative(history: HistoryRange, path: str) -> str:
    path = path[2:] if path[:2] in ("a/", "b/") else path
    prefix = history.source_dir
    return path[len(prefix) + 1 :] if prefix and path.startswith(prefix + "/") else path


def _git(history: HistoryRange, *args: str) -> str:
    return git_bytes(history.repo, *args).decode("utf-8", errors="replace")


def _git_batch(history: HistoryRange, requests: str) -> list[str | None]:
    """`git cat-file --batch` over the requests: each object's text, None when missing."""
    raw = git_bytes(history.repo, "cat-file", "--batch", stdin=requests.encode())
    texts: list[str | None] = []
    at = 0
    while at < len(raw):
        end = raw.index(b"\n", at)
        header = raw[at:end].decode("utf-8", errors="replace").split()
        at = end + 1
        if len(header) < 3 or header[-1] == "missing":
            texts.append(None)
            continue
        size = int(header[2])
        texts.append(raw[at : at + size].decode("utf-8", errors="replace"))
        at += size + 1
    return texts
