"""`prtoggle bench`: each fix's cost in speed, fixed and reverted timed side by side."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence

import click

from prtoggle.cli.child_runs import child_run_options, require_device
from prtoggle.cli.common import EXIT_NEGATIVE, echo_json, format_table, json_option
from prtoggle.cli.output import TABLE_WIDTH, plural
from prtoggle.commands.bench import BenchRun, FixCost, measure_fix_cost
from prtoggle.commands.child_runs import recipe_runner, recipes_to_run
from prtoggle.runners.child_outcome import output_tail

_EPILOG = """\b
Each fix's `bench:` module times the code path the fix changes, in a state
where the reverted code also runs correctly. One child process per fix
(detection probes off) builds that state once, warms both variants up, then
takes --repeat pairs of samples side by side: one with the fix in force, one
inside prtoggle.reverted(N), the order alternating pair by pair (ABBA), so
that what differs between processes (memory layout, clocks) cancels out.
FIXED / REVERTED = median of each variant's samples; RATIO = median of the
per-pair reverted/fixed ratios; IQR = their interquartile range (a ratio
within about IQR of 1.0 is noise); FIX COST = how much longer the fixed code
takes (negative: the fix is faster). A variant that fails is reported with
its error, not as a number (a reverted path that raises still leaves the
fixed median). Exit status 0 only if every selected fix was measured both
ways; 1 if one was not; 2 bad input (`--device cuda` without CUDA: before any
child starts); 129/130/143 interrupted (the running child is ended).

\b
Examples:
  prtoggle bench --all
  prtoggle bench 24856 --repeat 30
  prtoggle bench 24856 27460 --device cuda --provider triton --json
"""


@click.command("bench", epilog=_EPILOG)
@child_run_options(what="benchmark")
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Interleaved fixed/reverted sample pairs per fix, all in one child process.",
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
    cold: bool,
    as_json: bool,
) -> None:
    """Time each fix's code path fixed and reverted, side by side; print the ratios."""
    recipes = recipes_to_run("bench", prs=prs, run_all=run_all, key="bench", what="benchmark")
    require_device(device)
    costs = []
    with recipe_runner(recipes, cold=cold) as runner:
        for recipe in recipes:
            cost = measure_fix_cost(
                recipe,
                device=device,
                provider=provider,
                repeat=repeat,
                timeout=timeout,
                runner=runner,
            )
            _print_progress(cost)
            costs.append(cost)
    if as_json:
        echo_json([cost.to_dict() for cost in costs])
    else:
        _print_table(costs, device=device, pairs=repeat)
    if not all(cost.measured for cost in costs):
        sys.exit(EXIT_NEGATIVE)


def _print_table(costs: Sequence[FixCost], *, device: str, pairs: int) -> None:
    rows = [
        [
            str(cost.pr),
            cost.module.rsplit(".", 1)[-1],
            _cell(cost, cost.fixed_median, failed=cost.run.kind != "ok"),
            _cell(cost, cost.reverted_median, failed=cost.reverted_error is not None),
            _number(cost.ratio, "{:.3f}"),
            _number(cost.ratio_iqr, "{:.3f}"),
            _number(cost.fix_cost_percent, "{:+.1f}%"),
            _interval(cost),
        ]
        for cost in costs
    ]
    headers = ["PR", "BENCHMARK", "FIXED", "REVERTED", "RATIO", "IQR", "FIX COST", "COST IQR"]
    click.echo(format_table(headers, rows, width=TABLE_WIDTH, cut={1: "start"}))
    click.echo("")
    for cost in costs:
        click.echo(_details(cost))
    measured = sum(cost.measured for cost in costs)
    footer = (
        f"{measured} of {plural(len(costs), 'fix')} measured on {device}, {pairs} interleaved "
        "fixed/reverted sample pairs each in one process; RATIO = median of per-pair "
        "reverted/fixed (above 1: the fix is faster), IQR = its interquartile range, "
        "COST IQR = FIX COST at those quartiles"
    )
    click.echo("\n" + textwrap.fill(footer, width=TABLE_WIDTH))
    for cost in costs:
        if cost.cost_within_noise:
            click.echo(
                f"PR {cost.pr}: FIX COST is within the noise: its interquartile interval "
                f"({_interval(cost)}) crosses zero"
            )


def _interval(cost: FixCost) -> str:
    interval = cost.fix_cost_interval
    return "-" if interval is None else f"{interval[0]:+.1f}..{interval[1]:+.1f}%"


def _cell(cost: FixCost, median: float | None, *, failed: bool) -> str:
    if median is not None and not failed:
        return f"{median:.4g} {(cost.run.result or {}).get('unit', '')}".rstrip()
    return "timeout" if cost.run.kind == "timeout" else "FAILED"


def _number(value: float | None, template: str) -> str:
    return template.format(value) if value is not None else "-"


def _print_progress(cost: FixCost) -> None:
    """One stderr line as each fix's child finishes (each takes seconds)."""
    run = cost.run
    if run.kind != "ok":
        outcome = f"{run.kind}: {run.error}"
    elif cost.reverted_error is not None:
        outcome = (
            f"fixed {_cell(cost, cost.fixed_median, failed=False)}, reverted failed: "
            f"{cost.reverted_error}"
        )
    else:
        outcome = (
            f"fixed {_cell(cost, cost.fixed_median, failed=False)}, reverted "
            f"{_cell(cost, cost.reverted_median, failed=False)}, ratio "
            f"{_number(cost.ratio, '{:.3f}')}"
        )
    click.echo(f"PR {cost.pr}: {outcome} ({run.run.seconds:.1f} s)", err=True)


def _details(cost: FixCost) -> str:
    """What was timed, on which shape, what to expect; extra figures; failures."""
    result = cost.run.result
    lines = [f"PR {cost.pr}:"]
    if result is not None:
        shape = ", ".join(f"{key}={value}" for key, value in result["shape"].items())
        lines.append(f"  timed: {result['timed']}")
        lines.append(f"  shape: {shape}")
        if result.get("note"):
            lines.append(f"  note: {result['note']}")
    for key, (fixed, reverted) in cost.extras_compared().items():
        lines.append(f"  {key}: fixed {fixed}, reverted {reverted}")
    if cost.run.kind != "ok":
        lines.append(f"  run failed ({cost.run.kind}): {cost.run.error}")
        lines.append(_tail(cost.run))
    elif cost.reverted_error is not None:
        lines.append(f"  reverted failed: {cost.reverted_error}")
    return "\n".join(lines)


def _tail(run: BenchRun) -> str:
    return "\n".join(f"    | {line}" for line in output_tail(run.run, chars=1200).splitlines())
