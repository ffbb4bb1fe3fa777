"""`prtoggle new`: write a revert recipe from a fix's diff (--from-diff) or commit (--from-git)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from prtoggle.cli.common import (
    EXIT_NEGATIVE,
    EXIT_STATUS_HELP,
    echo_json,
    json_option,
    recipe_out_option,
)
from prtoggle.commands.new import (
    NewRecipe,
    diff_header,
    draft_from_git,
    new_from_diff,
    source_roots,
)
from prtoggle.recipes.authoring.from_diff import NotRevertedChange, SkippedChange
from prtoggle.recipes.authoring.statements import defined_names

_EPILOG = """\b
Each function changed on both sides gets edits back to its pre-fix text (byte
for byte); names the fix added are removed, names it changed or removed are
defined from their pre-fix statements (`names`); what a run-time revert cannot
make (other module-level code, dataclass fields, class headers, decorators not
re-applied soundly, test modules added whole) is listed in `not_reverted` with
file, line, code and reason; modules the fix added under the source root are
listed in `added_modules` (reverted, they cannot be imported). Files outside
the source root are skipped, never read.
The patches are written only once they check ok on the source root. A commit
(--from-git, or a diff with git's commit header: `git show`, `git format-patch`)
gives the PR (the last `(#123)` of its subject), the title (the subject without
it) and the merged date (its author date), unless --pr or --title say; else --pr
is required. Exit status 0 the recipe is whole; 1 written, but partial or with
files skipped; 2 bad input (unreadable diff, nothing in the source root, no PR).

\b
Examples:
  git diff v0.5.22 v0.5.23 -- python/ > fix.diff
  prtoggle new --from-diff fix.diff --pr 27338 --source-root sglang-0.5.23.whl
  git -C ../sglang show 1a2b3c | prtoggle new --from-diff - --out yaml/mine
  prtoggle new --from-git 1a2b3c --repo ../sglang --out yaml/mine --json
"""


@click.command("new", epilog=EXIT_STATUS_HELP + _EPILOG)
@click.option(
    "--from-diff",
    "diff_file",
    metavar="FILE",
    help="A unified diff of the fix as git writes it (git diff, git show, git format-patch); "
    "- reads stdin.",
)
@click.option("--from-git", "rev", metavar="REV", help="The commit REV of a git checkout.")
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The checkout for --from-git (default: the current directory).",
)
@click.option(
    "--source-root",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The post-fix code: a directory, wheel or sdist (default: the installed packages; "
    "with --from-git the checkout at REV).",
)
@click.option(
    "--pr",
    type=click.IntRange(min=1, max=10_000_000),
    default=None,
    help="The fix's PR number, 1..10000000 (default: the (#123) of the commit's subject).",
)
@click.option(
    "--title",
    default=None,
    help="The recipe's title (default: the commit's subject, else names the changed files).",
)
@click.option("--url", default=None, help="The fix's URL.")
@recipe_out_option
@json_option
def new_command(**options: Any) -> None:
    """Write a revert recipe drafted from a fix: its diff (--from-diff) or commit (--from-git)."""
    diff_file, rev = options["diff_file"], options["rev"]
    if (diff_file is None) == (rev is None):
        raise click.UsageError("give one of --from-diff FILE or --from-git REV")
    header_options = {key: options[key] for key in ("pr", "title", "url")}
    if rev is not None:
        text, source, header, roots = draft_from_git(
            rev, repo=options["repo"], source_root=options["source_root"], **header_options
        )
    else:
        text, source = _read_diff(diff_file)
        header = diff_header(text, source, **header_options)
        roots = source_roots(options["source_root"])
    made = new_from_diff(text, source=source, roots=roots, header=header, out=options["out"])
    _print_written(made, as_json=options["as_json"])
    if not made.whole:
        sys.exit(EXIT_NEGATIVE)


def _read_diff(name: str) -> tuple[str, str]:
    if name == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(name).read_text(encoding="utf-8"), name
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(
            f"cannot read {name}: {exc}; expected a unified diff file or - for stdin",
            param_hint="'--from-diff'",
        ) from exc


def _print_written(made: NewRecipe, *, as_json: bool) -> None:
    skipped = [
        {"file": change.file, "line": change.line, "reason": change.reason}
        for change in made.skipped
    ]
    not_reverted = [
        {"file": c.file, "line": c.line, "code": c.code, "reason": c.reason}
        for c in made.not_reverted
    ]
    names = [{"scope": n.scope, "define": n.define, "remove": list(n.remove)} for n in made.names]
    if as_json:
        record = {"pr": made.pr, "file": str(made.path), "targets": list(made.targets)}
        record |= {"names": names, "added_modules": list(made.added_modules)}
        record |= {"not_reverted": not_reverted, "skipped": skipped}
        echo_json({**record, "guards": list(made.guards)})
        return
    count = len(made.targets)
    click.echo(f"wrote {made.path}: {count} target{'s' if count != 1 else ''}")
    for target in made.targets:
        click.echo(f"  {target}")
    for entry in made.names:
        defined = ", ".join(sorted(_bound(entry.define)))
        removed = ", ".join(entry.remove)
        parts = [f"define {defined}" if defined else "", f"remove {removed}" if removed else ""]
        click.echo(f"  names in {entry.scope}: {'; '.join(p for p in parts if p)}")
    if made.added_modules:
        added = ", ".join(made.added_modules)
        click.echo(f"  modules the fix added (not importable reverted): {added}")
    _listing(f"not reverted (partial recipe): {len(not_reverted)}", made.not_reverted)
    _listing(f"skipped {len(skipped)} change{'s' if len(skipped) != 1 else ''}:", made.skipped)
    if made.guards:
        click.echo(f"guards (tests the fix added or changed): {len(made.guards)}")
    for guard in made.guards:
        click.echo(f"  {guard}")


def _listing(title: str, changes: Sequence[SkippedChange | NotRevertedChange]) -> None:
    if changes:
        click.echo(title)
    for change in changes:
        click.echo(f"  {change.file}:{change.line}: {change.reason}")


def _bound(define: str) -> list[str]:
    return defined_names(define)
