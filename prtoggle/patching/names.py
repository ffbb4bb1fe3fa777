"""Name changes on a module or class: bind pre-fix names, remove added ones, restore exactly.

One change (`scope`, `define`, `remove`) is applied all or nothing: every name it binds or
removes is snapshotted first (its object, or absent), then `define` runs into a scratch
namespace reading the scope's globals (a class body compiled as a synthetic class of the
same name, `__class__` cells pointed at the real class); its values, the removals and
the copies' updates are changes of one prtoggle.patching.commit.Commit, landed in one
step. In a module scope, every copy of a changed name in another loaded module (a name
its source binds by importing it, patching.copies; never a name that merely holds the same
object) gets the same change; a holder whose source cannot be read is said, not changed.
A removed name's entry in the scope's `__annotations__` goes with it (after the step
lands). Restoring puts back the identical objects, copies included (and copies made while
it was in force, by modules first imported then), and the annotations where they were,
and deletes what was absent. Two changes of
one name in force at once are refused. Process-global: the record of which name is
changed by whom.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FunctionType, ModuleType
from typing import TYPE_CHECKING

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.class_members import refuse_unassignable
from prtoggle.patching.commit import ABSENT, Commit
from prtoggle.patching.define_code import FUTURE_ANNOTATIONS, compile_define, define_bindings
from prtoggle.patching.module_scope import imported_in, module_scope
from prtoggle.patching.name_scopes import NameScope

if TYPE_CHECKING:
    from prtoggle.patching.copies import Holding

logger = logging.getLogger(__name__)


@dataclass
class Binding:
    """One name as it was before a change: restored by putting `previous` back."""

    holder: object
    name: str
    previous: object
    where: str
    landed: object = ABSENT  # what the change put there (ABSENT: it removed the name)


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

    def restore(self, *, commit: Commit | None = None) -> None:
        """Put back every snapshotted object (the same objects), delete what was absent.

        With `commit`, as part of it (the record is dropped once it has run).
        """
        plan = Commit(label=self.label) if commit is None else commit
        for binding in reversed(self.bindings):
            if binding.previous is not ABSENT or binding.name in vars(binding.holder):
                _plan(plan, binding.holder, binding.name, binding.previous)
        self._restore_late_copies(plan)
        plan.after(self._forget)
        if commit is None:
            plan.run()

    def _forget(self) -> None:
        self.bindings.clear()
        for annotation in reversed(self.annotations):
            annotation.put_back()
        self.annotations.clear()
        for key in [key for key, owner in _OWNERS.items() if owner is self]:
            del _OWNERS[key]

    def forget_holder_bindings(self, commit: Commit) -> dict[str, object]:
        """Drop the scope's own bindings, unrestored (its module was re-executed); keep copies.

        Returns name -> the post-fix object of each name the re-execution left as this
        change had set it (a name it defined and the module never binds, a name it
        removed and the module binds only under a condition): the change landed again
        puts those back at restore, not what the reverted module held. Aborting `commit`
        keeps the record as it was.
        """
        holder = self.scope.holder
        kept = {
            b.name: b.previous
            for b in self.bindings
            if b.holder is holder and vars(holder).get(b.name, ABSENT) is b.landed
        }
        bindings = list(self.bindings)
        owned = {key: owner for key, owner in _OWNERS.items() if owner is self}
        self.bindings = [b for b in self.bindings if b.holder is not holder]
        self.annotations.clear()  # the module's code annotated its names anew
        for key in owned:
            if key[0] == id(holder):
                del _OWNERS[key]

        def back() -> None:
            self.bindings = bindings
            _OWNERS.update(owned)

        commit.on_abort(back)
        return kept

    def _restore_late_copies(self, plan: Commit) -> None:
        """Copies of what this change landed made after it landed (a module first imported
        while the revert was in force, `from scope import NAME`) get the post-fix object."""
        if self.scope.cls is not None:
            return
        holder = self.scope.holder
        mine = [b for b in self.bindings if b.holder is holder and b.landed is not ABSENT]
        landed = {b.name: b.landed for b in mine}
        previous = {b.name: b.previous for b in mine}
        recorded = {(id(b.holder), b.name) for b in self.bindings}
        for copy in _copies(self.scope, landed, label=self.label):
            module, attribute, scope_name = copy.module, copy.attribute, copy.scope_name
            if (id(module), attribute) not in recorded:
                plan.set_item(vars(module), attribute, previous[scope_name])


def apply_names(
    scope: NameScope,
    *,
    define: str,
    remove: Sequence[str],
    label: str,
    filename: str,
    first_line: int,
    commit: Commit | None = None,
    prior: Mapping[str, object] | None = None,
) -> AppliedNames:
    """Apply one name change; on any failure nothing is changed and it raises.

    `label` starts every message (`recipe.yaml:12: PR 31769`); `filename`/`first_line`
    are where the `define` text lives (its code is compiled there, for tracebacks).
    The define runs into a scratch namespace (reading the scope's globals); its values,
    the removals and the copies' updates are changes of `commit` (made when it runs), or
    made at once, in one step, without one. `prior`: name -> the post-fix object to put
    back at restore instead of the one bound now (see AppliedNames.forget_holder_bindings).
    """
    plan = Commit(label=label) if commit is None else commit
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
        values: dict[str, object] = {name: ABSENT for name in remove}
        if code is not None:
            values.update(_run_define(scope, code, defined))
        refuse_unassignable(scope, values, label=label)
        kept = prior or {}
        applied.bindings.extend(
            Binding(
                scope.holder,
                name,
                kept.get(name, value),
                f"{scope.kind} {scope.name}",
                landed=values.get(name, value),
            )
            for name, value in before.items()
        )
        for name, value in values.items():
            _plan(plan, scope.holder, name, value)
        _update_copies(applied, copies, values, plan)
        plan.after(lambda: applied.annotations.extend(_take_annotations(scope.holder, remove)))
        applied.functions.extend(_made_functions(scope, defined, values))
    except BaseException as exc:
        applied._forget()
        if isinstance(exc, PatchApplicationError):
            raise
        raise PatchApplicationError(
            f"{label}: names of {scope.name} cannot be reverted: {type(exc).__name__}: {exc}"
        ) from exc
    plan.on_abort(applied._forget)
    if commit is None:
        plan.run()
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


def _run_define(scope: NameScope, code: CodeType, defined: Sequence[str]) -> dict[str, object]:
    """The values the define binds, run into a scratch namespace: nothing changes yet."""
    built: dict[str, object] = {}
    exec(code, scope.module.__dict__, built)  # recipe code: trusted like the registry (docs)
    if scope.cls is None:
        return {name: built[name] for name in defined}
    synthetic = built[scope.cls.__name__]
    assert isinstance(synthetic, type)  # compile_define made a class statement
    values = {}
    for name in defined:
        member = vars(synthetic)[name]
        _repoint_class_cells(member, synthetic, scope.cls)
        values[name] = member
    return values


def _repoint_class_cells(member: object, synthetic: type, real: type) -> None:
    """Zero-argument super() and __class__ in a member see the real class, not the stand-in."""
    for function in _functions_of(member):
        code, cells = function.__code__, function.__closure__ or ()
        for name, cell in zip(code.co_freevars, cells, strict=True):
            if name == "__class__" and cell.cell_contents is synthetic:
                cell.cell_contents = real


def _copies(scope: NameScope, before: dict[str, object], *, label: str) -> list[Holding]:
    """Every copy of a replaced or removed name in another loaded module (patching.copies:
    a name bound by an import of it, never a name that happens to hold the same object).
    A holder whose source cannot be read is said and left as it is."""
    if scope.cls is not None:
        return []
    source = module_scope(_file(scope.module) or "")
    imported = frozenset() if source is None else source.imported  # as the file has it
    present = {
        name: value
        for name, value in before.items()
        if name not in imported and value is not ABSENT and not isinstance(value, ModuleType)
    }
    if not present:
        return []
    from prtoggle.patching.copies import find_copies

    found = find_copies(scope.module, present)
    for holding in found.unreadable:
        logger.warning(
            "%s: `%s` of module %s is also held as %s.%s, whose source cannot be read, so "
            "whether it is a copy (an import of that name) is unknown: it keeps the post-fix "
            "object",
            label,
            holding.scope_name,
            scope.name,
            holding.module_name,
            holding.attribute,
        )
    for holding in found.copies:
        namespace = vars(holding.module)
        if not isinstance(namespace, dict):
            raise PatchApplicationError(
                f"{label}: `{holding.scope_name}` of module {scope.name} is also held as "
                f"{holding.module_name}.{holding.attribute}, whose namespace (a "
                f"{type(namespace).__name__}) cannot be updated; a revert there would be "
                "half-visible"
            )
    return list(found.copies)


def _update_copies(
    applied: AppliedNames,
    copies: list[Holding],
    values: dict[str, object],
    plan: Commit,
) -> None:
    for copy in copies:
        module, attribute = copy.module, copy.attribute
        landed = values.get(copy.scope_name, ABSENT)
        applied.bindings.append(
            Binding(
                module,
                attribute,
                getattr(module, attribute),
                f"copy in {copy.module_name}",
                landed=landed,
            )
        )
        plan.set_item(vars(module), attribute, landed)


def _made_functions(
    scope: NameScope, defined: Sequence[str], values: dict[str, object]
) -> Iterator[tuple[str, FunctionType]]:
    """(dotted name, function) of each function the define bound, methods of classes too."""
    for name in defined:
        value = values.get(name)
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


def _plan(plan: Commit, holder: object, name: str, value: object) -> None:
    """Bind (`ABSENT`: delete) `name` of a module (its namespace) or class as part of `plan`."""
    if isinstance(holder, ModuleType):
        plan.set_item(vars(holder), name, value)
    else:
        plan.set_attr(holder, name, value)


def _future_flags(module: ModuleType) -> int:
    """`from __future__ import annotations` in the module: the define compiles with it too."""
    feature = vars(module).get("annotations")
    return FUTURE_ANNOTATIONS if type(feature).__name__ == "_Feature" else 0


def _file(module: ModuleType) -> str | None:
    found = getattr(module, "__file__", None)
    return found if isinstance(found, str) else None


_OWNERS: dict[tuple[int, str], AppliedNames] = {}
"""(id of holder, name) -> the change in force that rebinds or removes it."""
