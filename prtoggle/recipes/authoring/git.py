"""A commit as `new` reads it, from a checkout or a `git show` text: diff, PR, title, date, URL."""

from __future__ import annotations

import atexit
import datetime
import email.parser
import email.policy
import email.utils
import io
import itertools
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
_SHOW_LINE = re.compile(r"commit ([0-9a-f]{7,64})\b")
_MBOX_LINE = re.compile(r"From ([0-9a-f]{7,64}) ")
_PATCH_TAG = re.compile(r"^\[[^\]]*PATCH[^\]]*\]\s*")


@dataclass(frozen=True)
class Commit:
    """One commit: its full hash, subject, author date, remote URL and diff against its parent."""

    sha: str
    subject: str
    date: datetime.date | None
    remote: str | None
    diff: str

    @property
    def pr(self) -> int | None:
        """The last `(#N)` of the subject: the PR merged (earlier ones name PRs it refers to)."""
        found = self._last_pr()
        return int(found.group(1)) if found else None

    @property
    def title(self) -> str:
        """The subject without its last `(#N)`."""
        found = self._last_pr()
        if found is None:
            return self.subject.strip()
        return (self.subject[: found.start()] + self.subject[found.end() :]).strip()

    def url(self, pr: int) -> str | None:
        """The PR's page when the remote is on a known forge (GitHub, GitLab)."""
        found = _REMOTE.match(self.remote or "")
        if found is None or found.group(1) not in _FORGES:
            return None
        base = f"https://{found.group(1)}/{found.group(2)}"
        return _FORGES[found.group(1)].format(base=base, pr=pr)

    def _last_pr(self) -> re.Match[str] | None:
        matches = list(_PR_IN_SUBJECT.finditer(self.subject))
        return matches[-1] if matches else None


def commit_of(repo: Path, rev: str) -> Commit:
    """Read commit `rev` of the checkout `repo` (DiffError when git cannot)."""
    sha = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    subject, date = _git(repo, "log", "-1", "--format=%s%n%ad", "--date=short", sha).split("\n")[:2]
    diff = _git(repo, "diff", "--no-color", "--no-ext-diff", "--no-renames", f"{sha}^", sha)
    remote = _git(repo, "remote", "get-url", "origin", check=False).strip() or None
    return Commit(sha, subject, datetime.date.fromisoformat(date), remote, diff)


def commit_of_patch(text: str) -> Commit | None:
    """The commit a `git show` or `git format-patch` text starts with: its hash, subject
    (git's: the message's first paragraph, `[PATCH ...]` dropped) and author date (None
    when unreadable); None when the text starts with neither header. No remote."""
    lines = text.splitlines()
    first = lines[0] if lines else ""
    shown, mailed = _SHOW_LINE.match(first), _MBOX_LINE.match(first)
    if shown is not None:
        sha, (subject, date) = shown.group(1), _shown_header(lines[1:])
    elif mailed is not None:
        sha, (subject, date) = mailed.group(1), _mailed_header(lines[1:])
    else:
        return None
    return Commit(sha, subject, _date(date), None, text)


def tree_at(repo: Path, commit: Commit) -> SourceTree:
    """The checkout's files at `commit` that a draft reads: the changed `.py` files and the
    `__init__.py` of their folders (and of a deleted file's), extracted to a scratch folder
    removed at exit."""
    names = _git(repo, "ls-tree", "-r", "--name-only", commit.sha).splitlines()
    changed = {line[6:] for line in commit.diff.splitlines() if line.startswith("+++ b/")}
    deleted = {line[6:] for line in commit.diff.splitlines() if line.startswith("--- a/")}
    folders = {str(parent) for name in changed | deleted for parent in PurePosixPath(name).parents}
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


def _shown_header(lines: list[str]) -> tuple[str, str]:
    """Subject and date of `git show`'s header: `Date:` lines, then the indented message."""
    headers = list(itertools.takewhile(str.strip, lines))
    dates = [line.split(":", 1)[1] for line in headers if line.startswith(("Date:", "AuthorDate:"))]
    message = itertools.dropwhile(lambda line: not line.strip(), lines[len(headers) :])
    paragraph = itertools.takewhile(lambda line: line.startswith("    ") and line.strip(), message)
    return " ".join(line.strip() for line in paragraph), dates[0] if dates else ""


def _mailed_header(lines: list[str]) -> tuple[str, str]:
    """Subject and date of `git format-patch`'s mail header (folded lines joined)."""
    block = "\n".join(itertools.takewhile(str.strip, lines))
    header = email.parser.HeaderParser(policy=email.policy.default).parsestr(block)
    return _PATCH_TAG.sub("", str(header.get("subject", ""))).strip(), str(header.get("date", ""))


def _date(value: str) -> datetime.date | None:
    """The date of a commit header's date, as git writes it by default, RFC 2822 or ISO."""
    value = value.strip()
    try:
        if re.match(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.date.fromisoformat(value[:10])
        return email.utils.parsedate_to_datetime(value).date()
    except (TypeError, ValueError):
        return None


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
