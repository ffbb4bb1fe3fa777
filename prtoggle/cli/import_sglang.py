"""`prtoggle import-sglang`: write sglang's registered revert recipes as recipe files."""

from __future__ import annotations

from pathlib import Path

import click

from prtoggle.cli.common import echo_json, json_option
from prtoggle.commands.import_sglang import import_sglang_recipes

_EPILOG = """\b
sglang's pr_fix_toggle.py is parsed, never imported (default: the installed
sglang's, located without running its __init__). One <PR>.yaml per registered
recipe is written to DIR: sglang's YAML text unchanged after pr/title/url keys.
Re-running is idempotent: files that already hold the text are left untouched.
Put DIR on PRTOGGLE_YAML_PATH: it becomes a recipe collection named after DIR.

\b
Examples:
  prtoggle import-sglang --out ~/recipes/sglang-upstream
  prtoggle import-sglang --from sglang/python/sglang/srt/debug_utils/pr_fix_toggle.py --out up
  PRTOGGLE_YAML_PATH=~/recipes/sglang-upstream prtoggle check --collection sglang-upstream
"""


@click.command("import-sglang", epilog=_EPILOG)
@click.option(
    "--from",
    "source",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="sglang's pr_fix_toggle.py (default: the installed sglang's).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory for the recipe files (created if missing).",
)
@json_option
def import_sglang_command(source: Path | None, out: Path, as_json: bool) -> None:
    """Write sglang's own revert recipes (pr_fix_toggle.py) as prtoggle recipe files."""
    path, written = import_sglang_recipes(source=source, out=out)
    if as_json:
        echo_json([{"pr": w.pr, "path": str(w.path), "changed": w.changed} for w in written])
        return
    for item in written:
        click.echo(f"{item.pr}  {item.path}  {'written' if item.changed else 'unchanged'}")
    changed = sum(item.changed for item in written)
    click.echo(
        f"{len(written)} recipes from {path}: {changed} written, {len(written) - changed} unchanged"
    )
