"""Whole fixes judged by importing: each touched module pre-fix, and post-fix reverted, compared.

Usage:
  python bench/whole_fix_imports.py realfixes [REALFIXES] [--trees DIR] [--only NNN ...] [--json]
  python bench/whole_fix_imports.py release --older WHEEL [--under PREFIX ...] [--json]

`realfixes`: each commit of ../shared/realfixes drafted as its README says (`prtoggle new
--from-diff NNN/fix.patch --source-root NNN/post`); its post-fix files are imported under
their real names in place of the installed sglang's (whose other modules stand in for
their imports). With `--trees DIR`, each commit's full sglang tree (its `python/sglang`,
extracted once into DIR from sglang's history, `--mirror`) is imported instead, no sglang
installed: run it with the Python of an environment where sglang's tree of 2026-08
imports (../shared/sglang-import-venv.sh), GPU-only packages that sglang imports for
names stood in for (`stand_ins.py`).

`release`: one recipe per module changed between the older wheel (0.5.22) and the
installed sglang (0.5.23) under each PREFIX, drafted from that module's diff with the
installed package as the source root.

Per case, in a process forked from a warm parent (torch and transformers imported): the
touched modules are imported, the drafted recipe is reverted by prtoggle's runtime
(`prtoggle.reverted`, as the start-up hook of `prtoggle run` lands it in its children),
and each module's pre-fix file is executed as a separate module object of the same name
(never put in sys.modules: its imports resolve to the modules loaded, reverted ones
included) and compared with the reverted module by `module_compare.py`.

Per module: whole, differs (each name and why), not importable (why: the post-fix module,
or the pre-fix file, fails to import here), refused (the revert did not land: why), added
(a module the fix added whole: it has no pre-fix counterpart). A case is whole when every
module is; `claims whole, differs` counts a recipe without `not_reverted` (what `new`
skipped lies outside the package or never runs) whose revert landed and differs: it
must be 0; `claims whole, refused` those whose revert was refused (said when run, never
silent). A case imports when every module does, post-fix and pre-fix.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stand_ins
from module_compare import compare_modules, load_module_file

ROOT = Path(__file__).resolve().parents[1]
STUBS = ROOT / "tests" / "sglang" / "stubs"
WARM = (
    "torch",
    "transformers",
    "numpy",
    "sglang.srt.utils",
    "sglang.srt.server_args",
    "sglang.srt.layers.quantization",
    "sglang.srt.managers.schedule_batch",
)
"""Imported once by the parent (each case's child is forked from it); a case's post-fix
files replace their installed modules in the child all the same."""
WARM_WITHOUT_SGLANG = tuple(name for name in WARM if not name.startswith("sglang"))
"""With `--trees`: sglang is imported by each case's child, from the commit's tree."""
CHILD_TIMEOUT_S = 240
MIRROR = next(
    (p / ".mirror/bytedance-iaas+sglang/repo" for p in ROOT.parents if (p / ".mirror").is_dir()),
    ROOT.parent / ".mirror/bytedance-iaas+sglang/repo",
)
"""sglang's history (`--trees` extracts each commit's tree from it): the nearest above."""


@dataclass
class Module:
    """One module a case touches: its name, its pre-fix file (None: added), its post-fix
    file (None: the installed one)."""

    name: str
    pre: Path | None
    post: Path | None = None


@dataclass
class Case:
    """One recipe to draft and judge."""

    label: str
    diff: str
    source_root: Path | None
    modules: list[Module]
    pr: int | None = None
    tree: Path | None = None
    """A full source tree of the post-fix commit (its `python/`): the case's child (forked
    from a parent that imported no sglang) imports sglang from it."""


@dataclass
class Result:
    """A case judged: its verdict, each module's, and what the recipe says of itself."""

    label: str
    verdict: str = "whole"
    modules: dict[str, str] = field(default_factory=dict)
    differs: dict[str, dict[str, str]] = field(default_factory=dict)
    claims_whole: bool = False
    not_reverted: list[str] = field(default_factory=list)


def main() -> None:
    args = _arguments()
    cases = _realfixes_cases(args) if args.source == "realfixes" else _release_cases(args)
    _warm(WARM if args.trees is None else WARM_WITHOUT_SGLANG)
    results = []
    for case in cases:
        results.append(judge(case))
        if not args.json:
            _print(results[-1])
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        print(summary(results), file=sys.stderr)
        return
    print(summary(results))


def _print(result: Result) -> None:
    claim = " (recipe claims whole)" if result.claims_whole else ""
    print(f"{result.label:44s} {result.verdict}{claim}")
    for module, verdict in result.modules.items():
        if verdict != "whole":
            print(f"    {module}: {verdict}")
        for name, why in result.differs.get(module, {}).items():
            print(f"        {name}: {why}")
    if result.verdict == "differs":
        for entry in result.not_reverted:
            print(f"    listed {entry}")
    sys.stdout.flush()


def summary(results: list[Result]) -> str:
    """Counts of cases and of modules per verdict, of cases whose every module imports
    (post-fix and pre-fix), and of wrong claims."""
    kinds = ("whole", "differs", "refused", "not importable", "declined", "error")
    cases = {k: sum(r.verdict == k for r in results) for k in kinds}
    verdicts = [_kind(v) for r in results for v in r.modules.values()]
    modules = {k: verdicts.count(k) for k in (*kinds, "added")}
    failed = ("not importable", "declined", "error")
    importing = sum(not any(_kind(v) in failed for v in r.modules.values()) for r in results)
    wrong = sum(r.claims_whole and r.verdict == "differs" for r in results)
    refused = sum(r.claims_whole and r.verdict == "refused" for r in results)
    return (
        f"{len(results)} cases: "
        + ", ".join(f"{n} {k}" for k, n in cases.items())
        + f"\n{len(verdicts)} modules: "
        + ", ".join(f"{n} {k}" for k, n in modules.items())
        + f"\ncases whose every module imports, pre-fix and post-fix: {importing}"
        + f"\nrecipe claims whole, differs: {wrong}"
        + f"\nrecipe claims whole, refused (said when run): {refused}"
    )


def judge(case: Case) -> Result:
    """Draft the case's recipe, then judge it in a forked child."""
    result = Result(case.label)
    with tempfile.TemporaryDirectory(prefix="whole-imports-") as scratch:
        out = Path(scratch) / "drafted"
        drafted = _draft(case, out)
        if "error" in drafted:
            result.verdict = "declined"
            result.modules = {m.name: f"declined: {drafted['error']}" for m in case.modules}
            return result
        recipe = yaml.safe_load(Path(drafted["file"]).read_text(encoding="utf-8"))
        result.not_reverted = [
            f"{e['file']}:{e['line']}: {e['reason']}" for e in recipe.get("not_reverted") or []
        ]
        result.claims_whole = not result.not_reverted  # skipped: outside, or never runs
        spec = f"{out.name}:{recipe['pr']}"
        judged = _in_child(lambda: _judge_here(case.modules, out, spec, tree=case.tree))
    failed = f"error: {judged.get('error', '?')}"
    result.modules = judged.get("modules", {m.name: failed for m in case.modules})
    result.differs = judged.get("differs", {})
    verdicts = [_kind(v) for v in result.modules.values()]
    for kind in ("error", "refused", "differs", "added", "not importable"):
        if kind in verdicts:
            result.verdict = "differs" if kind == "added" else kind
            break
    return result


def _judge_here(
    modules: list[Module], out: Path, spec: str, *, tree: Path | None = None
) -> dict[str, Any]:
    """In the child: import (sglang from `tree` when given), revert, load each pre-fix
    file, compare."""
    if tree is not None:
        sys.path.insert(0, str(tree))
        stand_ins.install()
        _warm(tuple(name for name in WARM if name not in WARM_WITHOUT_SGLANG))
    from prtoggle.errors import PrToggleError
    from prtoggle.recipes.registry import load_registry
    from prtoggle.revert import toggle

    verdicts: dict[str, str] = {}
    differs: dict[str, dict[str, str]] = {}
    _override([m for m in modules if m.post is not None])
    imported, noise = [], {}
    for module in modules:
        try:
            __import__(module.name)
        except BaseException as exc:
            verdicts[module.name] = f"not importable: {_why(exc)}"
            continue
        imported.append(module)
        noise[module.name] = _load_noise(module.name)
    registry = load_registry(dirs=[out])
    try:
        with toggle.reverted(spec, registry=registry):
            for module in imported:
                verdicts[module.name] = _compare_one(module, differs, noise[module.name])
    except PrToggleError as exc:
        for module in imported:
            verdicts[module.name] = _refused(module, exc)
    return {"modules": verdicts, "differs": differs}


def _refused(module: Module, exc: BaseException) -> str:
    """A refused revert: a finding, unless the pre-fix file does not load here either (an
    import of a name the other modules no longer have): then not comparable here."""
    if module.pre is not None:
        try:
            load_module_file(module.name, module.pre, as_file=_file_of(module.name))
        except BaseException as failed:
            return f"not importable: the pre-fix file: {_why(failed)} (the revert: refused)"
    return f"refused: {_why(exc)}"


def _load_noise(name: str) -> set[str]:
    """The names that differ between two loads of the same post-fix file (a registry the
    module's code fills, a custom op registered once): not comparable by loading again."""
    try:
        again = load_module_file(name, Path(_file_of(name) or ""))
    except BaseException:
        return set()
    return set(compare_modules(again, sys.modules[name]).differs)


def _compare_one(module: Module, differs: dict[str, dict[str, str]], noise: set[str]) -> str:
    if module.pre is None:
        return "added: the fix added the module whole"
    try:
        pre = load_module_file(module.name, module.pre, as_file=_file_of(module.name))
    except BaseException as exc:
        return f"not importable: the pre-fix file: {_why(exc)}"
    compared = compare_modules(pre, sys.modules[module.name])
    found = dict(compared.differs)
    left_aside = sorted(set(found) & noise)
    found = {k: v for k, v in found.items() if k not in noise}
    aside = f" ({len(left_aside)} names differ between two loads: {', '.join(left_aside)})"
    aside = (aside if left_aside else "") + (" (a removed name lent by prtoggle)" * compared.lent)
    if not found:
        return "whole" + aside
    differs[module.name] = found
    return f"differs: {len(found)} names" + aside


def _override(modules: list[Module]) -> None:
    """Import these modules from their post-fix files, under their real names."""
    import importlib.abc
    import importlib.util

    files = {m.name: m.post for m in modules}

    class PostFixFiles(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object, target: object = None) -> Any:
            found = files.get(name)
            if found is None:
                return None
            return importlib.util.spec_from_file_location(name, found)

    for name in files:
        sys.modules.pop(name, None)
        parent, _, last = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], last):
            delattr(sys.modules[parent], last)  # the installed one, imported by the parent
    sys.meta_path.insert(0, PostFixFiles())


def _file_of(name: str) -> str | None:
    """The imported module's file (the pre-fix file runs as if it lay there)."""
    found = getattr(sys.modules.get(name), "__file__", None)
    return found if isinstance(found, str) else None


def _draft(case: Case, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "prtoggle", "new", "--from-diff", "-", "--out", str(out)]
    if case.source_root is not None:
        command += ["--source-root", str(case.source_root)]
    if case.pr is not None:
        command += ["--pr", str(case.pr), "--title", case.label]
    done = subprocess.run(
        [*command, "--json"],
        input=case.diff,
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
    )
    if done.returncode not in (0, 1):
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    drafted: dict[str, Any] = json.loads(done.stdout)
    return drafted


def _in_child(job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `job` in a forked child (stdout and stderr silenced); its JSON result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        signal.alarm(CHILD_TIMEOUT_S)
        try:
            data = json.dumps(job())
        except BaseException as exc:
            data = json.dumps({"error": f"the judge failed: {_why(exc)}"})
        with os.fdopen(write, "w") as stream:
            stream.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as stream:
        data = stream.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return {"error": f"the judge died (wait status {status})"}
    result: dict[str, Any] = json.loads(data)
    return result


def _warm(names: tuple[str, ...]) -> None:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(STUBS))
    for name in names:
        try:
            __import__(name)
        except Exception as exc:
            logging.getLogger(__name__).debug("warm import %s failed: %s", name, exc)


def _realfixes_cases(args: argparse.Namespace) -> list[Case]:
    folders = sorted(p for p in args.data.iterdir() if p.is_dir() and p.name[:3].isdigit())
    if args.only:
        folders = [p for p in folders if p.name[:3] in args.only]
    cases = []
    for folder in folders:
        meta = json.loads((folder / "meta.json").read_text())
        modules = []
        for path in meta["py_files"]:
            relative = path.removeprefix("python/")
            pre = folder / "pre" / relative
            post = folder / "post" / relative
            modules.append(Module(_module_name(relative), pre if pre.exists() else None, post))
        diff = (folder / "fix.patch").read_text(encoding="utf-8")
        tree = None
        if args.trees is not None:
            tree = _commit_tree(args.trees, args.mirror, meta["sha"])
            modules = [Module(m.name, m.pre) for m in modules]  # the tree's own files
        cases.append(Case(folder.name, diff, folder / "post", modules, tree=tree))
    return cases


def _commit_tree(trees: Path, mirror: Path, sha: str) -> Path:
    """The `python/` folder of sglang's full tree at `sha`, extracted once from the mirror."""
    tree = trees / sha
    if not tree.is_dir():
        partial = trees / f"{sha}.partial"
        partial.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", f"--git-dir={mirror}", "archive", sha, "python/sglang"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive.stdout, check=True)
        partial.rename(tree)
    return tree / "python"


def _release_cases(args: argparse.Namespace) -> list[Case]:
    import sglang

    installed = Path(sglang.__file__).resolve().parents[1]
    older = zipfile.ZipFile(args.older)
    scratch = Path(tempfile.mkdtemp(prefix="sglang-older-"))
    cases = []
    names = sorted(
        n for n in older.namelist() if n.endswith(".py") and n.startswith(tuple(args.under))
    )
    for number, name in enumerate(names, 1):
        new_file = installed / name
        if not new_file.is_file():
            continue
        old_text, new_text = older.read(name).decode(), new_file.read_text(encoding="utf-8")
        if old_text == new_text:
            continue
        pre = scratch / name
        pre.parent.mkdir(parents=True, exist_ok=True)
        pre.write_text(old_text, encoding="utf-8")
        diff = _file_diff(name, old_text, new_text)
        module = Module(_module_name(name), pre)
        cases.append(Case(name, diff, None, [module], pr=9_000_000 + number))
    return cases


def _file_diff(name: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"a/python/{name}", f"b/python/{name}", lineterm=""
    )
    return f"diff --git a/python/{name} b/python/{name}\n" + "\n".join(lines) + "\n"


def _module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), str(STUBS), env.get("PYTHONPATH", "")])
    )
    return env


def _kind(verdict: str) -> str:
    """A module verdict's kind: whole, differs, refused, not importable, added, declined."""
    kinds = ("whole", "differs", "refused", "not importable", "added", "declined")
    return next((k for k in kinds if verdict.startswith(k)), "error")


def _why(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text if len(text) <= 200 else text[:197] + "..."


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", choices=("realfixes", "release"))
    default = ROOT.parent / "shared" / "realfixes"
    parser.add_argument("data", nargs="?", type=Path, default=default)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--older", type=Path, help="the older sglang wheel (release)")
    parser.add_argument("--under", nargs="+", default=["sglang/srt/mem_cache/"])
    parser.add_argument(
        "--trees",
        type=Path,
        help="realfixes: judge each commit importing sglang from its full tree, kept here",
    )
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="sglang's git history")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.source == "release" and args.older is None:
        parser.error("release needs --older WHEEL (the sglang 0.5.22 wheel)")
    return args


if __name__ == "__main__":
    main()
