"""Compare two imported modules as a running program sees them: functions, values, members.

Used by `whole_fix_imports.py` (a pre-fix module against the reverted post-fix one). Per
top-level name: functions by their code (`co_code`, where it differs the same instructions
once the NOPs that only mark line numbers are left out; `co_consts` recursively, the
names and variables, arguments, generator/async flags), defaults, keyword defaults and
closure cells; classes of the module by their bases (by name) and every member of their own
namespace by name, methods as functions (static and class methods, properties, cached
properties and `__wrapped__` wrappers unwrapped); modules by name; other values by `==`
where their type defines equality, else by type and then their attributes (a bounded
depth); containers item by item. An object is always the same as itself. A module's and
a class's `__annotations__` are compared name by name, in any order (an annotated name
the fix added leaves an entry there when only the name is removed).
"""

from __future__ import annotations

import dis
import functools
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import BuiltinFunctionType, CodeType, FunctionType, ModuleType
from typing import Any

IGNORED = frozenset(
    {
        "__name__",
        "__file__",
        "__cached__",
        "__loader__",
        "__spec__",
        "__builtins__",
        "__package__",
        "__path__",
    }
)
"""Module attributes that say where it was loaded from, not what it is."""

CLASS_IGNORED = frozenset({"__dict__", "__weakref__", "__module__"})
CODE_FIELDS = (
    "co_code",
    "co_names",
    "co_varnames",
    "co_freevars",
    "co_cellvars",
    "co_argcount",
    "co_posonlyargcount",
    "co_kwonlyargcount",
)
FLAGS = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200
"""*args, **kwargs, generator, coroutine, iterable coroutine, async generator."""
MAX_DEPTH = 6
LOCATION = frozenset(
    {
        "starting_line_number",
        "file_name",
        "raw_src",
        "def_file_line_number",
        "def_file_col_number",
        "__globals__",
    }
)
"""Attributes of a triton kernel that say where its source lies (its lines as the file
indents them) and which namespace it reads, not what it is: its dedented source `_src`,
its function and its arguments are compared."""


@dataclass
class Comparison:
    """What differs between two modules: each top-level name with the first difference."""

    differs: dict[str, str] = field(default_factory=dict)
    lent: bool = False
    """The reverted module carries prtoggle's lender (revert/lent_names): a `__getattr__`
    giving a name the fix added, and the revert removed, to the fix's own modules only."""

    @property
    def whole(self) -> bool:
        return not self.differs


def compare_modules(pre: ModuleType, reverted: ModuleType) -> Comparison:
    """What differs, name by name, between the pre-fix module and the reverted one."""
    out = Comparison()
    names = (set(vars(pre)) | set(vars(reverted))) - IGNORED
    for name in sorted(names):
        old, new = vars(pre).get(name, _ABSENT), vars(reverted).get(name, _ABSENT)
        if name == "__getattr__" and old is _ABSENT and _is_lender(new):
            out.lent = True  # prtoggle's own device, said by the caller: not the program's
            continue
        if name == "__annotations__":
            why = _Comparer().annotations(old, new, depth=0)
        else:
            why = _Comparer().same(old, new, depth=0)
        if why is not None:
            out.differs[name] = why
    return out


def load_module_file(name: str, path: Path, *, as_file: str | None = None) -> ModuleType:
    """Execute the source file `path` as a fresh module object called `name`, never put in
    sys.modules (the imported module of that name stays what it is): its imports resolve
    to the modules loaded here, its functions and loggers carry the real module's name.
    `as_file`: its `__file__` while it runs (values computed from where it lies)."""
    package = path.name == "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[] if package else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not loadable as module {name}")
    module = importlib.util.module_from_spec(spec)
    if package:
        loaded = sys.modules.get(name)
        module.__path__ = list(getattr(loaded, "__path__", [str(path.parent)]))
    if as_file is not None:
        module.__file__ = as_file
    spec.loader.exec_module(module)
    return module


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


class _Comparer:
    """One comparison: the pairs in progress count as the same (cycles)."""

    def __init__(self) -> None:
        self.in_progress: set[tuple[int, int]] = set()

    def same(self, a: object, b: object, *, depth: int) -> str | None:
        """None when `a` (pre-fix) and `b` (reverted) are the same; else what differs."""
        if a is b:
            return None
        if a is _ABSENT or b is _ABSENT:
            return "added by the fix" if a is _ABSENT else "removed by the fix"
        key = (id(a), id(b))
        if key in self.in_progress or depth > MAX_DEPTH:
            return None
        self.in_progress.add(key)
        try:
            return self._same(a, b, depth=depth)
        finally:
            self.in_progress.discard(key)

    def _same(self, a: Any, b: Any, *, depth: int) -> str | None:
        kind_a, kind_b = _kind(a), _kind(b)
        if kind_a != kind_b:
            return f"a {kind_a} before the fix, a {kind_b} after the revert"
        if isinstance(a, FunctionType):
            return self._function(a, b, depth=depth)
        if isinstance(a, staticmethod | classmethod):
            return self.same(a.__func__, b.__func__, depth=depth + 1)
        if isinstance(a, property):
            for part in ("fget", "fset", "fdel"):
                why = self.same(getattr(a, part), getattr(b, part), depth=depth + 1)
                if why is not None:
                    return f"{part}: {why}"
            return None
        if isinstance(a, functools.cached_property):
            return self.same(a.func, b.func, depth=depth + 1)
        if isinstance(a, functools.partial):
            return self._items([a.func, a.args, a.keywords], [b.func, b.args, b.keywords], depth)
        if isinstance(a, ModuleType):
            return None if a.__name__ == b.__name__ else f"module {b.__name__} for {a.__name__}"
        if isinstance(a, type):
            return self._class(a, b, depth=depth)
        if isinstance(a, BuiltinFunctionType):
            return None if _name(a) == _name(b) else f"{_name(b)} for {_name(a)}"
        if hasattr(a, "__wrapped__") and hasattr(b, "__wrapped__") and callable(a):
            return self.same(a.__wrapped__, b.__wrapped__, depth=depth + 1)
        return self._value(a, b, depth=depth)

    def _function(self, a: FunctionType, b: FunctionType, *, depth: int) -> str | None:
        why = _code(a.__code__, b.__code__)
        if why is not None:
            return why
        pairs = [
            ("defaults", a.__defaults__ or (), b.__defaults__ or ()),
            ("keyword defaults", a.__kwdefaults__ or {}, b.__kwdefaults__ or {}),
            ("closure", _cells(a), _cells(b)),
        ]
        cells_a, cells_b = _cells(a), _cells(b)
        if len(cells_a) == len(cells_b):  # a class in a closure is compared by its name
            pairs[2] = ("closure", _shallow(cells_a, cells_b), _shallow(cells_b, cells_a))
        for what, old, new in pairs:
            why = self.same(old, new, depth=depth + 1)
            if why is not None:
                return f"{what}: {why}"
        return None

    def _class(self, a: type, b: type, *, depth: int) -> str | None:
        if _name(a) != _name(b):
            return f"class {_name(b)} for {_name(a)}"
        bases_a, bases_b = [_name(c) for c in a.__bases__], [_name(c) for c in b.__bases__]
        if bases_a != bases_b:
            return f"bases {bases_b} for {bases_a}"
        mine_a, mine_b = _members(a), _members(b)
        for member in sorted(set(mine_a) | set(mine_b)):
            old, new = mine_a.get(member, _ABSENT), mine_b.get(member, _ABSENT)
            if member == "__annotations__":
                why = self.annotations(old, new, depth=depth + 1)
            else:
                why = self.same(old, new, depth=depth + 1)
            if why is not None:
                return f"member {member}: {why}"
        return None

    def annotations(self, a: object, b: object, *, depth: int) -> str | None:
        """Two `__annotations__` (absent: none), name by name in any order."""
        old = a if isinstance(a, dict) else {}
        new = b if isinstance(b, dict) else {}
        for name in sorted(set(old) | set(new), key=str):
            why = self.same(old.get(name, _ABSENT), new.get(name, _ABSENT), depth=depth + 1)
            if why is not None:
                return f"annotation of {name}: {why}"
        return None

    def _value(self, a: Any, b: Any, *, depth: int) -> str | None:
        if isinstance(a, dict):
            if list(a) != list(b):
                return _keys_differ(a, b) or self._items(list(a), list(b), depth)
            return self._items(list(a.values()), list(b.values()), depth)
        if isinstance(a, list | tuple):
            if len(a) != len(b):
                return f"{len(b)} items for {len(a)}"
            return self._items(list(a), list(b), depth)
        if type(a) is type(b) and _has_equality(type(a)):
            return None if _equal(a, b) else f"{_short(b)} for {_short(a)}"
        if _name(type(a)) != _name(type(b)):
            return f"a {_name(type(b))} for a {_name(type(a))}"
        return self._attributes(a, b, depth=depth)

    def _attributes(self, a: Any, b: Any, *, depth: int) -> str | None:
        """Two objects of one type (or of a class and its other load): their state."""
        state_a, state_b = _state(a), _state(b)
        if state_a is None or state_b is None:
            return None  # no readable state: the type is all there is to compare
        if set(state_a) != set(state_b):
            return _keys_differ(state_a, state_b)
        for key in state_a:
            if key in LOCATION:
                continue
            why = self.same(state_a[key], state_b[key], depth=depth + 1)
            if why is not None:
                return f".{key}: {why}"
        return None

    def _items(self, a: list[Any], b: list[Any], depth: int) -> str | None:
        if len(a) != len(b):
            return f"{len(b)} items for {len(a)}"
        for index, (old, new) in enumerate(zip(a, b, strict=True)):
            why = self.same(old, new, depth=depth + 1)
            if why is not None:
                return f"[{index}]: {why}"
        return None


def _code(a: CodeType, b: CodeType) -> str | None:
    for name in CODE_FIELDS:
        if name == "co_code" and a.co_code != b.co_code and _instructions(a) == _instructions(b):
            continue  # the same instructions; NOPs that only mark a line number aside
        if getattr(a, name) != getattr(b, name):
            return f"{a.co_name}: {name} differs"
    if a.co_flags & FLAGS != b.co_flags & FLAGS:
        return f"{a.co_name}: co_flags differ"
    if len(a.co_consts) != len(b.co_consts):
        return f"{a.co_name}: co_consts differ"
    for old, new in zip(a.co_consts, b.co_consts, strict=True):
        if isinstance(old, CodeType) and isinstance(new, CodeType):
            why = _code(old, new)
        elif type(old) is not type(new) or old != new:
            why = f"{a.co_name}: co_consts differ ({_short(new)} for {_short(old)})"
        else:
            why = None
        if why is not None:
            return why
    return None


def _instructions(code: CodeType) -> list[tuple[str, object]]:
    """The code's instructions as the line numbering leaves them alike: without NOP and
    EXTENDED_ARG (a NOP only keeps a line number in the line table), each jump by the
    instruction it ends at (a jump to an unconditional jump followed: CPython threads such
    jumps only between instructions of one line) and without its direction."""
    kept = [i for i in dis.get_instructions(code) if i.opname not in ("NOP", "EXTENDED_ARG")]
    index = {i.offset: n for n, i in enumerate(kept)}
    offsets = sorted(index)

    def target(instruction: dis.Instruction) -> int | None:
        seen: set[int] = set()
        while True:
            at = next((o for o in offsets if o >= instruction.argval), None)
            if at is None or index[at] in seen:
                return None if at is None else index[at]
            seen.add(index[at])
            following = kept[index[at]]
            if following.opname not in _UNCONDITIONAL:
                return index[at]
            instruction = following

    out: list[tuple[str, object]] = []
    for instruction in kept:
        name = instruction.opname.replace("_FORWARD", "").replace("_BACKWARD", "")
        jumps = instruction.opcode in dis.hasjabs or instruction.opcode in dis.hasjrel
        out.append((name, target(instruction) if jumps else instruction.arg))
    return out


_UNCONDITIONAL = ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")


def _cells(function: FunctionType) -> list[object]:
    out: list[object] = []
    for cell in function.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(_ABSENT)
    return out


def _shallow(mine: list[object], other: list[object]) -> list[object]:
    """Closure cells, a class replaced by its name where the other side holds a class too
    (dataclass(slots=True) leaves the class it replaced in its methods' closures)."""
    return [
        _name(a) if isinstance(a, type) and isinstance(b, type) else a
        for a, b in zip(mine, other, strict=True)
    ]


def _members(cls: type) -> dict[str, object]:
    return {k: v for k, v in vars(cls).items() if k not in CLASS_IGNORED}


def _state(value: object) -> dict[str, object] | None:
    try:
        state = dict(vars(value))
    except TypeError:
        state = {}
    for cls in type(value).__mro__:
        for slot in _slots(cls):
            if slot not in state and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    return state or None


def _slots(cls: type) -> Iterator[str]:
    slots = vars(cls).get("__slots__", ())
    yield from [slots] if isinstance(slots, str) else slots


def _has_equality(cls: type) -> bool:
    return any("__eq__" in vars(c) for c in cls.__mro__ if c is not object)


def _equal(a: object, b: object) -> bool:
    try:
        result = a == b
    except Exception:
        return False
    return result is True


def _kind(value: object) -> str:
    if isinstance(value, FunctionType):
        return "function"
    if isinstance(value, type):
        return "class"
    if isinstance(value, ModuleType):
        return "module"
    return "value"


def _name(value: Any) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"


def _keys_differ(a: dict[Any, Any], b: dict[Any, Any]) -> str | None:
    """Keys one side has and the other lacks (None: none; keys of the module's own
    classes are two objects on two sides, compared item by item instead)."""
    added = [k for k in b if not _in(k, a)]
    removed = [k for k in a if not _in(k, b)]
    if len(a) != len(b) or (added and all(isinstance(k, str) for k in added)):
        return f"keys added {_short(added)}, removed {_short(removed)}"
    return None if added else "the same keys in another order"


def _in(key: object, mapping: dict[Any, Any]) -> bool:
    try:
        return key in mapping
    except Exception:
        return False


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _is_lender(value: object) -> bool:
    """prtoggle's module `__getattr__` that lends removed names (revert/lent_names)."""
    return type(value).__module__ == "prtoggle.revert.lent_names"
