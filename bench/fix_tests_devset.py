"""Fix-tests dev set: real bug-fix commits whose own tests fail before the fix, and whether
`prtoggle new`'s recipe, reverted, brings that failure back.

Data source: sglang's public git history (github.com/sgl-project/sglang), as carried with
upstream's SHAs and tags by github.com/bytedance-iaas/sglang; pass any clone's path (bare or
not) with --repo. The default range is the v0.5.16 -> v0.5.17 release branch points
(8905cbd42f..34af3ff386), the range of ../shared/realfixes.

Three steps, each cached as JSON under --cache so a later run resumes where one stopped:

1. candidates: first-parent commits of the range whose subject says fix/bug
   (`\\bfix(es|ed|ing)?\\b|\\[bugfix\\]|\\bbug`, case ignored), that change `.py` under
   --package (python/sglang) and add or change a test file under --tests-dir (test/).
2. ground truth: the changed test files run on the commit's tree and on the parent's
   source root with the commit's tests (--runs times each side, --timeout seconds per run,
   the package imported from the tree via PYTHONPATH, never installed). A case is kept when
   some test passes on every post-fix run and fails on every pre-fix run; those tests are
   its guards, and the pre-fix failure (exception type, first message line) its signature.
3. measure: `prtoggle new --from-git SHA` drafts the recipe, and the guards run on the
   post-fix tree under `prtoggle run -r devset:PR`. Each case is reproduced (every guard
   fails with its pre-fix exception type), fails differently, passes reverted, refused
   (run exits 78 or 2) or declined (`new` exits 2), with the recipe's `not_reverted` and
   the run's `prtoggle run:` lines as the cause of a miss.

Re-measure only, with the cached ground truth (e.g. after a merge):

    python bench/fix_tests_devset.py --repo /work/.mirror/bytedance-iaas+sglang/repo \\
        --cache /tmp/t-devset --python /tmp/sglang-import-venv/bin/python --stand-ins \\
        --measure-only
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fix_tests_devset_truth import (
    Outcome,
    Settings,
    Truth,
    find_candidates,
    ground_truth,
    post_tree,
    run_pytest,
    test_env,
)

DEFAULT_RANGE = "8905cbd42f..34af3ff386"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings(
        repo=Path(args.repo).resolve(),
        cache=Path(args.cache).resolve(),
        python=args.python,
        package=args.package,
        source_root=args.source_root,
        tests_dir=args.tests_dir,
        runs=args.runs,
        timeout=args.timeout,
        prtoggle_path=Path(args.prtoggle).resolve(),
        extra_path=tuple(Path(p).resolve() for p in args.extra_path)
        + ((stand_ins(Path(args.cache).resolve()),) if args.stand_ins else ()),
    )
    settings.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    candidates = find_candidates(settings, args.range)
    if args.only:
        candidates = [c for c in candidates if c.sha.startswith(tuple(args.only))]
    if args.newest_first:
        candidates.reverse()
    truths = [ground_truth(settings, c, cached_only=args.measure_only) for c in candidates]
    truth_s = time.monotonic() - started
    kept = [t for t in truths if t is not None and t.kept]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each case: child processes
        measured = [] if args.truth_only else list(pool.map(partial(measure_case, settings), kept))
    report = {
        "range": args.range,
        "repo": str(settings.repo),
        "candidates": len(candidates),
        "ground truth known": sum(t is not None for t in truths),
        "kept": len(kept),
        "dropped": {t.sha: t.reason for t in truths if t is not None and not t.kept},
        "cases": [m.as_json() for m in measured],
        "classes": _count(m.verdict for m in measured),
        "truth step (s)": round(truth_s, 1),
        "measure step (s)": round(time.monotonic() - started - truth_s, 1),
    }
    print(json.dumps(report, indent=2) if args.json else render_table(report))
    return 0


@dataclasses.dataclass
class Measurement:
    """A kept case measured: the recipe `new` drafted, the guards' run reverted, the verdict."""

    truth: Truth
    verdict: str = ""
    cause: str = ""
    new_exit: int = 0
    run_exit: int | None = None
    not_reverted: list[str] = dataclasses.field(default_factory=list)
    run_lines: list[str] = dataclasses.field(default_factory=list)
    guards: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        """The case as the report's JSON gives it."""
        row = dataclasses.asdict(self)
        truth = row.pop("truth")
        return {
            "sha": truth["sha"],
            "pr": truth["pr"],
            "subject": truth["subject"],
            "pre-fix": truth["signature"],
            **row,
        }


def measure_case(settings: Settings, truth: Truth) -> Measurement:
    """Draft the case's recipe with `new --from-git`, run its guards reverted, classify."""
    result = Measurement(truth)
    tree = post_tree(settings, truth.sha)
    collection = settings.cache / "recipes" / truth.sha / "devset"
    shutil.rmtree(collection, ignore_errors=True)
    collection.mkdir(parents=True)
    pr = truth.pr or 1 + int(truth.sha[:6], 16)
    drafted = _prtoggle(
        settings,
        ["new", "--from-git", truth.sha, "--repo", str(settings.repo), "--pr", str(pr)],
        ["--source-root", str(tree / settings.source_root), "--out", str(collection), "--json"],
    )
    result.new_exit = drafted.returncode
    if drafted.returncode not in (0, 1):
        result.verdict = "declined"
        result.cause = _error_line(drafted.stderr) or f"new exited {drafted.returncode}"
        return result
    draft = json.loads(drafted.stdout)
    result.not_reverted = [
        f"{e.get('file')}:{e.get('line')}: {e.get('reason')}" for e in draft.get("not_reverted", [])
    ]
    env = test_env(settings, tree, extra=[settings.prtoggle_path])
    env["PRTOGGLE_YAML_PATH"] = str(collection)
    prefix = [settings.python, "-m", "prtoggle", "run", "-r", f"devset:{pr}", "--"]
    code, outcomes, tail = run_pytest(settings, tree, truth.guards, prefix=prefix, env=env)
    result.run_exit = code
    said = ("prtoggle run:", "prtoggle:", "error:")
    result.run_lines = [line for line in tail.splitlines() if line.startswith(said)]
    _classify(result, outcomes)
    return result


def _classify(result: Measurement, outcomes: dict[str, Outcome]) -> None:
    kinds = []
    for guard in result.truth.guards:
        got = outcomes.get(guard) or outcomes.get(guard.split("::")[0])
        expected = result.truth.signature[guard][0]
        if got is None:
            kind = "not run"
        elif got.outcome == "passed":
            kind = "passes reverted"
        elif got.outcome == "failed" and expected in (got.exc_type, *got.aliases):
            kind = "reproduced"
        else:
            kind = "fails differently"
        kinds.append(kind)
        result.guards[guard] = [kind, got.exc_type if got else "", got.message if got else ""]
    missed = "; ".join(result.not_reverted + result.run_lines)
    if result.run_exit in (2, 78):
        result.verdict, result.cause = "refused", missed or f"run exited {result.run_exit}"
    elif result.run_exit == 124:
        result.verdict, result.cause = "fails differently", "the reverted run timed out"
    elif all(k == "reproduced" for k in kinds):
        result.verdict = "reproduced"
    elif "passes reverted" in kinds and all(k in ("reproduced", "passes reverted") for k in kinds):
        result.verdict, result.cause = "passes reverted", missed or "nothing listed"
    else:
        result.verdict, result.cause = "fails differently", missed or "nothing listed"


def _prtoggle(settings: Settings, *parts: list[str]) -> subprocess.CompletedProcess[str]:
    argv = [settings.python, "-m", "prtoggle", *(arg for part in parts for arg in part)]
    env = test_env(settings, settings.cache, extra=[settings.prtoggle_path])
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    return lines[0] if lines else stderr.strip().splitlines()[-1] if stderr.strip() else ""


def render_table(report: dict[str, object]) -> str:
    """The report as text: the counts, then one row per measured case."""
    lines = [
        f"range {report['range']} of {report['repo']}",
        f"candidates {report['candidates']}, ground truth known {report['ground truth known']}, "
        f"kept {report['kept']}",
        "classes: " + ", ".join(f"{k} {v}" for k, v in sorted(report["classes"].items())),  # type: ignore[attr-defined]
        "",
        f"{'sha':<10}  {'PR':>6}  {'verdict':<17}  {'pre-fix':<22}  cause",
    ]
    for case in report["cases"]:  # type: ignore[attr-defined]
        types = sorted({sig[0] for sig in case["pre-fix"].values()})
        lines.append(
            f"{case['sha'][:10]:<10}  {case['pr'] or '-':>6}  {case['verdict']:<17}  "
            f"{','.join(types)[:22]:<22}  {case['cause'][:160]}"
        )
    lines.append(
        f"truth step {report['truth step (s)']} s, measure step {report['measure step (s)']} s"
    )
    return "\n".join(lines)


DATASETS_STAND_IN = '''"""Stand-in for `datasets`: names only (sglang's test helpers import it)."""


def load_dataset(*args, **kwargs):
    raise RuntimeError("datasets stand-in (bench/fix_tests_devset.py): load_dataset unavailable")


class Dataset:
    pass


class DatasetDict(dict):
    pass
'''


def stand_ins(cache: Path) -> Path:
    """A folder of name-only stand-ins under the cache: prtoggle's torchvision stand-in
    (tests/sglang/stubs) and a `datasets` one."""
    folder = cache / "stand-ins"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(
        Path(__file__).resolve().parent.parent / "tests/sglang/stubs/torchvision",
        folder / "torchvision",
    )
    (folder / "datasets").mkdir()
    (folder / "datasets" / "__init__.py").write_text(DATASETS_STAND_IN)
    return folder


def _count(verdicts: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    for verdict in verdicts:  # type: ignore[attr-defined]
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="a clone of sglang's history (bare is fine)")
    parser.add_argument("--range", default=DEFAULT_RANGE, help="first-parent commits A..B")
    parser.add_argument("--cache", default="/tmp/t-devset", help="trees, results and recipes")
    parser.add_argument("--python", default=sys.executable, help="runs the tests (has pytest)")
    parser.add_argument("--package", default="python/sglang", help="the code a fix must change")
    parser.add_argument("--source-root", default="python", help="what goes on PYTHONPATH")
    parser.add_argument("--tests-dir", default="test", help="where a fix's tests live")
    parser.add_argument(
        "--extra-path", action="append", default=[], help="put first on the tests' PYTHONPATH"
    )
    parser.add_argument(
        "--stand-ins",
        action="store_true",
        help="put name-only torchvision and datasets stand-ins first on the tests' PYTHONPATH "
        "(PyPI's torchvision cannot load against CPU torch; sglang's test helpers import datasets)",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs of each side")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test run")
    parser.add_argument("--only", nargs="*", help="SHA prefixes to keep")
    parser.add_argument(
        "--prtoggle",
        default=str(Path(__file__).resolve().parent.parent),
        help="the prtoggle checkout put first on PYTHONPATH (default: this one)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="cases measured at once")
    parser.add_argument("--newest-first", action="store_true", help="work newest to oldest")
    parser.add_argument("--truth-only", action="store_true", help="stop after ground truth")
    parser.add_argument(
        "--measure-only", action="store_true", help="use cached ground truth, run no new one"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
