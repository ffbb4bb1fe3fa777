"""Whole fixes on real commits: `prtoggle new` on each realfixes commit, judged against pre/.

Usage: ``python bench/realfixes_whole.py [REALFIXES] [--only NNN ...] [--verbose] [--json]``
(REALFIXES defaults to ../shared/realfixes next to the checkout, as its README says).

Each commit is drafted as its README says (``prtoggle new --from-diff NNN/fix.patch
--source-root NNN/post --json``, one process each) and judged by a static oracle that
does not use the drafting code, per module the fix touched:

- every `patches` target: its post-fix text (first decorator to the end of the block,
  as `inspect.getblock` ends it) with the edits applied by `prtoggle.apply_edits` must be
  its pre-fix text byte for byte (under the post-fix decorators);
- the post-fix module with those texts in place, then each `names` entry applied (the
  statements binding a defined or removed name taken out of its scope, the import names
  taken out of their statement, the `define` statements added), is compared with pre/:
  per scope (the module, each class on both sides) every name's binding statements by
  normalized AST dump (a docstring read as the `__doc__ = <value>` it binds), classes by
  their header and then member by member, the other statements in order; code under
  ``if TYPE_CHECKING:`` never runs and is left aside;
- every difference left must be listed in `not_reverted` (same file, a line of the
  statement, or where a removed one stood); every `not_reverted` entry must name a
  post-fix file and line that exist, and its `code` must be on that line.

Verdicts: whole (nothing differs, nothing listed), partial (what differs is listed),
dropped (a difference not listed), wrong (a target's text or a `define` that is not the
pre-fix code, a statement the spec does not allow in `define`, a `remove` of a name the
scope does not bind, or an entry naming a bad line), declined (`new` exit 2).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import inspect
import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prtoggle import apply_edits
from prtoggle.patching.define_code import parse_define

ALLOWED = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef)
ALLOWED_MORE = (ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Verdict:
    """One commit's judgement: its verdict, figures, and what made it so."""

    number: str
    verdict: str = "whole"
    targets: int = 0
    exact: int = 0
    names: int = 0
    listed: int = 0
    notes: list[str] = field(default_factory=list)

    def mark(self, verdict: str, note: str) -> None:
        order = ["whole", "partial", "dropped", "wrong"]
        if order.index(verdict) > order.index(self.verdict):
            self.verdict = verdict
        self.notes.append(f"{verdict}: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "realfixes"
    parser.add_argument("realfixes", nargs="?", type=Path, default=default)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folders = sorted(p for p in args.realfixes.iterdir() if p.is_dir() and p.name[:3].isdigit())
    if args.only:
        folders = [p for p in folders if p.name[:3] in args.only]
    verdicts = [judge(folder) for folder in folders]
    if args.json:
        print(json.dumps([v.__dict__ for v in verdicts], indent=2))
        return
    print(
        f"{'commit':16s} {'verdict':9s} {'targets':>8s} {'exact':>6s} {'names':>6s} {'listed':>7s}"
    )
    for v in verdicts:
        print(
            f"{v.number:16s} {v.verdict:9s} {v.targets:8d} {v.exact:6d} {v.names:6d} {v.listed:7d}"
        )
        for note in v.notes if args.verbose or v.verdict in ("wrong", "dropped") else []:
            print(f"    {note}")
    counts = {
        k: sum(v.verdict == k for v in verdicts)
        for k in ("whole", "partial", "dropped", "wrong", "declined")
    }
    targets, exact = sum(v.targets for v in verdicts), sum(v.exact for v in verdicts)
    print(f"{len(verdicts)} commits: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    names, listed = sum(v.names for v in verdicts), sum(v.listed for v in verdicts)
    print(f"targets byte-exact: {exact} of {targets}; names entries: {names}; ", end="")
    print(f"not_reverted entries: {listed}")


def judge(folder: Path) -> Verdict:
    verdict = Verdict(folder.name)
    with tempfile.TemporaryDirectory(prefix="realfixes-") as out:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "prtoggle",
                "new",
                "--from-diff",
                str(folder / "fix.patch"),
                "--source-root",
                str(folder / "post"),
                "--out",
                out,
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 2:
            verdict.verdict = "declined"
            verdict.notes.append(done.stderr.strip())
            return verdict
        record = json.loads(done.stdout)
        recipe = yaml.safe_load(Path(record["file"]).read_text(encoding="utf-8"))
    return judge_recipe(folder, recipe, verdict)


def judge_recipe(folder: Path, recipe: dict[str, Any], verdict: Verdict) -> Verdict:
    """Judge a drafted recipe (a YAML mapping) of commit `folder` against its pre/."""
    meta = json.loads((folder / "meta.json").read_text())
    files = [path.removeprefix("python/") for path in meta["py_files"]]
    modules = {_module_name(path): path for path in files}
    listed = recipe.get("not_reverted") or []
    verdict.listed, verdict.names = len(listed), len(recipe.get("names") or [])
    _check_listed(folder, listed, verdict)
    for path in files:
        _judge_module(folder, path, modules, recipe, verdict)
    if verdict.verdict == "whole" and listed:
        verdict.verdict = "partial"
    return verdict


def _judge_module(
    folder: Path, path: str, modules: dict[str, str], recipe: dict[str, Any], verdict: Verdict
) -> None:
    module = _module_name(path)
    post_text = _read(folder / "post" / path)
    pre_file = folder / "pre" / path
    listed = [e for e in recipe.get("not_reverted") or [] if e["file"] == path]
    if not pre_file.exists():
        added = recipe.get("added_modules") or []
        refused = any(module == name or module.startswith(name + ".") for name in added)
        if not listed and not refused:
            verdict.mark("dropped", f"{path}: a module added whole, not listed")
        return
    pre_text = _read(pre_file)
    post_lines, pre_lines = post_text.splitlines(), pre_text.splitlines()
    reverted = list(post_lines)
    spans = []
    for patch in recipe.get("patches") or []:
        if _owner(patch["target"], modules) != module:
            continue
        qualname = patch["target"][len(module) + 1 :]
        verdict.targets += 1
        got = _patched(patch, qualname, (post_text, pre_text), path, verdict)
        if got is not None:
            spans.append((got[0], got[1], got[2]))
    for first, last, text in sorted(spans, reverse=True):
        reverted[first - 1 : last] = text
    tree = ast.parse("\n".join(reverted) + "\n")
    tree.body = _docstrings(_hoist(tree.body))
    for entry in recipe.get("names") or []:
        if _owner(entry["scope"], modules) == module:
            _apply_names(tree, entry, module, pre_text, verdict)
    post_tree = ast.parse(post_text)
    post_tree.body = _docstrings(post_tree.body)
    mapping = _line_mapping(pre_lines, post_lines)
    _check_branch_guard(recipe, module, post_tree.body, verdict)
    differences = _compare(
        _docstrings(_hoist(ast.parse(pre_text).body)),
        tree.body,
        _hoist(post_tree.body),
        mapping,
        prefix="",
    )
    for what, first, last in differences:
        if not any(first - 1 <= e["line"] <= last + 1 for e in listed):
            verdict.mark("dropped", f"{path}:{first}-{last}: {what} differs, not listed")


def _patched(
    patch: dict[str, Any], qualname: str, texts: tuple[str, str], path: str, verdict: Verdict
) -> tuple[int, int, list[str]] | None:
    post, pre = texts
    new_node, new_span = _find(post, qualname)
    old_node, old_span = _find(pre, qualname)
    if new_node is None or old_node is None:
        verdict.mark("wrong", f"{path}: {qualname} is not on both sides")
        return None
    post_lines, pre_lines = post.splitlines(), pre.splitlines()
    new_text = "".join(f"{line}\n" for line in post_lines[new_span[0] - 1 : new_span[1]])
    decorators = post_lines[new_span[0] - 1 : new_node.lineno - 1]
    expected = "".join(
        f"{line}\n" for line in [*decorators, *pre_lines[old_node.lineno - 1 : old_span[1]]]
    )
    try:
        got = apply_edits(source=textwrap.dedent(new_text), edits=patch["edits"])
    except Exception as exc:
        verdict.mark("wrong", f"{path}: {qualname}: the edits do not apply ({exc})")
        return None
    indent = new_text[: len(new_text) - len(new_text.lstrip())]
    if got != textwrap.dedent(expected):
        verdict.mark("wrong", f"{path}: {qualname}: not the pre-fix text byte for byte")
        return None
    verdict.exact += 1
    return (
        new_span[0],
        new_span[1],
        [f"{indent}{line}" if line else "" for line in got.splitlines()],
    )


def _apply_names(
    tree: ast.Module, entry: dict[str, Any], module: str, pre: str, verdict: Verdict
) -> None:
    scope = entry["scope"]
    body = tree.body
    if scope != module:
        owner = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.ClassDef) and n.name == scope.rsplit(".", 1)[1]
            ),
            None,
        )
        if owner is None or scope.count(".") != module.count(".") + 1:
            verdict.mark("wrong", f"names scope {scope} is not a top-level class of {module}")
            return
        body = owner.body
    define = entry.get("define") or ""
    try:
        statements = parse_define(define).body
    except SyntaxError as exc:
        verdict.mark("wrong", f"names {scope}: define does not parse ({exc.msg})")
        return
    for node in statements:
        if not _allowed(node):
            verdict.mark("wrong", f"names {scope}: {type(node).__name__} not allowed in define")
    if not _define_is_pre_text(define, pre):
        verdict.mark("wrong", f"names {scope}: define is not the pre-fix text")
    defined = set().union(*(_bound(n) for n in statements)) if statements else set()
    removed = set(entry.get("remove") or [])
    bound_now = set().union(*(_bound(n) for n in body if _simple(n))) if body else set()
    for name in removed - bound_now:
        verdict.mark("wrong", f"names {scope}: remove {name} is not bound there")
    gone = defined | removed
    kept: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom) and _simple(node):
            node.names = [a for a in node.names if _alias_name(a) not in gone]
            if node.names:
                kept.append(node)
        elif not (_simple(node) and _bound(node) & gone):
            kept.append(node)
    for node in statements:  # a class defined back whole: its docstring read as the rest
        if isinstance(node, ast.ClassDef):
            node.body = _docstrings(node.body)
    body[:] = kept + statements


def _compare(
    pre: list[ast.stmt],
    rev: list[ast.stmt],
    post: list[ast.stmt],
    mapping: list[int],
    *,
    prefix: str,
) -> list[tuple[str, int, int]]:
    """What differs between a pre-fix body and the reverted one: (what, post-fix span)."""
    out: list[tuple[str, int, int]] = []
    pre_names, rev_names = _bindings(pre), _bindings(rev)
    post_spans = _spans(post)
    for name in sorted(set(pre_names) | set(rev_names)):
        old, new = pre_names.get(name, []), rev_names.get(name, [])
        span = post_spans.get(name) or _mapped(old, mapping)
        if (
            len(old) == len(new) == 1
            and isinstance(old[0], ast.ClassDef)
            and isinstance(new[0], ast.ClassDef)
        ):
            if _header(old[0]) != _header(new[0]):
                out.append((f"class {prefix}{name} header", *span))
            post_class = next(
                (n for n in post if isinstance(n, ast.ClassDef) and n.name == name), None
            )
            out += _compare(
                old[0].body,
                new[0].body,
                post_class.body if post_class else [],
                mapping,
                prefix=f"{prefix}{name}.",
            )
        elif sorted(map(_key, old)) != sorted(map(_key, new)):
            out.append((f"{prefix}{name}", *span))
    others_pre = [_key(n) for n in pre if not _simple(n) and not _type_checking(n)]
    others_rev = [n for n in rev if not _simple(n) and not _type_checking(n)]
    others_post = [n for n in post if not _simple(n) and not _type_checking(n)]
    matcher = difflib.SequenceMatcher(
        None, others_pre, [_key(n) for n in others_rev], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        post_keys = {_key(n): n for n in others_post}
        for node in others_rev[j1:j2]:
            at = post_keys.get(_key(node), node)
            out.append((f"{prefix}code", at.lineno, at.end_lineno or at.lineno))
        if j1 == j2:
            out.append((f"{prefix}code removed", *_removed_span(pre, others_pre[i1:i2], mapping)))
    return out


def _hoist(body: list[ast.stmt]) -> list[ast.stmt]:
    """The body as if each top-level `if` without else ran: its simple bindings hoisted."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and not node.orelse and not _type_checking(node):
            rest = [n for n in node.body if not _simple(n)]
            out.extend(n for n in node.body if _simple(n))
            out.append(
                ast.copy_location(
                    ast.If(test=node.test, body=rest or [ast.Pass()], orelse=[]), node
                )
            )
        else:
            out.append(node)
    return out


def _docstrings(body: list[ast.stmt]) -> list[ast.stmt]:
    """The body (and its classes' bodies) with a docstring read as what it binds:
    `__doc__ = <its value>` (a define may bind the pre-fix value)."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            node.body = _docstrings(node.body)
    first = body[0] if body else None
    value = first.value if isinstance(first, ast.Expr) else None
    if first is None or not isinstance(value, ast.Constant) or not isinstance(value.value, str):
        return body
    target = ast.Name(id="__doc__", ctx=ast.Store())
    assign = ast.Assign(targets=[target], value=value, lineno=first.lineno)
    return [ast.copy_location(assign, first), *body[1:]]


def _check_branch_guard(
    recipe: dict[str, Any], module: str, post: list[ast.stmt], verdict: Verdict
) -> None:
    """Names changed under an `if` revert soundly only when the recipe removes a name that
    only such a branch binds (absent where it did not run: the revert is refused there)."""
    top = set().union(*(_bound(n) for n in post if _simple(n))) if post else set()
    branch = {
        name
        for node in post
        if isinstance(node, ast.If)
        for n in node.body
        if _simple(n)
        for name in _bound(n)
    }
    entries = [e for e in recipe.get("names") or [] if e["scope"] == module]
    removed = {name for e in entries for name in e.get("remove") or []}
    defined = {
        name
        for e in entries
        for n in parse_define(e.get("define") or "").body
        for name in _bound(n)
    }
    if (removed | defined) & (branch - top) and not removed & (branch - top):
        verdict.mark(
            "wrong",
            f"{module}: names under an `if` changed, no remove refusing where it did not run",
        )


def _removed_span(pre: list[ast.stmt], keys: list[str], mapping: list[int]) -> tuple[int, int]:
    nodes = [n for n in pre if not _simple(n) and _key(n) in keys]
    return _mapped(nodes, mapping)


def _bindings(body: list[ast.stmt]) -> dict[str, list[ast.stmt]]:
    out: dict[str, list[ast.stmt]] = {}
    for node in body:
        if not _simple(node):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                reduced = type(node)(
                    names=[alias],
                    **(
                        {}
                        if isinstance(node, ast.Import)
                        else {"module": node.module, "level": node.level}
                    ),
                )
                out.setdefault(_alias_name(alias), []).append(ast.copy_location(reduced, node))
            continue
        for name in _bound(node):
            out.setdefault(name, []).append(node)
    return out


def _spans(body: list[ast.stmt]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        for name in _bound(node):
            low, high = out.get(name, (first, node.end_lineno or node.lineno))
            out[name] = (min(low, first), max(high, node.end_lineno or node.lineno))
    return out


def _mapped(nodes: list[ast.stmt], mapping: list[int]) -> tuple[int, int]:
    if not nodes:
        return (1, 1)
    first = min(n.lineno for n in nodes)
    last = max(n.end_lineno or n.lineno for n in nodes)
    get = lambda line: mapping[min(line, len(mapping)) - 1] if mapping else 1  # noqa: E731
    return get(first), get(last)


def _line_mapping(pre: list[str], post: list[str]) -> list[int]:
    """Each pre-fix line's post-fix line (where it is, or where it stood)."""
    mapping = [1] * max(len(pre), 1)
    matcher = difflib.SequenceMatcher(None, pre, post, autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        for k in range(i1, i2):
            mapping[k] = j1 + (k - i1) + 1 if tag == "equal" else j1 + 1
    return mapping


def _simple(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module != "__future__" and all(a.name != "*" for a in node.names)
    if isinstance(node, ast.Import | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return True
    if isinstance(node, ast.AnnAssign):
        return node.value is not None and isinstance(node.target, ast.Name)
    if isinstance(node, ast.Assign):
        return all(
            isinstance(t, ast.Name)
            or (
                isinstance(t, ast.Tuple | ast.List) and all(isinstance(e, ast.Name) for e in t.elts)
            )
            for t in node.targets
        )
    return False


def _allowed(node: ast.stmt) -> bool:
    return isinstance(node, ALLOWED + ALLOWED_MORE) and _simple(node)


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {_alias_name(a) for a in node.names}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
    names = set()
    for target in targets:
        for item in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
            if isinstance(item, ast.Name):
                names.add(item.id)
    return names


def _alias_name(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


def _key(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _header(node: ast.ClassDef) -> str:
    return _key(
        ast.ClassDef(
            name=node.name,
            bases=node.bases,
            keywords=node.keywords,
            body=[],
            decorator_list=node.decorator_list,
            type_params=[],
        )
    )


def _type_checking(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or node.orelse:
        return False
    test = node.test
    return (
        test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", "")
    ) == "TYPE_CHECKING"


def _define_is_pre_text(define: str, pre: str) -> bool:
    """Each def or class of `define` is the pre-fix text of one, byte for byte (dedented)."""
    lines = define.splitlines(keepends=True)
    pre_blocks = {textwrap.dedent(b) for b in _blocks(pre)}
    for node in parse_define(define).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            text = textwrap.dedent("".join(inspect.getblock(lines[first - 1 :])))
            if text not in pre_blocks:
                return False
    return True


def _blocks(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append("".join(inspect.getblock(lines[first - 1 :])))
    return out


def _find(text: str, qualname: str) -> tuple[ast.AST | None, tuple[int, int]]:
    """The last def of `qualname` (module or class nesting) and its lines, getblock-ended."""
    body = ast.parse(text).body
    node: Any = None
    for part in qualname.split("."):
        found = [
            n
            for n in body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.name == part
            and not _accessor(n)
        ]
        if not found:
            return None, (0, 0)
        node = found[-1]
        body = node.body
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = text.splitlines(keepends=True)
    return node, (first, first - 1 + len(inspect.getblock(lines[first - 1 :])))


def _accessor(node: Any) -> bool:
    return any(
        (isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter"))
        or getattr(d, "id", "") == "overload"
        for d in node.decorator_list
    )


def _check_listed(folder: Path, listed: list[dict[str, Any]], verdict: Verdict) -> None:
    for entry in listed:
        path = folder / "post" / entry["file"]
        if not path.is_file():
            verdict.mark("wrong", f"not_reverted {entry['file']}: no such post-fix file")
            continue
        lines = _read(path).splitlines()
        if not 1 <= entry["line"] <= len(lines):
            verdict.mark("wrong", f"not_reverted {entry['file']}:{entry['line']}: out of range")
        elif entry.get("code") and entry["code"] not in lines[entry["line"] - 1]:
            verdict.mark(
                "wrong", f"not_reverted {entry['file']}:{entry['line']}: code not on the line"
            )
        verdict.notes.append(f"listed {entry['file']}:{entry['line']}: {entry['reason']}")


def _owner(scope: str, modules: dict[str, str]) -> str | None:
    best = [m for m in modules if scope == m or scope.startswith(f"{m}.")]
    return max(best, key=len) if best else None


def _module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _read(path: Path) -> str:
    return importlib.util.decode_source(path.read_bytes())


if __name__ == "__main__":
    main()
