"""`prtoggle bisect --git` against `git bisect run` on windows of real sglang history.

Data: sglang's public history, as carried (upstream's SHAs and tags) by the
`bytedance-iaas/sglang` repository; any clone's path (`--repo`, bare is fine). Cases: the
dev set of `bench/fix_tests_devset.py` (its `--cache DIR/truth/*.json`: real fix commits
whose own tests pass on the commit and fail on its parent), each kept case a fix commit C
and its guard tests.

For each case, a window of `--window` (64) first-parent commits of `--branch` that holds C
at a random position (`--seed`); the question, asked of the window's newest tree H: which
commit of the window does the test depend on? Both tools answer it on the same machine,
one after the other:

- prtoggle: `prtoggle bisect --git BASE..H --repo REPO -- python -m pytest -q TESTS`, run in
  H's tree with sglang imported from H's `python/` (nothing checked out or reinstalled);
- git: `git bisect run` in a checkout of H (a shared clone), each step checking the commit
  out and running the same tests (H's, as prtoggle does) with sglang imported from the
  checkout's `python/`, a step judged as prtoggle judges a run (0 good; a timeout or a
  signal skips; any other failure, an ImportError at collection too, is the regression).

prtoggle starts each case with an empty recipe cache: what is timed drafts everything.

Per case: the answer of each (right: names C; wrong: names another commit; unsure: names
none), probes/steps and wall time, and the ratio git/prtoggle. Usable windows only: the
tests must pass at H and fail at BASE (else the case is reported `unusable` and why).

    python bench/history_bisect.py --repo ~/sglang --cache /tmp/t-devset --python PY
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    sha: str
    pr: int | None
    tests: list[str]


@dataclass
class Window:
    """One case's window: the commit before it, its newest commit, H's tree, the
    environment and the test command."""

    base: str
    head: str
    tree: Path
    env: dict[str, str]
    tests: list[str]


@dataclass
class Outcome:
    sha: str
    pr: int | None
    position: int
    status: str
    prtoggle_answer: str = ""
    prtoggle_culprit: str = ""
    prtoggle_probes: int = 0
    prtoggle_seconds: float = 0.0
    git_answer: str = ""
    git_culprit: str = ""
    git_steps: int = 0
    git_seconds: float = 0.0
    note: str = ""


def main() -> int:
    args = _parse()
    cases = _cases(args.cache / "truth", only=args.only)[: args.limit]
    first_parents = _git(args.repo, "rev-list", "--first-parent", "--reverse", args.branch).split()
    rng = random.Random(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for case in cases:
        outcome = _one(case, args, first_parents, rng)
        outcomes.append(outcome)
        print(json.dumps(asdict(outcome)), file=sys.stderr, flush=True)
    _report(outcomes)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


def _one(
    case: Case, args: argparse.Namespace, first_parents: list[str], rng: random.Random
) -> Outcome:
    index = first_parents.index(case.sha) if case.sha in first_parents else None
    position = rng.randrange(args.window)
    if (
        index is None
        or index - position - 1 < 0
        or index - position + args.window > len(first_parents)
    ):
        return Outcome(
            case.sha, case.pr, position, "unusable", note="not on the branch's first parents"
        )
    base = first_parents[index - position - 1]
    head = first_parents[index - position + args.window - 1]
    tree = _tree(args.repo, head, args.work / "trees" / head[:12])
    env = _env(args, tree)
    tests = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *case.tests]
    tests[0] = args.python
    at_head = subprocess.run(
        tests, cwd=tree, env=env, capture_output=True, timeout=args.timeout, check=False
    )
    if at_head.returncode != 0:
        return Outcome(
            case.sha,
            case.pr,
            position,
            "unusable",
            note=f"tests fail at H (exit {at_head.returncode})",
        )
    outcome = Outcome(case.sha, case.pr, position, "measured")
    window = Window(base, head, tree, env, tests)
    _prtoggle(outcome, args, window, case)
    _git_bisect(outcome, args, window, case)
    return outcome


def _prtoggle(outcome: Outcome, args: argparse.Namespace, window: Window, case: Case) -> None:
    base, head, tree, env, tests = window.base, window.head, window.tree, window.env, window.tests
    command = [
        args.python,
        "-m",
        "prtoggle",
        "bisect",
        "--git",
        f"{base}..{head}",
        "--repo",
        str(args.repo),
        "--source-dir",
        "python",
        "--cache",
        str(_fresh(args.work / "prtoggle-cache" / case.sha[:12])),  # nothing drafted before
        "--timeout",
        str(args.timeout),
        "--repeat",
        str(args.repeat),
        "--json",
        "--",
        *tests,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    outcome.prtoggle_seconds = round(time.perf_counter() - start, 1)
    (args.work / f"prtoggle-{case.sha[:12]}.json").write_text(done.stdout)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        outcome.prtoggle_answer = "error"
        outcome.note = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return
    outcome.prtoggle_probes = len(answer["probes"])
    culprits = [c["sha"] for c in answer["culprits"]]
    outcome.prtoggle_culprit = culprits[0] if culprits else ""
    outcome.prtoggle_answer = _judged(culprits, case.sha)
    outcome.note = answer["conclusion"][:300]


def _git_bisect(outcome: Outcome, args: argparse.Namespace, window: Window, case: Case) -> None:
    base, head, tests, work = window.base, window.head, window.tests, args.work
    clone = work / "clone"
    if not clone.exists():
        subprocess.run(
            ["git", "clone", "-q", "--shared", "--no-checkout", str(args.repo), str(clone)],
            check=True,
        )
    checkout = work / "git-bisect" / case.sha[:12]
    shutil.rmtree(checkout, ignore_errors=True)
    _git(clone, "worktree", "prune")
    start = time.perf_counter()
    _git(clone, "worktree", "add", "-q", "--detach", str(checkout), head)
    script = checkout.parent / f"{case.sha[:12]}.sh"
    pythonpath = os.pathsep.join([str(checkout / "python"), *args.extra_path])
    script.write_text(  # the window's newest tests, the step's checked-out code
        "#!/bin/sh\n"
        f"cd {shlex.quote(str(window.tree))} && PYTHONPATH={pythonpath} "
        f"timeout {int(args.timeout)} {' '.join(tests)} >/dev/null 2>&1\n"
        # judged as prtoggle judges a run: 0 good; a timeout (124) or a signal skips; any
        # other failure (a failed test, an ImportError at collection) is the regression
        "rc=$?\nif [ $rc -eq 0 ]; then exit 1; fi\n"
        "if [ $rc -eq 124 ] || [ $rc -ge 126 ]; then exit 125; fi\nexit 0\n"
    )
    script.chmod(0o755)
    _git(
        checkout,
        "bisect",
        "start",
        "--first-parent",
        "--term-old=broken",
        "--term-new=fixed",
        head,
        base,
    )
    done = subprocess.run(
        ["git", "-C", str(checkout), "bisect", "run", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    outcome.git_seconds = round(time.perf_counter() - start, 1)
    _git(checkout, "bisect", "reset", check=False)
    _git(clone, "worktree", "remove", "--force", str(checkout), check=False)
    found = re.search(r"^([0-9a-f]{40}) is the first fixed commit", done.stdout, re.M)
    outcome.git_steps = len(re.findall(r"^running ", done.stdout, re.M))
    outcome.git_culprit = found.group(1) if found else ""
    outcome.git_answer = _judged([found.group(1)] if found else [], case.sha)


def _fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def _judged(culprits: list[str], truth: str) -> str:
    if not culprits:
        return "unsure"
    return "right" if culprits == [truth] else "wrong"


def _report(outcomes: list[Outcome]) -> None:
    measured = [o for o in outcomes if o.status == "measured"]
    header = ("case", "pos", "prtoggle", "probes", "s", "git", "steps", "s", "ratio")
    print("{:14} {:>3} {:>9} {:>6} {:>7} {:>7} {:>5} {:>7} {:>6}".format(*header))
    for o in outcomes:
        if o.status != "measured":
            print(f"{o.sha[:12]:14} {o.position:>3} unusable: {o.note}")
            continue
        ratio = o.git_seconds / o.prtoggle_seconds if o.prtoggle_seconds else 0.0
        print(
            f"{o.sha[:12]:14} {o.position:>3} {o.prtoggle_answer:>9} {o.prtoggle_probes:>6} "
            f"{o.prtoggle_seconds:>7.1f} {o.git_answer:>7} {o.git_steps:>5} "
            f"{o.git_seconds:>7.1f} {ratio:>5.2f}x"
        )
    for tool in ("prtoggle", "git"):
        answers = [getattr(o, f"{tool}_answer") for o in measured]
        print(
            f"{tool}: "
            + ", ".join(f"{answers.count(a)} {a}" for a in ("right", "wrong", "unsure", "error"))
        )
    if measured:
        p = sum(o.prtoggle_seconds for o in measured)
        g = sum(o.git_seconds for o in measured)
        print(f"wall time: prtoggle {p:.0f} s, git bisect run {g:.0f} s, ratio {g / p:.2f}x")


def _cases(truth: Path, *, only: list[str]) -> list[Case]:
    cases = []
    for path in sorted(truth.glob("*.json")):
        data = json.loads(path.read_text())
        if not data.get("kept"):
            continue
        if only and not any(data["sha"].startswith(prefix) for prefix in only):
            continue
        cases.append(Case(data["sha"], data.get("pr"), list(data["guards"])))
    return cases


def _tree(repo: Path, rev: str, into: Path) -> Path:
    if not (into / ".done").exists():
        shutil.rmtree(into, ignore_errors=True)
        into.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", rev, "python", "test"],
            capture_output=True,
            check=True,
        ).stdout
        tar_path = into / ".tree.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(into, filter="data")
        tar_path.unlink()
        (into / ".done").write_text(rev)
    return into


def _env(args: argparse.Namespace, tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tree / "python"), *args.extra_path])
    return env


def _git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repo", type=Path, required=True, help="sglang's history (a clone, bare is fine)"
    )
    parser.add_argument(
        "--cache", type=Path, required=True, help="fix_tests_devset.py's cache folder"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="a Python in which sglang's trees import"
    )
    parser.add_argument(
        "--extra-path", action="append", default=[], help="stand-ins first on PYTHONPATH"
    )
    parser.add_argument("--branch", default="main")
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--work", type=Path, default=Path("/tmp/history-bisect"))
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


if __name__ == "__main__":
    raise SystemExit(main())
