"""Whether a module-level class the fix changed beyond its members can be defined back whole."""

from __future__ import annotations

import ast

from prtoggle.recipes.authoring.decorators import reapplied

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_INERT = (ast.Pass, ast.AnnAssign, ast.Expr)
"""Class-body statements that bind nothing: `pass`, an annotation alone, a docstring."""


def whole_class_blocker(
    old: ast.ClassDef, new: ast.ClassDef, *, descriptors: frozenset[str]
) -> str | None:
    """Why the pre-fix class statement `old` cannot run again in place of the post-fix
    `new` (None: it can): a decorator of either class or of a member that a second run
    does not re-apply soundly, or that may have registered the post-fix one (registries,
    compilers); a descriptor class of the module, or an attribute made by one (named by
    the class statement that made it: sglang's `Envs`); a body statement that runs code
    and binds nothing (a call: running it twice is not the pre-fix program)."""
    if old.name in descriptors or new.name in descriptors:
        return f"{new.name} names its instances (__set_name__)"
    for node in (old, new):
        unsound = reapplied(node.decorator_list, whole_class=True, kernels=True)
        found = unsound and f"{unsound} not re-applied"
        found = found or _body_blocker(node, descriptors)
        if found:
            return found
    return None


def whole_class_reason(qualname: str) -> str:
    """The not_reverted reason a class defined back whole carries: what keeps the post-fix
    class after the revert."""
    return (
        f"{qualname} defined back whole, a new class: instances and subclasses made from the "
        "post-fix class before the revert landed keep it (isinstance against the pre-fix "
        "class fails for them)"
    )


def _body_blocker(node: ast.ClassDef, descriptors: frozenset[str]) -> str | None:
    for member in node.body:
        if isinstance(member, _DEFS):
            unsound = reapplied(member.decorator_list, kernels=True)
            if unsound is not None:
                return f"{unsound} of {node.name}.{member.name} not re-applied"
        elif isinstance(member, ast.ClassDef):
            inner = whole_class_blocker(member, member, descriptors=descriptors)
            if inner is not None:
                return inner
        elif _runs_code(member):
            return f"code in the class body of {node.name} runs again"
        elif _made_by(member, descriptors):
            return f"an attribute of {node.name} made by {_made_by(member, descriptors)}"
    return None


def _made_by(member: ast.stmt, descriptors: frozenset[str]) -> str | None:
    """The module's descriptor class whose call makes the member's value, if any."""
    value = getattr(member, "value", None)
    func = value.func if isinstance(value, ast.Call) else None
    return func.id if isinstance(func, ast.Name) and func.id in descriptors else None


def _runs_code(member: ast.stmt) -> bool:
    """A class-body statement that binds nothing and runs code (a call, an `if`, a loop)."""
    if isinstance(member, ast.Expr):
        return not isinstance(member.value, ast.Constant)
    return not isinstance(member, (*_INERT, ast.Assign, ast.AugAssign))
