"""A commit of a git checkout as `new --from-git` reads it: diff, PR, title, date, forge URL."""

from __future__ import annotations

import atexit
import datetime
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from prtoggle.patching.source_files import SourceTree, open_source_tree
from prtoggle.recipes.authoring.diff import DiffError

_PR_IN_SUBJECT = re.compile(r"\s*\(#(\d+)\)")
_FORGES = {
    "github.com": "{base}/pull/{pr}",
    "gitlab.com": "{base}/-/merge_requests/{pr}",
}
_REMOTE = re.compile(r"^(?:https?://|ssh://)?(?:[^@/]+@)?([^:/]+)[:/](.+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Commit:
    """One commit: its full hash, subject, author date, remote URL and diff against its parent."""

    sha: str
    subject: str
    date: datetime.date
    remote: str | None
    diff: str

    @property
    def pr(self) -> int | None:
        found = _PR_IN_SUBJECT.search(self.subject)
        return int(found.group(1)) if found else None

    @property
    def title(self) -> str:
        return _PR_IN_SUBJECT.sub("", self.subject).strip()

    def url(self, pr: int) -> str | None:
        """The PR's page when the remote is on a known forge (GitHub, GitLab)."""
        found = _REMOTE.match(self.remote or "")
        if found is None or found.group(1) not in _FORGES:
            return None
        base = f"https://{found.group(1)}/{found.group(2)}"
        return _FORGES[found.group(1)].format(base=base, pr=pr)


def commit_of(repo: Path, rev: str) -> Commit:
    """Read commit `rev` of the checkout `repo` (DiffError when git cannot)."""
    sha = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    subject, date = _git(repo, "log", "-1", "--format=%s%n%ad", "--date=short", sha).split("\n")[:2]
    diff = _git(repo, "diff", "--no-color", "--no-ext-diff", "--no-renames", f"{sha}^", sha)
    remote = _git(repo, "remote", "get-url", "origin", check=False).strip() or None
    return Commit(sha, subject, datetime.date.fromisoformat(date), remote, diff)


def tree_at(repo: Path, commit: Commit) -> SourceTree:
    """The checkout's files at `commit` that a draft reads: the changed `.py` files and the
    `__init__.py` of their folders, extracted to a scratch folder removed at exit."""
    names = _git(repo, "ls-tree", "-r", "--name-only", commit.sha).splitlines()
    changed = {line[6:] for line in commit.diff.splitlines() if line.startswith("+++ b/")}
    folders = {str(parent) for name in changed for parent in PurePosixPath(name).parents}
    wanted = [
        name
        for name in names
        if name in changed
        or (name.endswith("/__init__.py") and str(PurePosixPath(name).parent) in folders)
    ]
    scratch = Path(tempfile.mkdtemp(prefix="prtoggle-git-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    if wanted:
        archive = _git_bytes(repo, "archive", "--format=tar", commit.sha, "--", *wanted)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(scratch, filter="data")
    return open_source_tree(scratch)


def _git(repo: Path, *args: str, check: bool = True) -> str:
    return _git_bytes(repo, *args, check=check).decode("utf-8", errors="replace")


def _git_bytes(repo: Path, *args: str, check: bool = True) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except OSError as exc:
        raise DiffError(f"cannot run git: {exc}; expected git on PATH") from exc
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise DiffError(
            f"git {' '.join(args[:2])} in {repo} failed: {message[-1] if message else '?'}; "
            "expected a git checkout and a commit with a parent"
        )
    return done.stdout
