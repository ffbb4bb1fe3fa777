"""What a run imported and ran: modules and functions, recorded in the child, read by the parent.

`start(directory)` (the child's start-up hook calls it when PRTOGGLE_TRACE_DIR is set)
records every Python function that starts running, in every thread, and at exit writes
`<pid>.trace.json` into `directory`: the files of the modules in sys.modules and, per file,
the qualified names of the functions that ran (a nested function counts as the function
around it). A method generated from a class's body (a dataclass's `__init__`, compiled
from a string) counts as `CLASS.<body>` in the file of its class: its code is the class
body's fields. `read_traces(directory)` is their union. Recording costs one call of a small
function per Python call (about 1.4x on an sglang unit test's run); it is process-global
and meant for one run, the one `bisect --git` learns from. Stdlib only: the bootstrap
imports it in the child.
"""

from __future__ import annotations

import atexit
import builtins
import json
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType, ModuleType
from typing import Any

_SUFFIX = ".trace.json"
CLASS_BODY = "<body>"
"""The last part of the unit `CLASS.<body>`: a class's statements outside its defs."""


@dataclass
class RunTrace:
    """The union of a run's traces: files of the modules imported and, per file, the
    functions that ran (qualified names, nested ones folded into the outermost def)."""

    modules: set[str] = field(default_factory=set)
    functions: dict[str, set[str]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    """Names of the modules imported, in the order the first process to list them had them
    in sys.modules (the order they began importing)."""
    preloaded: set[str] = field(default_factory=set)
    """Names of the modules a warm server's preload had imported (its trace says so)."""
    processes: int = 0

    def located(self, files: Iterable[str]) -> dict[str, str]:
        """For each of `files` (paths relative to some folder, `pkg/mod.py`) a module of
        the run was loaded from, the recorded absolute path it is."""
        wanted = set(files)
        found: dict[str, str] = {}
        for path in self.modules | set(self.functions):
            parts = path.split("/")
            for start in range(len(parts)):
                tail = "/".join(parts[start:])
                if tail in wanted:
                    found.setdefault(tail, path)
                    break
        return found

    def ran(self, path: str) -> set[str]:
        """The functions (outermost defs' qualified names) that ran from `path`."""
        return self.functions.get(path, set())


def start(
    directory: str, *, packages: Collection[str] = (), preload: bool = False
) -> Callable[[], None]:
    """Record this process's run from now on; written to `directory` at exit, or when the
    returned function is called (which also stops recording). `preload`: the trace is a
    warm server's preload (read_traces lists its modules as preloaded).

    `packages`: top-level names whose functions matter; an `import` statement of another
    package's module runs untraced, with what its module's code calls (its module is still
    listed; an import of one of `packages` inside it is traced again). Importing sglang's
    dependencies under the trace took a third of its traced preload."""
    seen: set[CodeType] = set()
    generated: dict[str, set[str]] = {}
    add = seen.add

    def record(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if code in seen:
            return
        add(code)
        if code.co_filename.startswith("<"):
            _note_generated(frame, generated)

    restore_import = _untraced_imports(record, set(packages)) if packages else None

    def stop() -> None:
        atexit.unregister(stop)
        if restore_import is not None:
            restore_import()
        _write(directory, seen, generated, preload=preload)

    sys.settrace(record)
    threading.settrace(record)
    atexit.register(stop)
    return stop


def packages_from(value: str) -> tuple[str, ...]:
    """The packages of TRACE_PACKAGES_ENV's value (comma-separated top-level names)."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


def read_traces(directory: Path) -> RunTrace:
    """Every trace written under `directory`, as one RunTrace (empty when none was)."""
    trace = RunTrace()
    for path in sorted(directory.glob(f"*{_SUFFIX}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            modules = {str(name): str(file) for name, file in data["modules"].items()}
            functions = {str(f): {str(q) for q in names} for f, names in data["functions"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        trace.processes += 1
        if data.get("preload") is True:
            trace.preloaded.update(modules)
        trace.modules.update(file for file in modules.values() if file)
        known = set(trace.names)
        trace.names.extend(name for name in modules if name not in known)
        for file, names in functions.items():
            trace.functions.setdefault(file, set()).update(names)
    return trace


def outer_name(qualname: str) -> str:
    """The outermost def of a qualified name: `A.f.<locals>.g` -> `A.f`."""
    return qualname.split(".<locals>", 1)[0]


def _note_generated(frame: FrameType, generated: dict[str, set[str]]) -> None:
    """A function compiled from a string ran: when its first argument is an instance (or
    the class) of a class defined in a module file, note that class's body as run."""
    code = frame.f_code
    if not code.co_argcount:
        return
    first = frame.f_locals.get(code.co_varnames[0])
    owner = first if isinstance(first, type) else type(first)
    module = sys.modules.get(getattr(owner, "__module__", ""))
    file = _module_file(module)
    qualname = getattr(owner, "__qualname__", "")
    if file and isinstance(qualname, str) and "<locals>" not in qualname:
        generated.setdefault(file, set()).add(f"{qualname}.{CLASS_BODY}")


def _untraced_imports(record: Callable[..., None], packages: set[str]) -> Callable[[], None]:
    """Make `import` statements of modules outside `packages` run untraced (and those of
    `packages` traced inside them); the returned function puts the import back."""
    real = builtins.__import__

    def importing(
        name: str,
        globals: Mapping[str, object] | None = None,
        locals: Mapping[str, object] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        where = name if level == 0 else str((globals or {}).get("__package__") or "")
        wanted = record if where.partition(".")[0] in packages else None
        current = sys.gettrace()
        if current is wanted or (current is not record and current is not None):
            return real(name, globals, locals, fromlist, level)  # as it is (or a debugger's)
        sys.settrace(wanted)
        try:
            return real(name, globals, locals, fromlist, level)
        finally:
            sys.settrace(current)

    builtins.__import__ = importing

    def put_back() -> None:
        if builtins.__import__ is importing:
            builtins.__import__ = real

    return put_back


def _write(
    directory: str, seen: Iterable[CodeType], generated: dict[str, set[str]], *, preload: bool
) -> None:
    sys.settrace(None)
    threading.settrace(None)
    functions: dict[str, set[str]] = {file: set(names) for file, names in generated.items()}
    for code in list(seen):
        functions.setdefault(code.co_filename, set()).add(outer_name(code.co_qualname))
    modules = {name: _module_file(module) for name, module in list(sys.modules.items())}
    record = {
        "modules": modules,
        "functions": {f: sorted(n) for f, n in functions.items()},
        "preload": preload,
    }
    path = os.path.join(directory, f"{os.getpid()}{_SUFFIX}")
    try:
        with open(f"{path}.tmp", "w", encoding="utf-8") as stream:
            json.dump(record, stream)
        os.replace(f"{path}.tmp", path)
    except OSError:
        pass  # the parent's folder is gone: it reads no trace and searches every commit


def _module_file(module: object) -> str:
    file = getattr(module, "__file__", None)
    return file if isinstance(file, str) and file.endswith(".py") else ""
