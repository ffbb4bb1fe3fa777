"""Shared pieces of the click CLI: the group, exit statuses, common options, errors and output."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

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
from prtoggle.errors import CommandUsageError, PrToggleError
from prtoggle.runners.child_process import Interrupted, owning_children

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
"""Ends with a blank line: what follows opens a paragraph (click's `\\b` only works there)."""


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
        except CommandUsageError as exc:
            raise click.UsageError(str(exc), _command_context(ctx)) from exc
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
    # click's `\b` (keep these lines as written) must open a paragraph: a blank line first.
    head = exit_status.rstrip("\n") + "\n\n\b\nExamples:\n"
    return head + "\n".join(f"  {example}" for example in examples)


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


def whole_only_option(function: F) -> F:
    """`--whole-only` of the commands that revert in children: run, coverage, bisect."""
    option = click.option(
        "--whole-only",
        is_flag=True,
        help="Refuse partial reverts (recipes with changes they do not revert); `all` "
        "leaves them out. Also PRTOGGLE_WHOLE_ONLY=1.",
    )
    return option(function)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def echo_notes(notes: Iterable[str]) -> None:
    """The notes a command's logic returned, one stderr line each."""
    for note in notes:
        click.echo(terminal_safe(note), err=True)


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


def _command_context(ctx: click.Context) -> click.Context:
    """The context a usage error of the command `ctx` invoked names (`prtoggle CMD`)."""
    name = ctx.invoked_subcommand
    if name is None:
        return ctx
    return click.Context(click.Command(name), parent=ctx, info_name=name)


def _usage_line(exc: click.UsageError) -> str:
    """A click usage error as one line: `error: <message> (see `<command> --help`)`."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    return f"error: {message}{where}"
