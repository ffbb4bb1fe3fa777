"""`prtoggle check`: do the reverts still apply, to the imported code or to source trees?"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from prtoggle.cli.common import (
    EXIT_NEGATIVE,
    EXIT_STATUS_HELP,
    TABLE_WIDTH,
    collection_option,
    echo_json,
    format_table,
    json_option,
    wide_option,
)
from prtoggle.cli.output import Cut, cut_cell, plural
from prtoggle.commands.check import check_failed, check_recipes
from prtoggle.recipes.check import TargetCheck

_RELEASE = re.compile(r"([A-Za-z0-9_.]+?)-(\d[^-]*?)(?:-.*\.whl|\.tar\.gz|\.tgz|\.zip)$")
"""`dist-version-....whl` or `dist-version.tar.gz`: a release archive's name."""

_EPILOG = """\b
Status per target: ok; stale (a match is not found exactly once, or the target
is gone: the code moved on); absent (its top-level package is neither installed
nor in the working directory, or not in the tree); not-applicable (the recipe's
applies_to range excludes the tree's version, read from its dist-info METADATA,
PKG-INFO or pyproject.toml, or the installed version; never a failure); error
(the edit cannot take effect or does not compile, the module fails to import,
...). Exit status 1 when any target is stale or in error, or absent where PRs
are named (or --strict), or when every target is absent. A --source-root that
holds none of the recipes' packages is an error (exit 2).

\b
Examples:
  prtoggle check
  prtoggle check 26521 24856
  prtoggle check --source-root ../sglang/python --json
  pip download --no-deps sglang==0.5.22 -d wheels
  pip download --no-deps sglang==0.5.23 -d wheels
  prtoggle check --collection sglang \\
    --source-root wheels/sglang-0.5.22-cp311-cp311-manylinux_2_34_x86_64.whl \\
    --source-root wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
"""


@click.command("check", epilog=EXIT_STATUS_HELP + _EPILOG)
@click.option(
    "--source-root",
    "source_roots",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Check the targets in DIR, a wheel or an sdist, without importing them; "
    "repeat for a recipe x tree matrix.",
)
@collection_option
@click.option("--strict", is_flag=True, help="A target whose package is absent is a failure.")
@wide_option
@json_option
@click.argument("prs", nargs=-1, type=int)
def check_command(
    *,
    source_roots: tuple[Path, ...],
    collection: str | None,
    strict: bool,
    wide: bool,
    as_json: bool,
    prs: tuple[int, ...],
) -> None:
    """Check that every revert of the given PRs (default: all) applies cleanly.

    Without --source-root the target modules are imported and checked as loaded. The
    installed sglang's own recipes (sglang-upstream: sglang's text, not ours to keep up)
    are checked with --collection sglang-upstream only.
    """
    run = check_recipes(prs, source_roots=source_roots, collection=collection)
    checks = run.checks
    if as_json:
        echo_json([_check_record(check) for check in checks])
    elif len(run.tree_labels) > 1:
        _print_matrix(checks, run.tree_labels, wide=wide)
    else:
        bare = not (prs or collection or source_roots)
        _print_rows(checks, fix_count=run.fix_count, fold_absent=bare)
    if not as_json:
        _print_rebase_hints(checks, source_roots)
    if check_failed(checks, strict=strict or bool(prs)):
        sys.exit(EXIT_NEGATIVE)


def _print_rows(checks: Sequence[TargetCheck], *, fix_count: int, fold_absent: bool) -> None:
    """One row per target, then the counts. `fold_absent` (a bare `check`): a collection
    none of whose packages is installed here is one line, not a row per target."""
    folded = _absent_collections(checks) if fold_absent else {}
    if folded and len(folded) == len({check.collection for check in checks}):
        click.echo(f"nothing checked, no package installed here: {_folded(folded)}")
        return
    checks = [check for check in checks if check.collection not in folded]
    show_collection = len({check.collection for check in checks}) > 1
    for check in checks:
        where = f"{check.collection}  " if show_collection else ""
        verdict = _verdict(check)
        target = check.target
        if check.ok:  # a passing row fits TABLE_WIDTH: a long target loses its start
            room = TABLE_WIDTH - len(f"{check.pr}  {where}: {verdict}")
            target = cut_cell(target, max(room, len("TARGET")), "start")
        click.echo(f"{check.pr}  {where}{target}: {verdict}")
    ok = sum(check.ok for check in checks)
    absent = sum(check.status == "absent" for check in checks)
    other = sum(check.status == "not-applicable" for check in checks)
    parts = [
        f"{ok} of {plural(len(checks), 'target')} of {plural(fix_count, 'fix')} revert cleanly"
    ]
    if absent:
        parts.append(f"{absent} absent (package not installed)")
    if other:
        parts.append(f"{other} not applicable (version outside applies_to)")
    click.echo("; ".join(parts))
    if folded:
        click.echo(f"not checked, package not installed here: {_folded(folded)}")


def _absent_collections(checks: Sequence[TargetCheck]) -> dict[str, set[str]]:
    """Collection -> its packages, for each collection every target of which is absent."""
    packages: dict[str, set[str]] = {}
    present: set[str] = set()
    for check in checks:
        packages.setdefault(check.collection, set()).add(check.target.split(".", 1)[0])
        if check.status != "absent":
            present.add(check.collection)
    return {name: found for name, found in packages.items() if name not in present}


def _folded(absent: Mapping[str, set[str]]) -> str:
    return ", ".join(
        f"{name} (package {', '.join(sorted(found))})" for name, found in sorted(absent.items())
    )


def _print_matrix(checks: Sequence[TargetCheck], sources: Sequence[str], *, wide: bool) -> None:
    """Lines fit TABLE_WIDTH unless `wide`: a long TARGET or tree label loses its start."""
    labels = _short_labels(sources)
    cells: dict[tuple[int, str, str], dict[str, str]] = {}
    for check in checks:
        key = (check.pr, check.collection, check.target)
        cells.setdefault(key, {})[check.source or ""] = check.status
    rows = [
        [str(pr), collection or "-", target, *(cells[(pr, collection, target)][s] for s in sources)]
        for pr, collection, target in cells
    ]
    cut: dict[int, Cut] = dict.fromkeys(range(2, 3 + len(labels)), "start")
    width = None if wide else TABLE_WIDTH
    click.echo(format_table(["PR", "COLLECTION", "TARGET", *labels], rows, width=width, cut=cut))
    for check in checks:
        if not check.ok:
            first = check.reason.splitlines()[0] if check.reason else ""
            label = labels[list(sources).index(check.source or "")]
            click.echo(f"{label}: {check.pr}  {check.target}: {check.status}: {first}")


def _print_rebase_hints(checks: Sequence[TargetCheck], source_roots: Sequence[Path]) -> None:
    """For each stale recipe, the `prtoggle rebase` command that proposes an update."""
    stale = dict.fromkeys((c.pr, c.collection, c.source) for c in checks if c.status == "stale")
    for pr, collection, source in stale:
        where = f" --source-root {source}" if source is not None and source_roots else ""
        click.echo(
            f"hint: `prtoggle rebase {pr} --collection {collection}{where}` proposes an "
            "updated recipe for the stale one"
        )


def _short_labels(sources: Sequence[str]) -> list[str]:
    """File names; the versions alone when each is a release archive of one distribution."""
    names = [Path(source).name for source in sources]
    if len(set(names)) != len(names):
        return list(sources)
    releases = [_RELEASE.match(name) for name in names]
    if all(releases) and len({r.group(1) for r in releases if r}) == 1:
        versions = [r.group(2) for r in releases if r]
        if len(set(versions)) == len(versions):
            return versions
    return names


def _verdict(check: TargetCheck) -> str:
    if check.ok:
        return f"ok (defined as {check.found_as})" if check.found_as else "ok"
    label = {
        "stale": "STALE",
        "error": "FAILED",
        "absent": "absent",
        "not-applicable": "not applicable",
    }[check.status]
    return f"{label}: {check.reason}"


def _check_record(check: TargetCheck) -> dict[str, Any]:
    record: dict[str, Any] = {
        "pr": check.pr,
        "collection": check.collection,
        "target": check.target,
        "ok": check.ok,
        "status": check.status,
        "message": check.message,
    }
    if check.source is not None:
        record["source"] = check.source
    if check.found_as is not None:
        record["found_as"] = check.found_as
    return record
