"""A range of git history as revert candidates, and recipes drafted from it, cached by commit.

`prtoggle bisect --git A..B` reverts *commits* in the installed code: the candidates are the
first-parent commits of A..B that change the package's Python source (test files aside), and
a probe that reverts every candidate from commit C on is one recipe drafted from the diff
between C's parent and B (`git diff C^ B`): applying each commit's own revert newest first
gives the same code, and one diff never needs one commit's revert to match the text another
left. A commit alone (the culprit's confirmation) is its own diff, drafted on the tree at
the commit. Drafts are written once into a cache folder keyed by the commits and by the
drafting code, so a second bisect over the same range drafts nothing.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from prtoggle.errors import CommandUsageError, RegistryError
from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.authoring.from_diff import draft_from_diff
from prtoggle.recipes.authoring.guards import is_test_path
from prtoggle.recipes.authoring.recipe_file import RecipeHeader, checked_recipe, write_recipe
from prtoggle.recipes.schema import MAX_PR, MIN_PR

HISTORY_PR_FALLBACK = MIN_PR
"""The PR number a drafted history recipe carries when its commit's subject names none."""

_PR_IN_SUBJECT = re.compile(r"\(#(\d+)\)")
_FIELD = "\x1f"
_DOC_SUFFIXES = frozenset({".md", ".rst", ".txt", ".png", ".svg", ".jpg"})


@dataclass(frozen=True)
class HistoryCommit:
    """One first-parent commit of the range: hash, subject, author date, PR number (the
    subject's last `(#N)`), the files it changes under the source folder, and whether it
    is a candidate (changes the package's Python source) or why not."""

    sha: str
    subject: str
    date: datetime.date
    pr: int | None
    files: tuple[str, ...]
    reason_not_candidate: str = ""

    @property
    def candidate(self) -> bool:
        return not self.reason_not_candidate

    @property
    def short(self) -> str:
        return self.sha[:12]

    def describe(self) -> str:
        """`1a2b3c4d5e6f (#123) subject, 2026-07-22`."""
        pr = f" (#{self.pr})" if self.pr is not None else ""
        subject = _PR_IN_SUBJECT.sub("", self.subject).strip()
        return f"{self.short}{pr} {subject}, {self.date.isoformat()}"


@dataclass(frozen=True)
class HistoryRange:
    """The range `base..head` of `repo`: its first-parent commits, oldest first, and the
    folder of the repository that holds the package sources (`source_dir`, '' for the top)."""

    repo: Path
    base: str
    head: str
    source_dir: str
    commits: tuple[HistoryCommit, ...]

    @property
    def candidates(self) -> tuple[HistoryCommit, ...]:
        return tuple(commit for commit in self.commits if commit.candidate)


@dataclass(frozen=True)
class HistoryRecipe:
    """A recipe drafted from history, as cached: its collection folder (on
    PRTOGGLE_YAML_PATH, the collection is the folder's name), the `-r` spec that names it,
    what it leaves as it is (`not_reverted`: 'file: reason'), and why there is no recipe
    (`nothing`: the diff has nothing revertible; then no spec)."""

    directory: Path
    spec: str
    not_reverted: tuple[str, ...] = ()
    nothing: str = ""
    cached: bool = False
    places: tuple[tuple[str, int], ...] = ()
    """(file, line) of each change left as it is, in the tree at `drafted_at`."""
    drafted_at: str = ""

    @property
    def whole(self) -> bool:
        return not self.not_reverted and not self.nothing


def read_range(repo: Path, spec: str, *, source_dir: str) -> HistoryRange:
    """The first-parent commits of `spec` (`A..B`) in `repo`, each a candidate or not.

    A candidate changes a `.py` file under `source_dir` that is not a test file (a `test`
    or `tests` folder, `test_*.py`, `*_test.py`, `conftest.py`).
    """
    if ".." not in spec or spec.count("..") != 1 or "..." in spec:
        raise CommandUsageError(
            f"--git {spec!r}: expected a range A..B (two commits of the repository, "
            "e.g. v0.5.16..v0.5.17 or 8905cbd42f..HEAD)"
        )
    left, right = spec.split("..")
    base = _rev(repo, left or "HEAD", option=spec)
    head = _rev(repo, right or "HEAD", option=spec)
    if _git(repo, "merge-base", "--is-ancestor", base, head, check=False) is None:
        raise CommandUsageError(
            f"--git {spec!r}: {left} is not an ancestor of {right or 'HEAD'} in {repo}; "
            "expected an older commit first"
        )
    log = _git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--no-renames",
        f"--format=%x1e%H{_FIELD}%ad{_FIELD}%s",
        "--date=short",
        "--name-only",
        f"{base}..{head}",
    )
    commits = tuple(
        _commit(block, source_dir) for block in (log or "").split("\x1e") if block.strip()
    )
    return HistoryRange(repo, base, head, source_dir.strip("/"), commits)


def suffix_recipe(
    history: HistoryRange,
    oldest: HistoryCommit,
    *,
    cache: Path,
    left_out: Mapping[str, str] | None = None,
    only: Collection[str] | None = None,
) -> HistoryRecipe:
    """The recipe reverting `oldest` and every commit after it up to the range's head: the
    diff from `oldest`'s first parent to the head, drafted on the head's tree (cached).

    `left_out`: files (under the source folder) whose changes stay, each with the reason
    listed in `not_reverted` (a file whose revert did not land at run time). `only`: the
    files the probe reverts (those its commits change); the diff's other files are not
    part of this recipe, by choice, so they are not listed."""
    key = f"{history.head[:12]}-from-{oldest.short}"
    if only is not None:
        key += "-only-" + hashlib.sha256("\n".join(sorted(only)).encode()).hexdigest()[:8]
    return _cached_recipe(
        history,
        cache=cache,
        left_out=left_out or {},
        only=only,
        key=key,
        diff_from=f"{oldest.sha}^",
        diff_to=history.head,
        pr=oldest.pr,
        title=f"Revert of {oldest.short}..{history.head[:12]} (git history)",
    )


def commit_recipe(
    history: HistoryRange,
    commit: HistoryCommit,
    *,
    cache: Path,
    left_out: Mapping[str, str] | None = None,
) -> HistoryRecipe:
    """The recipe reverting `commit` alone: its own diff, drafted on the tree at the commit
    (it applies to newer code only where no newer commit changed the same lines)."""
    return _cached_recipe(
        history,
        cache=cache,
        left_out=left_out or {},
        only=None,
        key=f"commit-{commit.short}",
        diff_from=f"{commit.sha}^",
        diff_to=commit.sha,
        pr=commit.pr,
        title=f"Revert of commit {commit.short}: {commit.subject}",
    )


def installed_module(history: HistoryRange, name: str) -> bool | None:
    """Whether the package at the range's head (the code a probe reverts) has module
    `name`; None for a module of another package."""
    return _head_modules(history.repo, history.head, history.source_dir).has(name)


def default_cache() -> Path:
    """Where drafted history recipes are kept: $PRTOGGLE_CACHE_DIR/history, else
    $XDG_CACHE_HOME/prtoggle/history, else ~/.cache/prtoggle/history. PRTOGGLE_CACHE_DIR=0
    (or `off`) keeps nothing: a scratch folder removed when the process exits."""
    explicit = os.environ.get("PRTOGGLE_CACHE_DIR")
    if explicit is not None and explicit.strip().lower() in ("0", "off"):
        scratch = Path(tempfile.mkdtemp(prefix="prtoggle-history-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        return scratch
    if explicit:
        return Path(explicit) / "history"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prtoggle" / "history"


def drafting_stamp() -> str:
    """A short hash of the drafting code: a cached draft is used only by the code that made it."""
    folder = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def stayed_commits(
    history: HistoryRange, recipe: HistoryRecipe, *, among: Sequence[HistoryCommit]
) -> list[HistoryCommit]:
    """The commits of `among` whose changes `recipe` leaves as they are: for each change
    left, the commit that last wrote its line (git blame), else every commit of `among`
    that changes its file."""
    by_sha = {commit.sha: commit for commit in among}
    found: dict[str, HistoryCommit] = {}
    lines: dict[str, set[int]] = {}
    for file, line in recipe.places:
        lines.setdefault(file, set()).add(line)
    authors = {
        (file, line): author
        for file, wanted in lines.items()
        for line, author in _blamed(history, recipe.drafted_at, file, wanted).items()
    }
    for file, line in recipe.places:
        author = authors.get((file, line), "")
        if author in by_sha:
            found[author] = by_sha[author]
            continue
        for commit in among:
            if file in commit.files:
                found[commit.sha] = commit
    return [commit for commit in among if commit.sha in found]


def git_bytes(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """What `git -C REPO ARGS` prints (with `stdin` fed to it); a failing git is a
    RegistryError naming the command and the repository."""
    return _run_git(repo, args, check=True, stdin=stdin) or b""


def _cached_recipe(
    history: HistoryRange,
    *,
    cache: Path,
    left_out: Mapping[str, str],
    only: Collection[str] | None,
    key: str,
    diff_from: str,
    diff_to: str,
    pr: int | None,
    title: str,
) -> HistoryRecipe:
    if left_out:
        listed = json.dumps(sorted(left_out.items())).encode()
        key += "-less-" + hashlib.sha256(listed).hexdigest()[:8]
    directory = cache / drafting_stamp() / key
    record = directory / "draft.json"
    collection = f"git-{key}"
    if record.is_file():
        cached = _read_record(record, directory / collection)
        if cached is not None:
            return replace(cached, cached=True)
    number = pr if pr is not None and MIN_PR <= pr <= MAX_PR else HISTORY_PR_FALLBACK
    out = directory / collection
    made = _draft(
        history, (diff_from, diff_to), left_out, only=only, out=out, pr=number, title=title
    )
    directory.mkdir(parents=True, exist_ok=True)
    _write_record(record, made)
    return made


def _draft(
    history: HistoryRange,
    between: tuple[str, str],
    left_out: Mapping[str, str],
    *,
    only: Collection[str] | None,
    out: Path,
    pr: int,
    title: str,
) -> HistoryRecipe:
    """Draft the diff `between` (from, to) of the package's non-test Python files (of
    `only`, when given), less `left_out`, on the tree at `to`, check it there and write it
    as OUT/<pr>.yaml."""
    diff_from, diff_to = between
    changed = [
        path
        for path in _changed(history, diff_from, diff_to)
        if path.endswith(".py") and not is_test_path(path) and (only is None or path in only)
    ]
    files = [path for path in changed if path not in left_out]
    kept_as_is = [(path, 0, left_out[path]) for path in changed if path in left_out]
    if not files:
        listed = tuple(f"{file}: {reason}" for file, _, reason in kept_as_is)
        places = tuple((file, line) for file, line, _ in kept_as_is)
        why = "; ".join(listed) or "no change of the package's Python source"
        return HistoryRecipe(out, "", listed, nothing=why, places=places, drafted_at=diff_to)
    diff = _git(
        history.repo,
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-renames",
        *([f"--relative={history.source_dir}"] if history.source_dir else []),
        diff_from,
        diff_to,
        "--",
        *(_in_repo(history, path) for path in files),
    )
    with tempfile.TemporaryDirectory(prefix="prtoggle-history-") as scratch:
        root = _extract(history, diff_to, files, into=Path(scratch))
        roots = [open_source_tree(root)]
        draft = draft_from_diff(diff or "", source=f"{diff_from}..{diff_to}", roots=roots)
        header = RecipeHeader(pr, title)
        checked = checked_recipe(
            header,
            draft,
            path=out / f"{pr}.yaml",
            roots=roots,
            has_module=lambda name: installed_module(history, name),
        )
        left: list[tuple[str, int, str]] = [
            (c.file, c.line, c.reason) for c in checked.not_reverted
        ]
        left += [(c.file, c.line, c.reason) for c in draft.skipped if c.file.endswith(".py")]
        left += kept_as_is
        listed = tuple(
            f"{file}:{line}: {reason}" if line else f"{file}: {reason}"
            for file, line, reason in left
        )
        places = tuple((file, line) for file, line, _ in left)
        if not checked.targets and not checked.names and not draft.added_modules:
            why = "; ".join(listed) or "nothing revertible"
            return HistoryRecipe(out, "", listed, nothing=why, places=places, drafted_at=diff_to)
        write_recipe(checked.text, out=out, pr=pr)
    return HistoryRecipe(out, f"{out.name}:{pr}", listed, places=places, drafted_at=diff_to)


@dataclass(frozen=True)
class _HeadModules:
    """The modules of the packages under the source folder at the range's head (the code
    a probe reverts): `has(name)` is None for a module of another package."""

    modules: frozenset[str]
    tops: frozenset[str]

    def has(self, name: str) -> bool | None:
        if name.split(".", 1)[0] not in self.tops:
            return None
        return name in self.modules


@functools.lru_cache(maxsize=8)
def _head_modules(repo: Path, head: str, source_dir: str) -> _HeadModules:
    where = [source_dir] if source_dir else []
    listed = _git(repo, "ls-tree", "-r", "--name-only", head, "--", *where) or ""
    modules: set[str] = set()
    for path in listed.splitlines():
        relative = _relative(source_dir, path)
        if not relative.endswith(".py"):
            continue
        parts = relative[: -len(".py")].split("/")
        if parts[-1] == "__init__":
            parts.pop()
        modules.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return _HeadModules(frozenset(modules), frozenset(m.split(".", 1)[0] for m in modules))


def _changed(history: HistoryRange, diff_from: str, diff_to: str) -> list[str]:
    """Paths (relative to the source folder) the diff changes under the source folder."""
    where = [history.source_dir] if history.source_dir else []
    out = _git(
        history.repo, "diff", "--no-renames", "--name-only", diff_from, diff_to, "--", *where
    )
    return [_relative(history.source_dir, line) for line in (out or "").splitlines() if line]


def _extract(history: HistoryRange, rev: str, files: Sequence[str], *, into: Path) -> Path:
    """The files of `rev` a draft reads (the changed `.py` files present at `rev` and the
    `__init__.py` of their folders), under the source folder, extracted to `into`."""
    tree = f"{rev}:{history.source_dir}" if history.source_dir else f"{rev}^{{tree}}"
    names = set((_git(history.repo, "ls-tree", "-r", "--name-only", tree) or "").splitlines())
    folders = {str(parent) for name in files for parent in PurePosixPath(name).parents}
    wanted = sorted(
        name
        for name in names
        if name in files
        or (name.endswith("/__init__.py") and str(PurePosixPath(name).parent) in folders)
    )
    if wanted:
        archive = git_bytes(history.repo, "archive", "--format=tar", tree, "--", *wanted)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")
    return into


def _commit(block: str, source_dir: str) -> HistoryCommit:
    header, _, names = block.strip("\n").partition("\n")
    sha, date, subject = header.split(_FIELD, 2)
    prefix = source_dir.strip("/")
    every = [name for name in names.splitlines() if name]
    inside = [
        _relative(prefix, name) for name in every if not prefix or name.startswith(prefix + "/")
    ]
    found = _PR_IN_SUBJECT.findall(subject)
    pr = int(found[-1]) if found else None
    why = _why_not(inside, every)
    return HistoryCommit(sha, subject, datetime.date.fromisoformat(date), pr, tuple(inside), why)


def _why_not(inside: Sequence[str], every: Sequence[str]) -> str:
    """Why a commit is not a candidate ('' when it is): by what its files are."""
    source = [name for name in inside if name.endswith(".py") and not is_test_path(name)]
    if source:
        return ""
    if not every:
        return "changes no file"
    if all(is_test_path(name) for name in every):
        return "test-only"
    if all(_is_doc(name) for name in every):
        return "docs-only"
    if any(name.endswith(".py") for name in every):
        return "Python outside the package or tests only"
    return "no Python change"


def _is_doc(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.suffix.lower() in _DOC_SUFFIXES or "docs" in pure.parts[:-1]


def _relative(prefix: str, path: str) -> str:
    return path[len(prefix) + 1 :] if prefix and path.startswith(prefix + "/") else path


def _in_repo(history: HistoryRange, path: str) -> str:
    return f"{history.source_dir}/{path}" if history.source_dir else path


def _read_record(record: Path, out: Path) -> HistoryRecipe | None:
    """The cached draft, or None when the record cannot be read or its recipe is gone."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        spec, listed, nothing = str(data["spec"]), data["not_reverted"], str(data["nothing"])
        places = tuple((str(file), int(line)) for file, line in data["places"])
        drafted_at = str(data["drafted_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if spec and not any(out.glob("*.yaml")):
        return None
    listed = tuple(str(item) for item in listed)
    return HistoryRecipe(out, spec, listed, nothing, places=places, drafted_at=drafted_at)


def _write_record(record: Path, made: HistoryRecipe) -> None:
    data = {
        "spec": made.spec,
        "not_reverted": list(made.not_reverted),
        "nothing": made.nothing,
        "places": [list(place) for place in made.places],
        "drafted_at": made.drafted_at,
    }
    scratch = record.with_name(f".{record.name}.{os.getpid()}")
    scratch.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(scratch, record)


def _blamed(history: HistoryRange, rev: str, file: str, lines: Collection[int]) -> dict[int, str]:
    """The commit that last wrote each of `lines` of `file` (under the source folder) at
    `rev`, along first parents (one git blame for them all; a line git cannot say is left
    out). Kept per process: `rev` is a commit, whose blame never changes."""
    key = (str(history.repo), rev, _in_repo(history, file))
    known = _BLAMES.setdefault(key, {})
    wanted = sorted(line for line in set(lines) if line >= 1 and line not in known)
    if rev and wanted:
        ranges = [arg for line in wanted for arg in ("-L", f"{line},{line}")]
        out = _git(
            history.repo,
            "blame",
            "--first-parent",
            "--porcelain",
            *ranges,
            rev,
            "--",
            key[2],
            check=False,
        )
        for header in (out or "").splitlines():
            fields = header.split(" ")
            if len(fields) >= 3 and _SHA.fullmatch(fields[0]) and fields[2].isdigit():
                known[int(fields[2])] = fields[0]  # <sha> <line then> <line now> [<count>]
        for line in wanted:
            known.setdefault(line, "")
    return {line: known[line] for line in lines if known.get(line)}


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_BLAMES: dict[tuple[str, str, str], dict[int, str]] = {}
"""_blamed's answers by (repository, commit, file): line -> commit ('' where git could not say)."""


def _rev(repo: Path, rev: str, *, option: str) -> str:
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if not sha:
        raise CommandUsageError(
            f"--git {option!r}: {rev!r} is not a commit of {repo}; expected a commit, "
            "branch or tag of that repository (--repo)"
        )
    return sha.strip()


def _git(repo: Path, *args: str, check: bool = True) -> str | None:
    done = _run_git(repo, args, check=check)
    return None if done is None else done.decode("utf-8", errors="replace")


def _run_git(
    repo: Path, args: Sequence[str], *, check: bool, stdin: bytes | None = None
) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            check=False,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RegistryError(f"git {' '.join(args[:2])} in {repo}: {exc}") from exc
    if done.returncode != 0:
        if not check:
            return None
        message = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        said = message[-1] if message else f"exit {done.returncode}"
        raise RegistryError(
            f"git {' '.join(args[:2])} in {repo} failed: {said}"
            "; expected a git repository holding the range (--repo)"
        )
    return done.stdout
