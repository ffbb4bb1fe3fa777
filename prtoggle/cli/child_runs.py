"""Options of the commands that run each fix in children (repro, bench), and `--device cuda`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from prtoggle.protocol import KERNEL_PROVIDERS

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
