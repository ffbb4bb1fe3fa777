"""Name changes on a module or class: bind pre-fix names, remove added ones, restore exactly.

One change (`scope`, `define`, `remove`) is applied all or nothing: every name it binds or
removes is snapshotted first (its object, or absent), then `define` runs in the scope
(a module's own globals; a class body compiled as a synthetic class of the same name whose
members are set on the real class, `__class__` cells pointed at it), then the removed
names go. In a module scope, every other loaded module holding the very object being
replaced (copies made by `from m import NAME [as OTHER]`) gets the same change; small
immutable atoms are followed under the same name only, and a function or class defined in
another module (an import of the scope) not at all. A removed name's entry in the scope's
`__annotations__` goes with it. Restoring puts back the identical objects, copies included,
and the annotations where they were, and deletes what was absent. Two changes of one name in force
at once are refused. Process-global: the record of which name is changed by whom.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import BuiltinFunctionType, CodeType, FunctionType, ModuleType

from prtoggle.errors import PatchApplicationError, TargetResolutionError
from prtoggle.patching.define_code import FUTURE_ANNOTATIONS, compile_define, define_bindings
from prtoggle.patching.module_scope import imported_in, module_scope
from prtoggle.patching.targets import PendingTarget, module_exists

ATOMS = (int, str, bytes, bool, type(None), float)
"""Values whose copies are followed only under the same name (equal values are common)."""


class _Absent:
    """A name that was not bound in its holder."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


@dataclass(frozen=True)
class NameScope:
    """A resolved scope: its module, and its class when the scope is `module.Class`."""

    name: str
    module: ModuleType
    cls: type | None = None

    @property
    def holder(self) -> object:
        return self.module if self.cls is None else self.cls

    @property
    def kind(self) -> str:
        return "module" if self.cls is None else "class"


@dataclass
class Binding:
    """One name as it was before a change: restored by putting `previous` back."""

    holder: object
    name: str
    previous: object
    where: str


@dataclass
class Annotation:
    """An entry of a scope's `__annotations__` that a removed name left: taken out while
    the change is in force, put back after the key it followed (None: first)."""

    annotations: dict[str, object]
    name: str
    value: object
    after: str | None

    def put_back(self) -> None:
        items = list(self.annotations.items())
        keys = [key for key, _ in items]
        at = keys.index(self.after) + 1 if self.after in keys else 0
        if self.after is not None and self.after not in keys:
            at = len(items)
        items.insert(at, (self.name, self.value))
        self.annotations.clear()
        self.annotations.update(items)


@dataclass
class AppliedNames:
    """One name change in force: what to put back, and the functions its `define` made."""

    label: str
    scope: NameScope
    bindings: list[Binding] = field(default_factory=list)
    functions: list[tuple[str, FunctionType]] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)

    def restore(self) -> None:
        """Put back every snapshotted object (the same objects), delete what was absent,
        and the annotations of removed names."""
        for binding in reversed(self.bindings):
            _put_back(binding)
        self.bindings.clear()
        for annotation in reversed(self.annotations):
            annotation.put_back()
        self.annotations.clear()
        for key in [key for key, owner in _OWNERS.items() if owner is self]:
            del _OWNERS[key]

    def forget_holder_bindings(self) -> None:
        """Drop the scope's own bindings, unrestored (its module was re-executed); keep copies."""
        self.bindings = [b for b in self.bindings if b.holder is not self.scope.holder]
        self.annotations.clear()  # the module's code annotated its names anew
        for key in [key for key, owner in _OWNERS.items() if owner is self]:
            if key[0] == id(self.scope.holder):
                del _OWNERS[key]


def resolve_scope(scope: str) -> NameScope | PendingTarget:
    """`scope` (a module, or `module.Class`) among imported modules; never imports.

    A module not imported yet gives a PendingTarget for it. A class scope names a class
    at its module's top level.
    """
    module = sys.modules.get(scope)
    if isinstance(module, ModuleType):
        return NameScope(name=scope, module=module)
    parent, _, last = scope.rpartition(".")
    holder = sys.modules.get(parent) if parent else None
    if not isinstance(holder, ModuleType):
        waited = parent or scope
        if not module_exists(waited.split(".", 1)[0]):
            raise TargetResolutionError(
                f"{scope}: no module named {waited.split('.', 1)[0]!r} is importable; "
                "expected a scope module or module.Class"
            )
        return PendingTarget(target=scope, module=_first_missing(waited))
    found = vars(holder).get(last, ABSENT)
    if found is ABSENT:
        if module_exists(scope):
            return PendingTarget(target=scope, module=scope)
        raise TargetResolutionError(f"{scope}: module {parent} has no class {last!r}")
    if not isinstance(found, type):
        raise TargetResolutionError(
            f"{scope}: {parent}.{last} is a {type(found).__name__}, not a class; a scope is "
            "a module or a class at its module's top level"
        )
    return NameScope(name=scope, module=holder, cls=found)


def apply_names(
    scope: NameScope,
    *,
    define: str,
    remove: Sequence[str],
    label: str,
    filename: str,
    first_line: int,
) -> AppliedNames:
    """Apply one name change; on any failure, what it did is undone and it raises.

    `label` starts every message (`recipe.yaml:12: PR 31769`); `filename`/`first_line`
    are where the `define` text lives (its code is compiled there, for tracebacks).
    """
    applied = AppliedNames(label=label, scope=scope)
    defined = define_bindings(define) if define.strip() else ()
    try:
        _refuse_conflicts(scope, [*defined, *remove], label=label, owner=applied)
        code = None
        if defined:
            code = compile_define(
                define,
                filename=filename,
                first_line=first_line,
                class_name=None if scope.cls is None else scope.cls.__name__,
                future_flags=_future_flags(scope.module),
                imported=imported_in(
                    scope.module.__name__, getattr(scope.module, "__file__", None)
                ),
            )
        _refuse_missing(scope, remove, label=label)
        before = {name: vars(scope.holder).get(name, ABSENT) for name in [*defined, *remove]}
        copies = _copies(scope, before, label=label)
        applied.bindings.extend(
            Binding(scope.holder, name, value, f"{scope.kind} {scope.name}")
            for name, value in before.items()
        )
        if code is not None:
            _run_define(scope, code, defined)
        for name in remove:
            delattr(scope.holder, name)
        applied.annotations.extend(_take_annotations(scope.holder, remove))
        _update_copies(applied, scope, copies)
        applied.functions.extend(_made_functions(scope, defined))
    except BaseException as exc:
        applied.restore()
        if isinstance(exc, PatchApplicationError):
            raise
        raise PatchApplicationError(
            f"{label}: names of {scope.name} cannot be reverted: {type(exc).__name__}: {exc}"
        ) from exc
    return applied


def _refuse_conflicts(
    scope: NameScope, names: Sequence[str], *, label: str, owner: AppliedNames
) -> None:
    for name in names:
        key = (id(scope.holder), name)
        other = _OWNERS.get(key)
        if other is not None:
            raise PatchApplicationError(
                f"{label}: `{name}` of {scope.kind} {scope.name} is already changed by "
                f"{other.label}; two name changes of one name cannot be in force at once: "
                "restore that one first"
            )
    for name in names:
        _OWNERS[(id(scope.holder), name)] = owner


def _refuse_missing(scope: NameScope, remove: Sequence[str], *, label: str) -> None:
    missing = [name for name in remove if name not in vars(scope.holder)]
    if missing:
        raise PatchApplicationError(
            f"{label}: remove: `{missing[0]}` is not bound in {scope.kind} {scope.name} (the "
            "fix's code is not what the recipe expects: the recipe is stale)"
        )


def _take_annotations(holder: object, removed: Sequence[str]) -> Iterator[Annotation]:
    """Take the removed names out of the holder's own `__annotations__` (a fix that adds
    `x: int = 0` adds an entry there; the pre-fix program has none)."""
    annotations = vars(holder).get("__annotations__")
    if not isinstance(annotations, dict):
        return
    for name in removed:
        if name in annotations:
            keys = list(annotations)
            at = keys.index(name)
            after = keys[at - 1] if at else None
            yield Annotation(annotations, name, annotations.pop(name), after)


def _run_define(scope: NameScope, code: CodeType, defined: Sequence[str]) -> None:
    if scope.cls is None:
        exec(code, scope.module.__dict__)  # recipe code: trusted like the registry (docs)
        return
    built: dict[str, object] = {}
    exec(code, scope.module.__dict__, built)
    synthetic = built[scope.cls.__name__]
    assert isinstance(synthetic, type)  # compile_define made a class statement
    for name in defined:
        member = vars(synthetic)[name]
        _repoint_class_cells(member, synthetic, scope.cls)
        setattr(scope.cls, name, member)


def _repoint_class_cells(member: object, synthetic: type, real: type) -> None:
    """Zero-argument super() and __class__ in a member see the real class, not the stand-in."""
    for function in _functions_of(member):
        code, cells = function.__code__, function.__closure__ or ()
        for name, cell in zip(code.co_freevars, cells, strict=True):
            if name == "__class__" and cell.cell_contents is synthetic:
                cell.cell_contents = real


def _copies(
    scope: NameScope, before: dict[str, object], *, label: str
) -> list[tuple[str, object, str, str]]:
    """(module name, holder, attribute, scope name) of every copy of a replaced object."""
    if scope.cls is not None:
        return []
    source = module_scope(_file(scope.module) or "")
    imported = frozenset() if source is None else source.imported  # as the file has it
    present = {
        name: value
        for name, value in before.items()
        if name not in imported and _own(value, scope.module)
    }
    by_id = {id(v): n for n, v in present.items() if not isinstance(v, ATOMS)}
    found: list[tuple[str, object, str, str]] = []
    for module_name, module in list(sys.modules.items()):
        if module is scope.module or module is None:
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attribute, scope_name in _held(namespace, present, by_id):
            atom = isinstance(present[scope_name], ATOMS)
            if atom and not _imports(module, scope_name, source=scope.name):
                continue  # an equal value of its own, not imported from the scope: not a copy
            if not isinstance(namespace, dict):
                raise PatchApplicationError(
                    f"{label}: `{scope_name}` of module {scope.name} is also held as "
                    f"{module_name}.{attribute}, whose namespace (a {type(namespace).__name__}) "
                    "cannot be updated; a revert there would be half-visible"
                )
            found.append((module_name, module, attribute, scope_name))
    return found


def _imports(module: ModuleType, name: str, *, source: str) -> bool:
    """Whether `module`'s source imports `name` from module `source` by that name."""
    found = module_scope(_file(module) or "")
    package = getattr(module, "__package__", None) or ""
    return found is not None and (name, name) in found.imports_from(source, package=package)


def _own(value: object, module: ModuleType) -> bool:
    """Whether copies of `value` elsewhere are the scope's: a name the scope's source
    imports (left out by the caller), a function or class defined in another module, or
    a module, is not (its importers got it from there): not followed."""
    if value is ABSENT or isinstance(value, ModuleType):
        return False  # a module bound in the scope is an import: everyone's, not the scope's
    if isinstance(value, FunctionType | BuiltinFunctionType | type):
        return getattr(value, "__module__", None) == module.__name__
    return True


def _held(
    namespace: object, present: dict[str, object], by_id: dict[int, str]
) -> Iterator[tuple[str, str]]:
    get: Callable[[str, object], object] = getattr(namespace, "get", lambda *_: ABSENT)
    for name, value in present.items():
        if isinstance(value, ATOMS) and get(name, ABSENT) is value:
            yield name, name
    if not by_id:
        return
    for attribute, value in list(getattr(namespace, "items", dict)()):
        scope_name = by_id.get(id(value))
        if scope_name is not None and present[scope_name] is value:
            yield attribute, scope_name


def _update_copies(
    applied: AppliedNames, scope: NameScope, copies: list[tuple[str, object, str, str]]
) -> None:
    namespace = vars(scope.holder)
    for module_name, module, attribute, scope_name in copies:
        applied.bindings.append(
            Binding(module, attribute, getattr(module, attribute), f"copy in {module_name}")
        )
        if scope_name in namespace:
            setattr(module, attribute, namespace[scope_name])
        else:
            delattr(module, attribute)


def _made_functions(scope: NameScope, defined: Sequence[str]) -> Iterator[tuple[str, FunctionType]]:
    """(dotted name, function) of each function the define bound, methods of classes too."""
    namespace = vars(scope.holder)
    for name in defined:
        value = namespace.get(name)
        members = vars(value).items() if isinstance(value, type) else [("", value)]
        for member_name, member in members:
            dotted = ".".join(filter(None, (scope.name, name, member_name)))
            for function in _functions_of(member):
                if function.__module__ == scope.module.__name__:
                    yield dotted, function


def _functions_of(member: object) -> Iterator[FunctionType]:
    if isinstance(member, staticmethod | classmethod):
        member = member.__func__
    if isinstance(member, property):
        yield from (
            f for f in (member.fget, member.fset, member.fdel) if isinstance(f, FunctionType)
        )
        return
    if isinstance(member, functools.cached_property):
        member = member.func
    if callable(member) and hasattr(member, "__wrapped__"):
        member = inspect.unwrap(member)
    if isinstance(member, FunctionType):
        yield member


def _put_back(binding: Binding) -> None:
    holder, name = binding.holder, binding.name
    if binding.previous is ABSENT:
        if name in vars(holder):
            delattr(holder, name)
        return
    setattr(holder, name, binding.previous)


def _future_flags(module: ModuleType) -> int:
    """`from __future__ import annotations` in the module: the define compiles with it too."""
    feature = vars(module).get("annotations")
    return FUTURE_ANNOTATIONS if type(feature).__name__ == "_Feature" else 0


def _file(module: ModuleType) -> str | None:
    found = getattr(module, "__file__", None)
    return found if isinstance(found, str) else None


def _first_missing(dotted: str) -> str:
    """The shortest prefix of `dotted` not in sys.modules: the import a scope waits for."""
    parts = dotted.split(".")
    for index in range(1, len(parts) + 1):
        name = ".".join(parts[:index])
        if name not in sys.modules:
            return name
    return dotted


_OWNERS: dict[tuple[int, str], AppliedNames] = {}
"""(id of holder, name) -> the change in force that rebinds or removes it."""
