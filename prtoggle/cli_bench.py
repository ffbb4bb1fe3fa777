"""`prtoggle bench`: each fix's cost in speed, its benchmark timed fixed and reverted."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from prtoggle.cli_support import (
    EXIT_NEGATIVE,
    echo_json,
    format_table,
    join_prs,
    json_option,
    load_default_registry,
)

if TYPE_CHECKING:
    from prtoggle.fix_cost import BenchRun, FixCost
    from prtoggle.registry import Fix, Registry

_EPILOG = """\b
Each fix's `bench:` module times the code path the fix changes, in a state
where the reverted code also runs correctly: once fixed, then once with
SGLANG_DEBUG_REVERT_PR=N, in two child processes one after the other
(detection probes off); --rounds R alternates R such pairs and pools the
samples (a busy machine's load then hits both). RATIO = reverted median / fixed median; FIX COST =
how much longer the fixed code takes (negative: the fix is faster). A run
that fails is reported with its error, not as a number. Exit status 0 only
if every selected fix was measured both ways.

\b
Examples:
  prtoggle bench --all
  prtoggle bench 24856 --repeat 30 --rounds 3
  prtoggle bench 24856 27460 --device cuda --provider triton --json
"""


@click.command("bench", epilog=_EPILOG)
@click.argument("prs", nargs=-1, type=int)
@click.option("--all", "run_all", is_flag=True, help="Every fix that has a benchmark.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--provider", default=None, help="Kernel provider: torch, triton, flashinfer.")
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Timed samples per run; the median is reported.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds each child may run before it is killed and reported as a timeout.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run the fixed/reverted pair this many times, alternating; samples are pooled.",
)
@json_option
def bench_command(
    *,
    prs: tuple[int, ...],
    run_all: bool,
    device: str,
    provider: str | None,
    repeat: int,
    timeout: float,
    rounds: int,
    as_json: bool,
) -> None:
    """Time each fix's code path fixed and reverted, side by side; print the ratios."""
    from prtoggle.fix_cost import measure_fix_cost

    registry = load_default_registry()
    fixes = _selected(registry, prs, run_all=run_all)
    costs = [
        measure_fix_cost(
            fix, device=device, provider=provider, repeat=repeat, timeout=timeout,
            rounds=rounds, on_done=functools.partial(_print_progress, fix),
        )
        for fix in fixes
    ]
    if as_json:
        echo_json([cost.to_dict() for cost in costs])
    else:
        _print_table(costs, device=device, samples=repeat * rounds)
    if not all(cost.measured for cost in costs):
        sys.exit(EXIT_NEGATIVE)


def _selected(registry: Registry, prs: Sequence[int], *, run_all: bool) -> list[Fix]:
    with_bench = [registry.fixes[pr] for pr in registry.prs() if registry.fixes[pr].bench]
    choices = join_prs(fix.pr for fix in with_bench)
    if run_all and prs:
        raise click.UsageError("give PR numbers or --all, not both")
    if run_all:
        if not with_bench:
            raise click.UsageError("no registered fix has a benchmark (`bench:` in its YAML)")
        return with_bench
    if not prs:
        raise click.UsageError(f"expected PR numbers or --all; fixes with a benchmark: {choices}")
    fixes = [registry.get(pr) for pr in dict.fromkeys(prs)]
    for fix in fixes:
        if not fix.bench:
            raise click.UsageError(
                f"PR {fix.pr} has no benchmark (no `bench:` in {fix.path}); "
                f"fixes with a benchmark: {choices}"
            )
    return fixes


def _print_table(costs: Sequence[FixCost], *, device: str, samples: int) -> None:
    rows = [
        [
            str(cost.pr),
            cost.module.rsplit(".", 1)[-1],
            cost.fixed.describe(),
            cost.reverted.describe(),
            f"{cost.ratio:.3f}" if cost.ratio is not None else "-",
            f"{cost.fix_cost_percent:+.1f}%" if cost.fix_cost_percent is not None else "-",
        ]
        for cost in costs
    ]
    headers = ["PR", "BENCHMARK", "FIXED", "REVERTED", "RATIO", "FIX COST"]
    click.echo(format_table(headers, rows))
    click.echo("")
    for cost in costs:
        click.echo(_details(cost))
    measured = sum(cost.measured for cost in costs)
    click.echo(f"\n{measured} of {len(costs)} fixes measured on {device}, median of {samples} "
               "samples each way; RATIO = reverted/fixed (above 1: the fix is faster)")


def _print_progress(fix: Fix, variant: str, run: BenchRun) -> None:
    """One stderr line as each child finishes (the runs are sequential and take seconds)."""
    outcome = run.describe() if run.kind == "ok" else f"{run.kind}: {run.error}"
    click.echo(f"PR {fix.pr} {variant}: {outcome} ({run.run.seconds:.1f} s)", err=True)


def _details(cost: FixCost) -> str:
    """What was timed, on which shape, what to expect; extra figures; failures."""
    result = cost.fixed.result or cost.reverted.result
    lines = [f"PR {cost.pr}:"]
    if result is not None:
        shape = ", ".join(f"{key}={value}" for key, value in result["shape"].items())
        lines.append(f"  timed: {result['timed']}")
        lines.append(f"  shape: {shape}")
        if result.get("note"):
            lines.append(f"  note: {result['note']}")
    for key, (fixed, reverted) in cost.extras_compared().items():
        lines.append(f"  {key}: fixed {fixed}, reverted {reverted}")
    for label, run in (("fixed", cost.fixed), ("reverted", cost.reverted)):
        if run.kind != "ok":
            lines.append(f"  {label} run failed ({run.kind}): {run.error}")
            lines.append(_tail(run))
    return "\n".join(lines)


def _tail(run: BenchRun) -> str:
    from prtoggle.runner import output_tail

    return "\n".join(f"    | {line}" for line in output_tail(run.run, chars=1200).splitlines())
