"""Shared pieces of the click CLI: error reporting, registry access, -r parsing, output."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from prtoggle.errors import PrToggleError

if TYPE_CHECKING:
    from prtoggle.check import TargetCheck
    from prtoggle.registry import Fix, Registry

EXIT_NEGATIVE = 1
"""The command ran and its answer is no: a check failed, a fix did not reproduce, ..."""
EXIT_ERROR = 2
"""Bad input or a prtoggle error (`error: <message>` on stderr); click usage errors too."""

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A PrToggleError on its way out: printed as `error: <message>`, exit status 2."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class PrToggleGroup(click.Group):
    """A click group that turns every PrToggleError into a one-line error, no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PrToggleError as exc:
            raise CliError(str(exc)) from exc


def json_option(function: F) -> F:
    """The `--json` flag of listing commands."""
    option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
    return option(function)


def collection_option(function: F) -> F:
    """The `--collection NAME` option of commands that select fixes."""
    option = click.option(
        "--collection",
        "collection",
        default=None,
        metavar="NAME",
        help="Only the fixes of this recipe collection (a recipe directory's name).",
    )
    return option(function)


def load_default_registry(*, collection: str | None = None) -> Registry:
    """The shipped collections plus PRTOGGLE_YAML_PATH, restricted to `collection` if given.

    Raises RegistryError / UnknownPRError (an unknown collection lists the known ones);
    the command group prints them as one `error:` line.
    """
    from prtoggle.registry import default_registry

    return default_registry().in_collection(collection)


def parse_revert_options(
    values: Sequence[str], registry: Registry, *, option: str = "-r"
) -> tuple[int, ...]:
    """Every `-r` value parsed like SGLANG_DEBUG_REVERT_PR, merged and sorted."""
    from prtoggle.toggle import parse_revert_spec

    prs: set[int] = set()
    for value in values:
        prs.update(parse_revert_spec(value, registered=registry.prs(), source=option))
    return tuple(sorted(prs))


def selected_fixes(registry: Registry, prs: Sequence[int]) -> list[Fix]:
    """The fixes named by `prs`, in every collection (all fixes when empty); unknown: error."""
    if not prs:
        return list(registry.fixes)
    return [fix for pr in dict.fromkeys(prs) for fix in registry.find(pr)]


def import_free_source_root(fix: Fix) -> Path | None:
    """The directory holding the top-level package of the fix's targets, found without import.

    Lets `list`, `show` and `bisect` read target sources as files, so they never import the
    patched code (nor torch). None when that package cannot be found.
    """
    top_levels = {patch.target.split(".", 1)[0] for patch in fix.patches}
    roots = {_package_root(name) for name in sorted(top_levels)}
    if len(roots) != 1 or None in roots:
        return None
    return roots.pop()


def refuse_absent_packages(fix: Fix) -> None:
    """Raise when a target's top-level package is not installed here (absent)."""
    from prtoggle.errors import TargetResolutionError

    top_levels = {patch.target.split(".", 1)[0] for patch in fix.patches}
    absent = sorted(name for name in top_levels if importlib.util.find_spec(name) is None)
    if absent:
        raise TargetResolutionError(
            f"PR {fix.pr} ({fix.collection}): package {', '.join(absent)} is not installed "
            "here, so there is no source to diff; `prtoggle check --source-root DIR` reads "
            "a source tree instead"
        )


def check_without_import(registry: Registry, fixes: Iterable[Fix]) -> dict[int, list[TargetCheck]]:
    """check_fixes for each fix against the source files of its package, per PR.

    The checks of a PR's fixes in several collections are listed together. A fix whose
    package cannot be found gives one failed check per target saying so.
    """
    results: dict[int, list[TargetCheck]] = {}
    for fix, checks in checks_per_fix(registry, fixes).items():
        results.setdefault(fix.pr, []).extend(checks)
    return results


def checks_per_fix(registry: Registry, fixes: Iterable[Fix]) -> dict[Fix, list[TargetCheck]]:
    """check_fixes for each fix, in its own collection, against its package's files."""
    from prtoggle.check import TargetCheck, check_fixes

    results: dict[Fix, list[TargetCheck]] = {}
    for fix in fixes:
        root = import_free_source_root(fix)
        if root is None:
            results[fix] = [
                TargetCheck(
                    pr=fix.pr,
                    target=patch.target,
                    ok=False,
                    message=f"package of {patch.target} not found on sys.path",
                )
                for patch in fix.patches
            ]
            continue
        scope = registry.in_collection(fix.collection)
        results[fix] = check_fixes(registry=scope, source_root=root, prs=[fix.pr])
    return results


def select_fixes_having(
    registry: Registry, prs: Sequence[int], *, run_all: bool, key: str, what: str
) -> list[Fix]:
    """The fixes named by PRS or --all that set YAML key `key` (`what`).

    A PR number names its fixes in every collection (narrow `registry` with
    `--collection`); those without `key` are left out, and a PR none of whose fixes has
    it is an error.
    """
    having = [fix for fix in registry.fixes if getattr(fix, key)]
    choices = join_prs(dict.fromkeys(fix.pr for fix in having))
    if run_all and prs:
        raise click.UsageError("give PR numbers or --all, not both")
    if run_all:
        if not having:
            raise click.UsageError(f"no registered fix has a {what} (`{key}:` in its YAML)")
        return having
    if not prs:
        raise click.UsageError(f"expected PR numbers or --all; fixes with a {what}: {choices}")
    fixes = []
    for pr in dict.fromkeys(prs):
        found = registry.find(pr)
        kept = [fix for fix in found if getattr(fix, key)]
        if not kept:
            files = ", ".join(str(fix.path) for fix in found)
            raise click.UsageError(
                f"PR {pr} has no {what} (no `{key}:` in {files}); fixes with a {what}: {choices}"
            )
        fixes.extend(kept)
    return fixes


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def join_prs(prs: Iterable[int]) -> str:
    text = ", ".join(str(pr) for pr in prs)
    return text or "none"


def _package_root(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).parent
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin).parent
    return None
