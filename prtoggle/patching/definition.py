"""What a def statement gives a function besides its code: defaults, annotations, decorators."""

from __future__ import annotations
import __future__

import ast
import builtins
from collections.abc import Mapping
from dataclasses import dataclass
from types import FunctionType
from typing import Protocol

from prtoggle.errors import PatchApplicationError

Definition = ast.FunctionDef | ast.AsyncFunctionDef

_FUTURE_ANNOTATIONS = __future__.annotations.compiler_flag
_UNKNOWN = object()  # no original object: evaluate the expression
_STATIC = object()  # no live function: an unchanged expression keeps whatever it had


@dataclass(frozen=True)
class DefinitionValues:
    """The values a def statement binds on the function object besides `__code__`."""

    defaults: tuple[object, ...] | None
    kwdefaults: dict[str, object] | None
    annotations: dict[str, object]


class ExpressionScope(Protocol):
    """Evaluates a default or annotation expression an edit introduced."""

    def evaluate(self, expression: ast.expr, *, what: str) -> object: ...


@dataclass(frozen=True)
class GlobalsScope:
    """Evaluates in a live function's globals, at apply time (a code swap has no other scope)."""

    namespace: dict[str, object]
    label: str

    def evaluate(self, expression: ast.expr, *, what: str) -> object:
        code = compile(ast.fix_missing_locations(ast.Expression(body=expression)), "<def>", "eval")
        try:
            return eval(code, self.namespace)
        except Exception as exc:
            module = self.namespace.get("__name__", "?")
            raise PatchApplicationError(
                f"{self.label}: the edited {what} `{ast.unparse(expression)}` cannot be "
                f"evaluated in the globals of module {module} ({type(exc).__name__}: {exc}); "
                "a code swap evaluates new defaults and annotations there, not in a class "
                "body or an enclosing function"
            ) from exc


@dataclass(frozen=True)
class ModuleNamesScope:
    """Static stand-in for GlobalsScope: every name read must be bound at module level.

    `names` None (a star import) accepts every name.
    """

    names: frozenset[str] | None
    label: str

    def evaluate(self, expression: ast.expr, *, what: str) -> object:
        bound = {
            node.id
            for node in ast.walk(expression)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        }
        bound |= {arg.arg for node in ast.walk(expression) for arg in _lambda_args(node)}
        missing = sorted(
            {
                node.id
                for node in ast.walk(expression)
                if isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and self.names is not None
                and node.id not in self.names
                and node.id not in bound
                and not hasattr(builtins, node.id)
            }
        )
        if missing:
            raise PatchApplicationError(
                f"{self.label}: the edited {what} `{ast.unparse(expression)}` reads "
                f"{', '.join(missing)}, which the module does not bind at its top level; a "
                "code swap evaluates new defaults and annotations in the module's globals"
            )
        return _STATIC


def current_values(function: FunctionType) -> DefinitionValues:
    """The function's own defaults, keyword defaults and annotations (the objects)."""
    return DefinitionValues(
        defaults=function.__defaults__,
        kwdefaults=function.__kwdefaults__,
        annotations=function.__annotations__,
    )


def refuse_decorator_change(original: Definition, edited: Definition, *, label: str) -> None:
    """Raise when `edited` has other decorators than `original` (they ran at import)."""
    if _dumps(original.decorator_list) != _dumps(edited.decorator_list):
        raise PatchApplicationError(
            f"{label}: the edit changes the decorator lines of {original.name}(); decorators "
            "and anything outside the def's signature and body cannot take effect through a "
            "code swap"
        )


def changed_values(
    original: Definition,
    edited: Definition,
    *,
    originals: DefinitionValues | None,
    scope: ExpressionScope,
    class_name: str | None,
    future_flags: int,
) -> DefinitionValues | None:
    """The def-statement values of `edited`, or None when its signature is unchanged.

    Defaults and annotations whose expression is unchanged keep the original objects;
    new ones are evaluated by `scope` (strings under `from __future__ import annotations`).
    `originals` None (no live function) evaluates everything.
    """
    if _signature_dump(original) == _signature_dump(edited):
        return None
    old_defaults = _defaults_by_name(original, originals)
    positional = [*edited.args.posonlyargs, *edited.args.args]
    with_default = positional[len(positional) - len(edited.args.defaults) :]
    defaults = tuple(
        _value(old_defaults, arg.arg, expr, scope=scope, what=f"default of {arg.arg}")
        for arg, expr in zip(with_default, edited.args.defaults, strict=True)
    )
    kwdefaults = {
        arg.arg: _value(old_defaults, arg.arg, expr, scope=scope, what=f"default of {arg.arg}")
        for arg, expr in zip(edited.args.kwonlyargs, edited.args.kw_defaults, strict=True)
        if expr is not None
    }
    return DefinitionValues(
        defaults=defaults or None,
        kwdefaults=kwdefaults or None,
        annotations=_annotations(
            original,
            edited,
            originals=originals,
            scope=scope,
            class_name=class_name,
            as_strings=bool(future_flags & _FUTURE_ANNOTATIONS),
        ),
    )


def _annotations(
    original: Definition,
    edited: Definition,
    *,
    originals: DefinitionValues | None,
    scope: ExpressionScope,
    class_name: str | None,
    as_strings: bool,
) -> dict[str, object]:
    old = _annotated(original, class_name)
    new = _annotated(edited, class_name)
    if originals is not None and _dumps_of(old) == _dumps_of(new):
        return originals.annotations
    old_objects: Mapping[str, object] = (
        originals.annotations if originals else {key: _STATIC for key, _ in old}
    )
    result: dict[str, object] = {}
    for key, expr in new:
        previous = dict(old).get(key)
        if previous is not None and ast.dump(previous) == ast.dump(expr) and key in old_objects:
            result[key] = old_objects[key]
        elif as_strings:
            result[key] = ast.unparse(expr)
        else:
            result[key] = scope.evaluate(expr, what=f"annotation of {key}")
    return result


def _annotated(definition: Definition, class_name: str | None) -> list[tuple[str, ast.expr]]:
    """(key, annotation) in the order CPython fills __annotations__."""
    args = definition.args
    ordered = [*args.args, *args.posonlyargs]
    ordered += [args.vararg] if args.vararg else []
    ordered += args.kwonlyargs
    ordered += [args.kwarg] if args.kwarg else []
    pairs = [(_mangle(arg.arg, class_name), arg.annotation) for arg in ordered if arg.annotation]
    if definition.returns is not None:
        pairs.append(("return", definition.returns))
    return [(key, expr) for key, expr in pairs if expr is not None]


def _defaults_by_name(
    definition: Definition, originals: DefinitionValues | None
) -> dict[str, tuple[str, object]]:
    """Parameter name -> (dump of its default expression, the original default object)."""
    args = definition.args
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    if originals is None:
        values: tuple[object, ...] = (_STATIC,) * len(args.defaults)
        kwvalues: Mapping[str, object] = {arg.arg: _STATIC for arg in args.kwonlyargs}
    else:
        values = originals.defaults or ()
        kwvalues = originals.kwdefaults or {}
    if len(values) != len(args.defaults):  # changed at run time: nothing to reuse
        values = (_UNKNOWN,) * len(args.defaults)
    found: dict[str, tuple[str, object]] = {}
    for arg, expr, value in zip(with_default, args.defaults, values, strict=True):
        found[arg.arg] = (ast.dump(expr), value)
    for arg, kwexpr in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kwexpr is not None:
            found[arg.arg] = (ast.dump(kwexpr), kwvalues.get(arg.arg, _UNKNOWN))
    return found


def _value(
    old: Mapping[str, tuple[str, object]],
    name: str,
    expression: ast.expr,
    *,
    scope: ExpressionScope,
    what: str,
) -> object:
    dump, value = old.get(name, ("", _UNKNOWN))
    if dump == ast.dump(expression) and value is not _UNKNOWN:
        return value
    return scope.evaluate(expression, what=what)


def _signature_dump(definition: Definition) -> str:
    returns = ast.dump(definition.returns) if definition.returns is not None else ""
    return f"{ast.dump(definition.args)}->{returns}"


def _dumps(nodes: list[ast.expr]) -> list[str]:
    return [ast.dump(node) for node in nodes]


def _dumps_of(pairs: list[tuple[str, ast.expr]]) -> list[tuple[str, str]]:
    return [(key, ast.dump(expr)) for key, expr in pairs]


def _lambda_args(node: ast.AST) -> list[ast.arg]:
    if not isinstance(node, ast.Lambda):
        return []
    args = node.args
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


def _mangle(name: str, class_name: str | None) -> str:
    if class_name is None or not name.startswith("__") or name.endswith("__"):
        return name
    return f"_{class_name.lstrip('_')}{name}"
