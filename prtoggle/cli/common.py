"""Shared pieces of the click CLI: error reporting, registry access, -r parsing, output."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from prtoggle.cli.output import (
    EXIT_BROKEN_PIPE,
    TABLE_WIDTH,
    Cut,
    OutputUnwritable,
    cut_cell,
    discard_standard_output,
    fit_widths,
    terminal_safe,
    terminal_safe_output,
)
from prtoggle.errors import PrToggleError, RevertSpecError
from prtoggle.runners.child_process import Interrupted, owning_children

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe, Registry
    from prtoggle.recipes.selection import RevertRequest, Selection

EXIT_NEGATIVE = 1
"""The command ran and its answer is no: a check failed, a fix did not reproduce, ..."""
EXIT_ERROR = 2
"""Bad input or a prtoggle error (`error: <message>` on stderr); click usage errors too."""
EXIT_INTERRUPTED_BASE = 128
"""Interrupted by signal N (SIGHUP, SIGINT, SIGTERM): exit status 128 + N: 129, 130, 143."""

EXIT_STATUS_HELP = """\b
Exit status: 0 yes/success; 1 the command ran and its answer is no; 2 bad input
or a prtoggle error (one `error: ...` line); 129/130/143 interrupted
(SIGHUP/SIGINT/SIGTERM); 141 the reader of its output went away (`| head`).
"""


F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A PrToggleError on its way out: printed as `error: <message>`, exit status 2."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {terminal_safe(self.format_message())}", err=True)


class PrToggleGroup(click.Group):
    """The `prtoggle` group: one exit-status scheme and one-line errors for every command.

    Every command runs under `owning_children()`: SIGHUP/SIGINT/SIGTERM end the child
    process groups it started and exit 129/130/143. A PrToggleError or a usage error prints
    one `error: ...` line and exits 2, never a traceback. In standalone mode all output is
    terminal-safe (control characters escaped); an output that cannot be written is one
    line and 2, or silence and 141 when its reader went away.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with owning_children():
                return super().invoke(ctx)
        except OutputUnwritable:
            raise
        except PrToggleError as exc:
            raise CliError(str(exc)) from exc

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            choices = ", ".join(self.list_commands(ctx))
            raise click.UsageError(f"no command {name!r}: expected one of {choices}", ctx)
        return super().resolve_command(ctx, args)

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, *, standalone_mode: bool = True, **extra: Any
    ) -> Any:
        """click's main; in standalone mode every way out becomes a status of the scheme."""
        if not standalone_mode:
            return super().main(args, standalone_mode=False, **extra)
        with terminal_safe_output():
            try:
                status = self._main_statuses(args, **extra)
                sys.stdout.flush()
            except OutputUnwritable as exc:
                _output_failed(exc)
        sys.exit(status)

    def _main_statuses(self, args: Sequence[str] | None, **extra: Any) -> int:
        """click's main with every way out but output errors turned into a status."""
        try:
            status = super().main(args, standalone_mode=False, **extra)
        except OutputUnwritable:
            raise
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `prtoggle`: its usage, in full
            exc.show()
            sys.exit(EXIT_ERROR)
        except click.UsageError as exc:
            _exit_with_error(_usage_line(exc), EXIT_ERROR)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except PrToggleError as exc:
            _exit_with_error(f"error: {exc}", EXIT_ERROR)
        except Interrupted as exc:
            _exit_with_error(str(exc), exc.exit_status)
        except click.Abort:  # KeyboardInterrupt (or EOF) outside owning_children
            _exit_with_error("interrupted by SIGINT", Interrupted(2).exit_status)
        return status if isinstance(status, int) else 0


def examples_epilog(*examples: str, exit_status: str = EXIT_STATUS_HELP) -> str:
    """A command's --help epilog: its exit statuses, then its examples, one command a line."""
    return exit_status + "\b\nExamples:\n" + "\n".join(f"  {example}" for example in examples)


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


def wide_option(function: F) -> F:
    """The `--wide` flag of commands whose tables fit TABLE_WIDTH columns by default."""
    option = click.option(
        "--wide",
        is_flag=True,
        help=f"Print every cell whole (default: lines fit {TABLE_WIDTH} columns, long cells "
        "cut with an ellipsis; --json is always whole).",
    )
    return option(function)


def recipe_out_option(function: F) -> F:
    """The `--out DIR` option of commands that write a recipe (OUT/<PR>.yaml)."""
    option = click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("."),
        show_default=True,
        help="Write OUT/<PR>.yaml (OUT created if missing).",
    )
    return option(function)


def load_default_registry(*, collection: str | None = None) -> Registry:
    """The shipped collections plus PRTOGGLE_YAML_PATH, restricted to `collection` if given.

    Raises RegistryError / UnknownPRError (an unknown collection lists the known ones);
    the command group prints them as one `error:` line.
    """
    from prtoggle.recipes.registry import default_registry

    return default_registry().in_collection(collection)


def parse_revert_options(
    values: Sequence[str], registry: Registry, *, option: str = "-r"
) -> tuple[RevertRequest, ...] | None:
    """Every `-r` value parsed like SGLANG_DEBUG_REVERT_PR, merged in order; None: `all`."""
    from prtoggle.revert.toggle import parse_revert_requests

    requests: list[RevertRequest] = []
    everything = False
    for value in values:
        parsed = parse_revert_requests(value, registry=registry, source=option)
        if parsed is None:
            everything = True
        else:
            requests.extend(request for request in parsed if request not in requests)
    return None if everything else tuple(requests)


def revert_selections(
    values: Sequence[str], registry: Registry, *, search_path: Sequence[str], option: str = "-r"
) -> tuple[tuple[Selection, ...], bool]:
    """The recipes the `-r` values use (the selection rule), and whether they said `all`.

    `all` keeps every recipe that applies to what is installed (its package found on
    this process's path or `search_path`) and says on stderr, in one line, what it left
    out and why; an explicit request none of whose recipes applies is an error.
    """
    from prtoggle.recipes.selection import left_out_note
    from prtoggle.revert.toggle import select_reverts

    requests = parse_revert_options(values, registry, option=option)
    if requests is not None:
        return select_reverts(requests, registry=registry), False
    selections = select_reverts(None, registry=registry, search_path=search_path)
    if not any(selection.recipes for selection in selections):
        note = left_out_note(selections)
        raise RevertSpecError(f"{option} all: no recipe applies here; {note or 'none registered'}")
    summary = _left_out_summary(selections)
    if summary is not None:
        click.echo(f"prtoggle: {option} all: {summary}", err=True)
    return selections, True


def whole_only_option(function: F) -> F:
    """`--whole-only` of the commands that revert in children: run, coverage, bisect."""
    option = click.option(
        "--whole-only",
        is_flag=True,
        help="Refuse partial reverts (recipes with changes they do not revert); `all` "
        "leaves them out. Also PRTOGGLE_WHOLE_ONLY=1.",
    )
    return option(function)


def whole_selections(
    selections: Sequence[Selection], *, whole_only: bool, everything: bool, option: str = "-r"
) -> tuple[Selection, ...]:
    """The selections a `--whole-only` command keeps; every partial recipe used is said.

    An explicit request of a partial recipe is refused (one `error:` line, status 2);
    `all` leaves partial recipes out, in one stderr line. Each partial recipe kept gets
    one `prtoggle: PR N reverted in part (partial: ...)` line on stderr.
    """
    from prtoggle.revert.partial import keep_whole, partial_note

    whole_only = whole_only or _whole_only_env()
    kept, note = keep_whole(selections, whole_only=whole_only, everything=everything, source=option)
    if note is not None:
        click.echo(f"prtoggle: {option}: {note}", err=True)
    for recipe in (r for s in kept for r in s.recipes if r.partial):
        click.echo(
            f"prtoggle: PR {recipe.pr} reverted in part ({partial_note([recipe])})", err=True
        )
    return kept


def _whole_only_env() -> bool:
    from prtoggle.revert.partial import whole_only

    return whole_only()


def qualified_specs(selections: Sequence[Selection]) -> tuple[str, ...]:
    """`C:N` for every chosen recipe: what a child is told to revert, exactly."""
    return tuple(dict.fromkeys(f"{r.collection}:{r.pr}" for s in selections for r in s.recipes))


def selected_fixes(registry: Registry, prs: Sequence[int]) -> list[Recipe]:
    """The fixes named by `prs`, in every collection (all fixes when empty); unknown: error."""
    if not prs:
        return list(registry.fixes)
    return [fix for pr in dict.fromkeys(prs) for fix in registry.find(pr)]


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    cut: Mapping[int, Cut] | None = None,
) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded.

    Every cell is made terminal-safe on one line. `width`: the columns of `cut` (index ->
    where a long cell loses text, marked by an ellipsis) are narrowed, widest first, until
    a line fits `width` or each is as narrow as its header.
    """
    table = [[terminal_safe(str(cell)) for cell in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    cut = cut or {}
    if width is not None:
        widths = fit_widths(widths, [len(h) for h in table[0]], width=width, cuttable=cut)
    lines = []
    for row in table:
        cells = [
            cut_cell(cell, size, cut.get(index)).ljust(size)
            for index, (cell, size) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _exit_with_error(line: str, status: int) -> NoReturn:
    sys.stdout.flush()
    click.echo(terminal_safe(line), err=True)
    sys.exit(status)


def _output_failed(exc: OutputUnwritable) -> NoReturn:
    """A reader gone: silence and 141; a full disk, ...: one `error:` line (if stderr can
    take it) and 2. What is still buffered for standard output is dropped."""
    discard_standard_output()
    if exc.broken_pipe:
        sys.exit(EXIT_BROKEN_PIPE)
    with contextlib.suppress(OutputUnwritable, OSError):
        click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_ERROR)


def _usage_line(exc: click.UsageError) -> str:
    """A click usage error as one line: `error: <message> (see `<command> --help`)`."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    return f"error: {message}{where}"


def _left_out_summary(selections: Sequence[Selection], *, names: int = 6) -> str | None:
    """What `all` left out, by kind, the count and at most `names` recipes of each kind
    (`prtoggle list` gives each one's reason); None when nothing was."""
    by_kind: dict[str, list[str]] = {}
    for selection in selections:
        for item in selection.left_out:
            by_kind.setdefault(item.kind, []).append(item.recipe.label)
    if not by_kind:
        return None
    total = sum(len(labels) for labels in by_kind.values())
    parts = []
    for kind, labels in by_kind.items():
        shown = ", ".join(labels[:names])
        more = f" and {len(labels) - names} more" if len(labels) > names else ""
        parts.append(f"{len(labels)} {kind} ({shown}{more})")
    return (
        f"left out {total} recipe(s) that do not apply here: {'; '.join(parts)}; "
        "`prtoggle list` says why"
    )
