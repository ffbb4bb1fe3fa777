"""Edits and checks at release scale: prtoggle's apply_edits vs sglang's, and check per recipe.

Usage: ``python bench/authoring_speed.py WHEEL_A WHEEL_B [WHEEL_C ...] [--recipes 1000]``
with sglang wheels of consecutive releases, oldest first (e.g. 0.5.21, 0.5.22, 0.5.23).
The edits are those `prtoggle new --from-diff` drafts from each release diff (every
function changed between two releases, turned back into its older text). Both patchers
apply the same edits to the same function texts in one process, alternately, best of
`--repeat`. The check figure: a collection of `--recipes` one-target recipes drawn from
the last diff, checked on the newest wheel, parsing each module once per tree (what
`check --source-root` does; best of `--repeat`, a fresh tree each time) and, side by
side, once per target (a fresh tree per recipe; once). On a shared machine, where other
jobs change what a millisecond of wall time buys, the check's CPU time and its ratio to
a fixed pure-Python loop timed alternately with it in the same process are reported too.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.recipes.authoring.from_diff import DraftTarget, draft_from_diff
from prtoggle.recipes.authoring.recipe_file import RecipeHeader, render_recipe
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.registry import load_registry
from prtoggle.revert.source_patcher import apply_edits as prtoggle_apply_edits

Case = tuple[str, list[dict[str, str]]]
REFERENCE_LOOP = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--recipes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None, help="pickle of drafted targets")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    drafts = _drafts(args.wheels, cache=args.cache)
    figures: dict[str, Any] = {"functions changed": sum(len(d) for d in drafts)}
    figures.update(_apply_figures(drafts, args.wheels, repeat=args.repeat))
    figures.update(
        _check_figures(drafts[-1], args.wheels[-1], count=args.recipes, repeat=args.repeat)
    )
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{name:60s} {shown}")


def _drafts(wheels: Sequence[Path], *, cache: Path | None) -> list[list[tuple[str, Case]]]:
    """Per consecutive pair: (target, (post-fix function text, edits as EditSpec fields))."""
    if cache is not None and cache.is_file():
        return pickle.loads(cache.read_bytes())
    drafts = []
    for older, newer in itertools.pairwise(wheels):
        tree = open_source_tree(newer)
        draft = draft_from_diff(_release_diff(older, newer), source="release", roots=[tree])
        drafts.append([(t.target, _case(t, tree)) for t in draft.targets])
    if cache is not None:
        cache.write_bytes(pickle.dumps(drafts))
    return drafts


def _case(target: DraftTarget, tree: Any) -> Case:
    text = find_in_source_tree(target.target, source_root=tree).text
    return text, [{"match": e.match, e.kind: e.text} for e in target.edits]


def _apply_figures(
    drafts: list[list[tuple[str, Case]]], wheels: Sequence[Path], *, repeat: int
) -> dict[str, Any]:
    from sglang.srt.debug_utils.source_patcher.source_editor import apply_edits as sglang_apply
    from sglang.srt.debug_utils.source_patcher.types import EditSpec

    every = [
        (text, [EditSpec(**fields) for fields in edits])
        for draft in drafts
        for _, (text, edits) in draft
    ]
    cases = [case for case in every if _both_apply(sglang_apply, case)]
    edits = sum(len(e) for _, e in cases)
    best: dict[str, float] = {"sglang": float("inf"), "prtoggle": float("inf")}
    for _ in range(repeat):
        best["sglang"] = min(best["sglang"], _timed(sglang_apply, cases))
        best["prtoggle"] = min(best["prtoggle"], _timed(prtoggle_apply_edits, cases))
    return {
        "releases": " -> ".join(w.name.split("-")[1] for w in wheels),
        "functions both patchers revert (sglang refuses the rest)": len(cases),
        "functions sglang refuses (a match with blank lines it compares)": len(every) - len(cases),
        "edits applied (same EditSpec objects, same function texts)": edits,
        "sglang apply_edits (edits/s)": edits / best["sglang"],
        "prtoggle apply_edits (edits/s)": edits / best["prtoggle"],
        "prtoggle / sglang speed": best["sglang"] / best["prtoggle"],
    }


def _both_apply(sglang_apply: Callable[..., str], case: tuple[str, list[Any]]) -> bool:
    """Whether sglang's apply_edits takes the edits and gives prtoggle's text (blank lines
    aside: sglang keeps a trailing newline as it found it)."""
    text, edits = case
    try:
        theirs = sglang_apply(source=text, edits=edits)
    except Exception:  # sglang's PatchApplicationError: its matching keeps blank lines
        return False
    ours = prtoggle_apply_edits(source=text, edits=edits)
    return [line for line in theirs.splitlines() if line.strip()] == [
        line for line in ours.splitlines() if line.strip()
    ]


def _timed(apply: Callable[..., str], cases: list[tuple[str, list[Any]]]) -> float:
    start = time.perf_counter()
    for text, edits in cases:
        apply(source=text, edits=edits)
    return time.perf_counter() - start


def _check_figures(
    draft: list[tuple[str, Case]], wheel: Path, *, count: int, repeat: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prtoggle-bench-") as scratch:
        folder = Path(scratch) / "bench"
        folder.mkdir()
        for pr, (target, (_, edits)) in enumerate(draft[:count], start=1):
            specs = [_as_edit(fields) for fields in edits]
            header = RecipeHeader(pr, f"bench {target}")
            (folder / f"{pr}.yaml").write_text(render_recipe(header, [(target, specs)]))
        fixes = load_registry(dirs=[folder]).recipes
        best = {"wall": float("inf"), "cpu": float("inf"), "reference": float("inf")}
        for _ in range(repeat):
            best["reference"] = min(best["reference"], _reference_seconds())
            tree = open_source_tree(wheel)  # a fresh tree: every module is parsed again
            wall, cpu = time.perf_counter(), time.process_time()
            once = [c for fix in fixes for c in check_recipe(fix, tree=tree)]
            best["wall"] = min(best["wall"], time.perf_counter() - wall)
            best["cpu"] = min(best["cpu"], time.process_time() - cpu)
        start = time.perf_counter()
        for fix in fixes:
            check_recipe(fix, tree=open_source_tree(wheel))
        parse_each = time.perf_counter() - start
        cli = min(_cli_seconds(folder, wheel) for _ in range(repeat))
    per_recipe = 1000 / len(fixes)
    return {
        "recipes checked": len(fixes),
        "recipes ok": sum(c.ok for c in once),
        "check, each module parsed once (ms/recipe)": best["wall"] * per_recipe,
        "check, each module parsed once, CPU time (ms/recipe)": best["cpu"] * per_recipe,
        "check, a fresh tree per recipe (ms/recipe)": parse_each * per_recipe,
        "prtoggle check --source-root WHEEL, whole command (ms/recipe)": cli * per_recipe,
        "reference: a fixed pure-Python loop, best of 5 (ms)": best["reference"] * 1000,
        "check per recipe / reference loop": best["wall"] / len(fixes) / best["reference"],
    }


def _reference_seconds() -> float:
    """Best of 5 runs of a fixed pure-Python loop: what a millisecond buys right now."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for number in range(REFERENCE_LOOP):
            total += len(str(number)) % 7
        times.append(time.perf_counter() - start)
    return min(times)


def _cli_seconds(folder: Path, wheel: Path) -> float:
    env = {"PRTOGGLE_YAML_PATH": str(folder)}
    command = [sys.executable, "-m", "prtoggle", "check", "--collection", "bench"]
    start = time.perf_counter()
    subprocess.run(
        [*command, "--source-root", str(wheel)],
        env={**_environ(), **env},
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def _environ() -> dict[str, str]:
    return dict(os.environ)


def _as_edit(fields: dict[str, str]) -> Any:
    from prtoggle.patching.types import Edit

    kind = next(key for key in fields if key != "match")
    return Edit(match=fields["match"], kind=kind, text=fields[kind], line=0)  # type: ignore[arg-type]


def _release_diff(older: Path, newer: Path) -> str:
    old_zip, new_zip = zipfile.ZipFile(older), zipfile.ZipFile(newer)
    old_names = {n for n in old_zip.namelist() if n.startswith("sglang/") and n.endswith(".py")}
    new_names = {n for n in new_zip.namelist() if n.startswith("sglang/") and n.endswith(".py")}
    parts = []
    for name in sorted(old_names & new_names):
        old, new = old_zip.read(name).decode(), new_zip.read(name).decode()
        if old != new:
            lines = difflib.unified_diff(
                old.splitlines(), new.splitlines(), f"a/{name}", f"b/{name}", lineterm=""
            )
            parts.append("\n".join(lines) + "\n")
    return "".join(parts)


if __name__ == "__main__":
    main()
