"""Options, fix selection and runner of the commands that run fixes in children: repro, bench."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from prtoggle.cli.common import load_default_registry
from prtoggle.protocol import KERNEL_PROVIDERS
from prtoggle.recipes.prs import join_prs

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe, Registry
    from prtoggle.runners.warm_client import CommandRunner

F = TypeVar("F", bound=Callable[..., Any])

_NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"


def provider_option(function: F) -> F:
    """`--provider`, one of the kernel providers scenario and benchmark modules accept."""
    option = click.option(
        "--provider",
        type=click.Choice(KERNEL_PROVIDERS),
        default=None,
        help="Kernel provider [default: torch on CPU, triton on CUDA].",
    )
    return option(function)


def require_device(device: str) -> None:
    """Refuse `--device cuda` where torch sees no CUDA device (before any child starts).

    Imports torch (it is what the children would use); CUDA is probed through NVML, so
    this process does not initialise CUDA.
    """
    if device != "cuda":
        return
    try:
        import torch
    except ImportError as exc:
        raise click.BadParameter(
            f"'cuda' needs torch, which cannot be imported here: {exc}", param_hint="'--device'"
        ) from exc
    previous = os.environ.get(_NVML_CHECK_ENV)
    os.environ[_NVML_CHECK_ENV] = "1"
    try:
        available = torch.cuda.is_available()
    finally:
        if previous is None:
            os.environ.pop(_NVML_CHECK_ENV, None)
        else:
            os.environ[_NVML_CHECK_ENV] = previous
    if not available:
        raise click.BadParameter(
            f"'cuda' requested but torch {torch.__version__} sees no CUDA device; "
            "expected cpu on this machine",
            param_hint="'--device'",
        )


def child_run_options(*, what: str) -> Callable[[F], F]:
    """PRS, --all, --device, --provider, --timeout and --cold: commands that run each fix's
    `what` (a repro scenario, a benchmark) in child processes."""
    options = [
        click.argument("prs", nargs=-1, type=int),
        click.option("--all", "run_all", is_flag=True, help=f"Every fix that has a {what}."),
        click.option(
            "--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True
        ),
        provider_option,
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=300.0,
            show_default=True,
            help="Seconds each child may run before it is killed and reported as a timeout.",
        ),
        click.option(
            "--cold",
            is_flag=True,
            help=f"Start every {what} as a fresh process (no warm worker; also PRTOGGLE_WARM=0).",
        ),
    ]

    def decorate(function: F) -> F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def fixes_to_run(
    command: str,
    *,
    prs: Sequence[int],
    run_all: bool,
    device: str,
    key: str,
    what: str,
    collection: str | None = None,
) -> list[Recipe]:
    """The fixes PRS or --all name that have `key` (`repro`, `bench`), checked runnable here.

    Before any child starts: the `detect` extra and the modules to run are installed, and
    `--device cuda` has a CUDA device (each refusal: one `error:` line, exit 2).
    """
    from prtoggle.runners.requirements import require_installed

    registry = load_default_registry(collection=collection)
    fixes = select_fixes_having(registry, prs, run_all=run_all, key=key, what=what)
    require_installed(command, detect=True, runs=[str(getattr(fix, key)) for fix in fixes])
    require_device(device)
    return fixes


@contextmanager
def fix_runner(fixes: Sequence[Recipe], *, cold: bool) -> Iterator[CommandRunner]:
    """What runs the fixes' children: a warm worker preloading their components (unless
    `--cold` or PRTOGGLE_WARM=0 says otherwise), closed on exit."""
    from prtoggle.runners.warm_client import HEAVY_MODULES, command_runner, warm_enabled

    preload = [*HEAVY_MODULES, *(fix.component for fix in fixes if fix.component)]
    with command_runner(warm=warm_enabled(cold=cold), preload=preload) as runner:
        yield runner


def select_fixes_having(
    registry: Registry, prs: Sequence[int], *, run_all: bool, key: str, what: str
) -> list[Recipe]:
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
