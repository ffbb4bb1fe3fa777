"""`check` of a recipe's `names` and `not_reverted`, statically (a source tree) or live (imported).

A names entry checks ok when its scope exists (the module's file or module, a class at its
top level), every `remove` name is bound at the scope's top level, `define` compiles, and
the global check passes: every global read by the functions the recipe edits or defines in
that module is a top-level name of the module after the change (or a builtin). A
`not_reverted` entry checks ok when its file exists under the package's root, its line is
in range and its `code` (if any) is in the file. Nothing is executed: recipe code is
compiled, never run.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Literal

from prtoggle.errors import PrToggleError
from prtoggle.patching.define_code import FUTURE_ANNOTATIONS, compile_define
from prtoggle.patching.global_reads import global_reads, missing_in, unresolved_read
from prtoggle.patching.lines import split_lines
from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.source_tree import find_in_source_tree, module_level_names
from prtoggle.patching.swap import build_replacement
from prtoggle.patching.targets import function_source, import_target
from prtoggle.recipes.names_schema import MODULE_REMOVED_REASON, NameChange, NotReverted
from prtoggle.recipes.schema import Recipe

WholeFixStatus = Literal["ok", "stale", "absent", "error"]
NAMES_PREFIX = "names:"
NOT_REVERTED_PREFIX = "not_reverted:"


@dataclass(frozen=True)
class WholeFixCheck:
    """One names or not_reverted entry checked: `target` names it; status as TargetCheck's."""

    target: str
    status: WholeFixStatus
    message: str = ""
    unresolved: str = ""
    """The global the entry's own `define` reads that its module does not bind after the
    revert (nor a builtin), when that is why it does not check."""


def check_whole_fix(recipe: Recipe, *, tree: SourceTree | None) -> list[WholeFixCheck]:
    """Every `names` and `not_reverted` entry of `fix`, checked on `tree` or the live modules."""
    edited: dict[str, tuple[CodeType, str] | None] = {}  # a patch's code, built once
    results = [_check_names(recipe, change, tree=tree, edited=edited) for change in recipe.names]
    results += [_check_kept(item, tree=tree) for item in recipe.not_reverted]
    return results


def unresolved_patch_reads(recipe: Recipe, *, tree: SourceTree) -> list[tuple[str, str]]:
    """(target, message) of each patch of `fix` whose reverted code reads a global that its
    module on `tree` does not bind after the recipe's names (nor a builtin) and that the
    post-fix code did not read either: the run-time global check refuses such a revert."""
    problems = []
    for patch in recipe.patches:
        try:
            source = find_in_source_tree(patch.target, source_root=tree)
            edited = build_replacement(source, [recipe.edit_layer(patch.target)], evaluate=False)
            original = build_replacement(source, [], evaluate=False)
        except PrToggleError:
            continue  # the target's own check reports it
        module = _module_of(patch.target, tree)
        after = set(source.module_names or ()) | global_reads(original.code)
        for other in recipe.names:
            if other.scope == module:
                after.difference_update(other.remove)
                after.update(other.defined)
        missing = missing_in(edited.code, names=after)
        if source.module_names is not None and missing:
            why = f"reads `{missing[0]}`, not defined in module {module} after the revert"
            problems.append((patch.target, why))
    return problems


def _module_of(target: str, tree: SourceTree) -> str:
    """The module of a target on `tree`: its longest prefix that is a module file there."""
    parts = target.split(".")
    for end in range(len(parts) - 1, 0, -1):
        base = "/".join(parts[:end])
        if tree.read(f"{base}.py") is not None or tree.read(f"{base}/__init__.py") is not None:
            return ".".join(parts[:end])
    return target.rpartition(".")[0]


def _check_names(
    recipe: Recipe,
    change: NameChange,
    *,
    tree: SourceTree | None,
    edited: dict[str, tuple[CodeType, str] | None],
) -> WholeFixCheck:
    target = f"{NAMES_PREFIX}{change.scope}"
    top = change.scope.split(".", 1)[0]
    if tree is not None and not tree.has_package(top):
        return WholeFixCheck(target, "absent", f"package {top} is not in {tree.label}")
    try:
        scope = _static_scope(change.scope, tree) if tree is not None else _live_scope(change)
    except _Stale as exc:
        return WholeFixCheck(target, "stale", f"{change.scope}: {exc}")
    except PrToggleError as exc:
        return WholeFixCheck(target, "error", str(exc))
    missing = [n for n in change.remove if scope.names is not None and n not in scope.names]
    if missing:
        where = f"{scope.kind} {change.scope}"
        return WholeFixCheck(
            target, "stale", f"remove: `{missing[0]}` is not bound at the top level of {where}"
        )
    first_line = change.define_line or change.line
    try:
        code = _define_code(
            change.define or "pass", first_line, scope.class_name, scope.future_flags
        )
    except SyntaxError as exc:
        exc.filename = str(recipe.path)  # the message names the recipe's file
        return WholeFixCheck(target, "error", f"define does not compile: {exc}")
    problem = _global_check(recipe, change, scope, code, tree=tree, edited=edited)
    if problem is None:
        return WholeFixCheck(target, "ok")
    label, name = problem
    own = name if label == f"define of {change.scope}" else ""
    return WholeFixCheck(target, "error", unresolved_read(label, name, scope.module), own)


@dataclass(frozen=True)
class _Scope:
    """What a check knows of a scope: the module's top-level names, the scope's own names."""

    module: str
    module_names: frozenset[str] | None  # None: a star import makes them unknown
    names: frozenset[str] | None
    class_name: str | None
    file: str  # the module's file: the edited functions checked are those in it
    future_flags: int = 0  # `from __future__ import annotations`: define compiles with it

    @property
    def kind(self) -> str:
        return "module" if self.class_name is None else "class"


class _Stale(Exception):
    """The scope is not where the recipe says (the code moved on)."""


def _static_scope(scope: str, tree: SourceTree) -> _Scope:
    for module, class_name in ((scope, None), (scope.rpartition(".")[0], scope.rpartition(".")[2])):
        base = module.replace(".", "/")
        found = tree.read(f"{base}.py") or tree.read(f"{base}/__init__.py")
        if found is None or not module:
            continue
        top, classes, flags = _module_facts(found.text)
        if class_name is None:
            return _Scope(module, top, top, None, found.name, flags)
        if class_name not in classes:
            raise _Stale(f"{found.name} has no class {class_name!r} at its top level")
        return _Scope(module, top, classes[class_name], class_name, found.name, flags)
    raise _Stale(f"no module file for it under {tree.label}")


@functools.lru_cache(maxsize=256)
def _module_facts(
    text: str,
) -> tuple[frozenset[str] | None, dict[str, frozenset[str]], int]:
    """A module text's top-level names, its top-level classes' names (the first class of
    each name), its future flags: parsed once per text (drafting checks the same files
    entry after entry, draft after draft). Callers do not change what it returns."""
    parsed = ast.parse(text)
    classes: dict[str, frozenset[str]] = {}
    for node in parsed.body:
        if isinstance(node, ast.ClassDef) and node.name not in classes:
            classes[node.name] = _class_names(node)
    return module_level_names(parsed), classes, _static_future_flags(parsed)


def _live_scope(change: NameChange) -> _Scope:
    scope = change.scope
    try:
        module = importlib.import_module(scope)
        names = frozenset(vars(module))
        file = str(getattr(module, "__file__", ""))
        return _Scope(scope, names, names, None, file, _live_future_flags(module))
    except ModuleNotFoundError as exc:
        if exc.name is None or not scope.startswith(exc.name):
            raise _Stale(f"importing it failed: {exc}") from exc
    parent, _, class_name = scope.rpartition(".")
    try:
        holder = importlib.import_module(parent)
    except ModuleNotFoundError as exc:
        raise _Stale(f"no module {parent} or {scope}") from exc
    found = vars(holder).get(class_name)
    if not isinstance(found, type):
        raise _Stale(f"module {parent} has no class {class_name!r}")
    file = str(getattr(holder, "__file__", ""))
    flags = _live_future_flags(holder)
    return _Scope(parent, frozenset(vars(holder)), frozenset(vars(found)), class_name, file, flags)


def _global_check(
    recipe: Recipe,
    change: NameChange,
    scope: _Scope,
    code: CodeType,
    *,
    tree: SourceTree | None,
    edited: dict[str, tuple[CodeType, str] | None],
) -> tuple[str, str] | None:
    """The code (a label) edited or defined in the scope's module that would fail with
    NameError, and the global it reads that nothing defines."""
    if scope.module_names is None:
        return None
    after = set(scope.module_names)
    for other in recipe.names:
        if other.scope == scope.module:
            after.difference_update(other.remove)
            after.update(other.defined)
    codes = [(f"define of {change.scope}", code)]
    for patch in recipe.patches:
        if patch.target not in edited:
            try:
                edited[patch.target] = _edited_code(recipe, patch.target, tree=tree)
            except PrToggleError:
                edited[patch.target] = None  # the target's own check reports it
        built = edited[patch.target]
        if built is not None and built[1] == scope.file:
            codes.append((patch.target, built[0]))
    for label, checked in codes:
        missing = missing_in(checked, names=after)
        if missing:
            return label, missing[0]
    return None


@functools.lru_cache(maxsize=1024)
def _define_code(text: str, first_line: int, class_name: str | None, future_flags: int) -> CodeType:
    """A define's code for the check (compiled, never run): once per text and place, as
    drafting checks the same entries draft after draft (the file name is not the recipe's)."""
    return compile_define(
        text,
        filename="<define>",
        first_line=first_line,
        class_name=class_name,
        future_flags=future_flags,
    )


def _edited_code(recipe: Recipe, target: str, *, tree: SourceTree | None) -> tuple[CodeType, str]:
    """The reverted code of `target` (compiled, never run) and the file it is in."""
    if tree is not None:
        source = find_in_source_tree(target, source_root=tree)
        replacement = build_replacement(source, [recipe.edit_layer(target)], evaluate=False)
        return replacement.code, source.filename
    function = import_target(target).function
    source = function_source(function, target=target)
    layer = recipe.edit_layer(target)
    replacement = build_replacement(source, [layer], function=function, evaluate=False)
    return replacement.code, str(getattr(sys.modules.get(function.__module__), "__file__", ""))


def _check_kept(item: NotReverted, *, tree: SourceTree | None) -> WholeFixCheck:
    target = f"{NOT_REVERTED_PREFIX}{item.file}:{item.line}"
    text, shown = _file_text(item.file, tree=tree)
    if text is None and item.reason.startswith(MODULE_REMOVED_REASON):
        return WholeFixCheck(target, "ok")  # the fix deleted it: absent is what it says
    if text is None:
        return WholeFixCheck(target, "stale", f"{item.file}: no such file under {shown}")
    lines = split_lines(text)
    if item.line > len(lines):
        return WholeFixCheck(
            target, "stale", f"{shown}: line {item.line} is past its end ({len(lines)} lines)"
        )
    if item.code is not None and item.code not in text:
        return WholeFixCheck(target, "stale", f"{shown}: {item.code!r} is not in the file")
    return WholeFixCheck(target, "ok")


def _file_text(relative: str, *, tree: SourceTree | None) -> tuple[str | None, str]:
    if tree is not None:
        found = tree.read(relative)
        return (None, tree.label) if found is None else (found.text, found.name)
    root = _package_parent(relative.split("/", 1)[0])
    if root is None:
        return None, "the installed packages"
    path = Path(root, relative)
    if not path.is_file():
        return None, str(root)
    return path.read_text(encoding="utf-8-sig", errors="replace"), str(path)


def _package_parent(top: str) -> Path | None:
    """The directory holding top-level package `top` (what `file` paths start from)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def _static_future_flags(module: ast.Module) -> int:
    futures = [n for n in module.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    found = any(alias.name == "annotations" for node in futures for alias in node.names)
    return FUTURE_ANNOTATIONS if found else 0


def _live_future_flags(module: ModuleType) -> int:
    feature = vars(module).get("annotations")
    return FUTURE_ANNOTATIONS if type(feature).__name__ == "_Feature" else 0


def _class_names(node: ast.ClassDef) -> frozenset[str]:
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in statement.names)
        else:
            names.update(
                n.id
                for n in ast.walk(statement)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            )
    return frozenset(names)
