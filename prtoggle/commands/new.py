"""`new`: a whole-fix recipe drafted from a diff, checked, and written as OUT/<PR>.yaml."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import CommandUsageError, RegistryError
from prtoggle.patching.source_files import SourceTree, open_source_tree
from prtoggle.recipes.authoring.from_diff import (
    DraftNames,
    NotRevertedChange,
    SkippedChange,
    draft_from_diff,
)
from prtoggle.recipes.authoring.git import Commit, commit_of, commit_of_patch, tree_at
from prtoggle.recipes.authoring.modules import installed_roots
from prtoggle.recipes.authoring.recipe_file import (
    RecipeHeader,
    checked_recipe,
    recipe_destination,
    write_recipe,
)
from prtoggle.recipes.schema import MAX_PR, MIN_PR


class NothingPlaceable(RegistryError):
    """No change of the diff is in the source root's Python code, or none can be reverted:
    no recipe to write."""


@dataclass(frozen=True)
class NewRecipe:
    """What `new` wrote: the file, its targets (dotted names), its `names` entries, what it
    lists as not reverted, the changes skipped (outside the source root, never run), and
    the tests the fix added or changed (`guards`)."""

    pr: int
    path: Path
    targets: tuple[str, ...]
    names: tuple[DraftNames, ...]
    not_reverted: tuple[NotRevertedChange, ...]
    skipped: tuple[SkippedChange, ...]
    guards: tuple[str, ...] = ()
    added_modules: tuple[str, ...] = ()
    """Modules the fix added: refused (not importable) while it is reverted."""

    @property
    def whole(self) -> bool:
        """Every change of the package's Python code is reverted, nothing skipped."""
        return not self.not_reverted and not self.skipped


def default_title(files: Sequence[str]) -> str:
    """`Revert of <file>` (and how many more files the diff changes)."""
    if not files:
        return "Revert"
    more = len(files) - 1
    tail = f" and {more} more file{'s' if more > 1 else ''}" if more else ""
    return f"Revert of {files[0]}{tail}"


def new_from_diff(
    text: str,
    *,
    source: str,
    roots: Sequence[SourceTree],
    header: RecipeHeader,
    out: Path,
) -> NewRecipe:
    """Draft, check and write the recipe of diff `text`; NothingPlaceable when the diff
    changes nothing of the Python code under the source root, or nothing of it can be
    reverted (a recipe of `not_reverted` alone would not load: it reverts nothing).

    `header.title` empty: the default title naming the changed files. A destination that
    cannot be written (see recipe_destination) is refused before the diff is read.
    """
    if not MIN_PR <= header.pr <= MAX_PR:
        raise RegistryError(
            f"PR {header.pr} (of {source}): outside the supported range {MIN_PR}..{MAX_PR}; "
            "expected the fix's PR number"
        )
    destination = recipe_destination(out, header.pr)
    draft = draft_from_diff(text, source=source, roots=roots)
    if not header.title:
        header = RecipeHeader(header.pr, default_title(draft.files), header.url, header.merged)
    checked = checked_recipe(header, draft, path=destination, roots=roots)
    added = tuple(draft.added_modules)
    if not checked.targets and not checked.names and not checked.not_reverted and not added:
        left = draft.skipped
        reasons = sorted({change.reason for change in left}) or ["the diff changes nothing"]
        raise NothingPlaceable(
            f"{source}: nothing placeable: {len(left)} change(s) skipped "
            f"({'; '.join(reasons)}); expected a change of the Python code under the source "
            "root (--source-root)"
        )
    if not checked.targets and not checked.names and not added:
        listed = checked.not_reverted
        reasons = sorted({change.reason for change in listed})
        raise NothingPlaceable(
            f"{source}: nothing revertible: {len(listed)} change(s) cannot be reverted "
            f"({'; '.join(reasons)}); no recipe written: a recipe reverts something "
            "(patches or names)"
        )
    path = write_recipe(checked.text, out=out, pr=header.pr)
    targets = tuple(t.target for t in checked.targets)
    skipped = tuple(draft.skipped)
    return NewRecipe(
        header.pr,
        path,
        targets,
        checked.names,
        checked.not_reverted,
        skipped,
        guards=tuple(draft.guards),
        added_modules=added,
    )


def draft_from_git(
    rev: str,
    *,
    repo: Path | None,
    source_root: Path | None,
    pr: int | None,
    title: str | None,
    url: str | None,
) -> tuple[str, str, RecipeHeader, list[SourceTree]]:
    """Commit `rev` of `repo` (default: the working directory): its diff, where it comes
    from, the recipe's header and the trees to place it in (`source_root`, else the tree
    at the commit)."""
    repo = repo or Path.cwd()
    commit = commit_of(repo, rev)
    header = commit_header(commit, rev, pr=pr, title=title, url=url)
    roots = [open_source_tree(source_root)] if source_root is not None else [tree_at(repo, commit)]
    return commit.diff, f"{rev} of {repo}", header, roots


def diff_header(
    text: str, source: str, *, pr: int | None, title: str | None, url: str | None
) -> RecipeHeader:
    """--pr, --title and --url; what they leave out from the diff's `git show` or `git
    format-patch` header, when it has one."""
    commit = commit_of_patch(text)
    if commit is not None:
        return commit_header(commit, source, pr=pr, title=title, url=url)
    if pr is None:
        raise CommandUsageError("--pr is required with --from-diff (the fix's PR number)")
    return RecipeHeader(pr, title or "", url)


def commit_header(
    commit: Commit, where: str, *, pr: int | None, title: str | None, url: str | None
) -> RecipeHeader:
    """PR, title and merged date from the commit's subject and date, unless --pr/--title
    say; the URL from --url, else the forge of the commit's remote."""
    pr = pr or commit.pr
    if pr is None:
        raise CommandUsageError(
            f"--pr is required: the subject of {where} ({commit.subject!r}) has no (#<number>)"
        )
    return RecipeHeader(pr, title or commit.title, url or commit.url(pr), commit.date)


def source_roots(source_root: Path | None) -> list[SourceTree]:
    """The trees a diff is placed in: `source_root`, else the installed packages' roots."""
    return [open_source_tree(source_root)] if source_root is not None else installed_roots()
