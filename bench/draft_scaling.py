"""Drafting is linear: `new` on N changed lines in one function vs the same N spread out.

Usage: ``python bench/draft_scaling.py [--lines 5000] [--per-function 50] [--repeat 3]``.
Writes two synthetic packages under a scratch folder, each with a fix diff changing
`--lines` lines: one function holding them all, and the same lines spread over functions
of `--per-function` changed lines each (every tenth change a line that occurs many times,
so its edit needs a context line). Each is drafted by `prtoggle new --from-diff` (a real
process, the whole command: draft, check, write), alternately, best of `--repeat`, wall
and CPU time of the child (on a shared machine, CPU time is what the command costs); the
figure is the ratio one-function / spread (1.0: linear; `new` was quadratic in the edits
of one function). The two recipes are checked to hold the same number of edits. The
children run `python -m prtoggle` in the current directory: run the script from the
checkout to measure (BENCHMARKS.md's "before" ran it from the branch point's checkout).
"""

from __future__ import annotations

import argparse
import difflib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--per-function", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prtoggle-draft-scaling-") as scratch:
        one = write_case(Path(scratch) / "one", lines=args.lines, functions=1)
        functions = max(1, args.lines // args.per_function)
        spread = write_case(Path(scratch) / "spread", lines=args.lines, functions=functions)
        best = {key: (float("inf"), float("inf")) for key in ("one", "spread")}
        for _ in range(args.repeat):
            for key, root in (("one", one), ("spread", spread)):
                wall, cpu = drafted_seconds(root)
                best[key] = (min(best[key][0], wall), min(best[key][1], cpu))
        same = edit_count(one) == edit_count(spread) == args.lines
    figures = {
        "changed lines": args.lines,
        "functions in the spread diff": functions,
        "edits drafted, the same in both": same,
        "one function, new, wall (s)": best["one"][0],
        "spread, new, wall (s)": best["spread"][0],
        "one function, new, CPU (s)": best["one"][1],
        "spread, new, CPU (s)": best["spread"][1],
        "one function / spread, wall": best["one"][0] / best["spread"][0],
        "one function / spread, CPU": best["one"][1] / best["spread"][1],
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{name:40s} {shown}")


def fix_texts(*, lines: int, functions: int) -> tuple[str, str]:
    """Pre-fix and post-fix text of a module whose fix changes `lines` lines in `functions`
    functions (as evenly as they divide)."""
    pre, post = [], []
    for number in range(functions):
        share = range(number * lines // functions, (number + 1) * lines // functions)
        pre.append(f"def f{number}(total):\n")
        post.append(f"def f{number}(total):\n")
        for i in share:
            if i % 10 == 9:  # a line that occurs many times: its match needs context
                pre.append("    total += 2\n")
                post.append("    total += 1\n")
            else:
                pre.append(f"    a{i} = {i}\n")
                post.append(f"    a{i} = {i} + 1\n")
            pre.append(f"    b{i} = total * 2\n")
            post.append(f"    b{i} = total * 2\n")
        pre.append("    return total\n\n\n")
        post.append("    return total\n\n\n")
    return "".join(pre), "".join(post)


def write_case(root: Path, *, lines: int, functions: int) -> Path:
    """A source root `root/src` holding package `pkg` post-fix, and `root/fix.diff`."""
    pre, post = fix_texts(lines=lines, functions=functions)
    package = root / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "m.py").write_text(post)
    hunks = difflib.unified_diff(
        pre.splitlines(keepends=True), post.splitlines(keepends=True), "a/pkg/m.py", "b/pkg/m.py"
    )
    (root / "fix.diff").write_text("diff --git a/pkg/m.py b/pkg/m.py\n" + "".join(hunks))
    return root


def drafted_seconds(root: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one `prtoggle new` on the case."""
    command = [sys.executable, "-m", "prtoggle", "new", "--from-diff", str(root / "fix.diff")]
    command += ["--pr", "1", "--source-root", str(root / "src"), "--out", str(root / "out")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"new failed on {root}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def edit_count(root: Path) -> int:
    return (root / "out" / "1.yaml").read_text().count("- match:")


if __name__ == "__main__":
    main()
