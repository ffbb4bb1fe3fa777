"""Statements the fix left alone that read, at module load, a name the revert changes.

`_LIMIT = _MAX * 2` (or a default, a decorator argument, a class attribute) ran once,
when the module loaded, with the post-fix `_MAX`: a revert that binds the pre-fix `_MAX`
and nothing else leaves `_LIMIT` as the fix made it. Each such statement is re-run in the
`define` (its pre-fix text, the same as its post-fix one) when the statement kinds of a
`define` allow it, and the names it binds count as changed in turn; otherwise it is
listed in `not_reverted`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Protocol

from prtoggle.recipes.authoring.changes import ModuleChanges, Scope
from prtoggle.recipes.authoring.decorators import reapplied
from prtoggle.recipes.authoring.statements import (
    CLASS,
    Binding,
    Body,
    Statement,
    bound_names,
    is_type_checking_block,
    made_from_body,
    read_body,
)


class Comparer(Protocol):
    """What the pass needs of the module comparison (scopes.Comparer)."""

    out: ModuleChanges

    def where(self, statement: Statement, body: Body, *, pre_side: bool) -> tuple[int, str | None]:
        """The post-fix line of a statement's first change, and its stripped text."""

    def listed(self, line: int, code: str | None, reason: str) -> None:
        """List a change as not reverted."""

    def define(
        self, scope: Scope, *old: Binding, pre: Body, post: Body, new: Binding | None
    ) -> None:
        """Define pre-fix bindings `old` back in `scope`."""


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class _Reader:
    """A post-fix statement that reads changed names when it runs."""

    statement: Statement
    reads: frozenset[str]


def follow_load_time_reads(comparer: Comparer, pre: Body, post: Body, scope: Scope) -> None:
    """Re-run (define) or list every unchanged statement of the module `scope`, and of its
    classes, that reads at load time a name the drafted revert binds or removes."""
    changed = _changed(comparer, scope.name)
    _follow(comparer, pre, post, scope, changed)
    for name, bindings in post.bindings.items():
        old = pre.bindings.get(name, [])
        if name in changed or len(old) != 1 or len(bindings) != 1:
            continue  # defined back whole, added by the fix, or bound twice
        if old[0].kind != CLASS or bindings[0].kind != CLASS:
            continue
        p, q = old[0].statement.node, bindings[0].statement.node
        assert isinstance(p, ast.ClassDef) and isinstance(q, ast.ClassDef)
        inner = scope.member(q, fields=made_from_body(p) or made_from_body(q))
        pre_class = read_body(p.body, pre.lines, fields=inner.fields)
        post_class = read_body(q.body, post.lines, fields=inner.fields)
        own = set(post_class.bindings) | post_class.other_names
        mine = _changed(comparer, inner.name) | (changed - own)
        _follow(comparer, pre_class, post_class, inner, mine)


def load_time_reads(node: ast.stmt) -> frozenset[str]:
    """The names a statement reads when it runs (not what its functions read when called):
    a def's decorators and defaults, a class's decorators, bases and keywords, an
    assignment's value, all of any other statement but nested function bodies.
    Annotations are left aside (a revert never touches them)."""
    names: set[str] = set()
    pending: list[ast.AST] = list(_evaluated(node))
    while pending:
        item = pending.pop()
        if isinstance(item, ast.Name) and isinstance(item.ctx, ast.Load):
            names.add(item.id)
        elif isinstance(item, (*_DEFS, ast.ClassDef)):
            pending.extend(_evaluated(item))
            if isinstance(item, ast.ClassDef):
                pending.extend(item.body)
        elif isinstance(item, ast.Lambda):
            pending.extend(_defaults(item.args))
        else:
            pending.extend(ast.iter_child_nodes(item))
    return frozenset(names)


def _follow(comparer: Comparer, pre: Body, post: Body, scope: Scope, changed: set[str]) -> None:
    """Until nothing more changes: each reader of `changed` in `post` defined or listed."""
    done: set[int] = set()
    while True:
        readers = [r for r in _readers(post, changed) if id(r.statement) not in done]
        if not readers:
            return
        for reader in readers:
            done.add(id(reader.statement))
            changed |= _handle(comparer, reader, (pre, post), scope)


def _readers(post: Body, changed: set[str]) -> list[_Reader]:
    """The statements of `post` that read a changed name when they run, in order; those
    binding a changed name are the revert's own (defined or removed) and left out."""
    statements = {b.statement.first: b.statement for bs in post.bindings.values() for b in bs}
    statements.update((s.first, s) for s in post.others)
    found = []
    for _, statement in sorted(statements.items()):
        if bound_names(statement.node) & changed or is_type_checking_block(statement.node):
            continue  # the revert's own statements; code that never runs
        reads = load_time_reads(statement.node) & changed
        if reads:
            found.append(_Reader(statement, frozenset(reads)))
    return found


def _handle(
    comparer: Comparer, reader: _Reader, bodies: tuple[Body, Body], scope: Scope
) -> set[str]:
    """Define the reader back (the names it binds, now changed) or list it (none)."""
    pre, post = bodies
    statement, node = reader.statement, reader.statement.node
    names = bound_names(node)
    why = _why_not(node, names, bodies, scope)
    if why is None and isinstance(node, _DEFS):
        why = _patched_instead(comparer, scope, node.name)
    if why is not None:
        line, code = comparer.where(statement, post, pre_side=False)
        read = ", ".join(f"`{n}`" for n in sorted(reader.reads))
        comparer.listed(line, code, f"{why} reads {read} at load time, which the revert changes")
        return set()
    new = next(b for bs in post.bindings.values() for b in bs if b.statement is statement)
    old = {id(b.statement): b for name in names for b in pre.bindings[name]}
    comparer.define(scope, *old.values(), pre=pre, post=post, new=new)
    return names


def _why_not(
    node: ast.stmt, names: set[str], bodies: tuple[Body, Body], scope: Scope
) -> str | None:
    """Why a reader cannot be re-run in a `define` (None: it can): the listed reason's
    subject."""
    pre, post = bodies
    qualname = f"{scope.prefix}{'/'.join(sorted(names))}"
    if isinstance(node, ast.ClassDef):
        return f"class statement of {scope.prefix}{node.name}"
    if not isinstance(node, ast.Assign | ast.AnnAssign | ast.FunctionDef | ast.AsyncFunctionDef):
        return scope.label
    if scope.fields:
        return scope.label
    if not scope.names_ok:
        return f"{qualname} (a member of a nested class)"
    if names & (post.other_names | pre.other_names):
        return f"{qualname} (also bound by other {scope.label})"
    if any(n not in pre.bindings for n in names):
        return f"{qualname} (added by the fix)"
    if isinstance(node, _DEFS):
        unsound = reapplied(node.decorator_list, kernels=True)
        if unsound is not None:
            return f"{qualname} ({unsound} not re-applied)"
    return None


def _patched_instead(comparer: Comparer, scope: Scope, name: str) -> str | None:
    """A patched def that must run again is defined whole instead (its patch dropped) when
    it can be; else the reason it cannot."""
    qualname = f"{scope.prefix}{name}"
    for candidate in list(comparer.out.patches):
        if candidate.qualname == qualname:
            if candidate.fallback is None:
                return f"{qualname} (patched, no sound define)"
            comparer.out.patches.remove(candidate)
    return None


def _changed(comparer: Comparer, scope: str) -> set[str]:
    entry = comparer.out.names.get(scope)
    if entry is None:
        return set()
    names = set(entry.remove)
    for statement, aliases in entry.define.values():
        if aliases is None:
            names |= bound_names(statement.node)
        else:
            names |= {(a.asname or a.name).split(".")[0] for a in aliases}
    return names


def _evaluated(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, _DEFS):
        return [*node.decorator_list, *_defaults(node.args)]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    if isinstance(node, ast.Assign):
        return [node.value, *(t for t in node.targets if not isinstance(t, ast.Name))]
    if isinstance(node, ast.AnnAssign):
        return [node.value] if node.value is not None else []
    return [node]


def _defaults(arguments: ast.arguments) -> list[ast.expr]:
    return [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
