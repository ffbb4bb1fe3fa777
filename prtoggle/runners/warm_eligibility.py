"""Which commands a warm worker can run: `python -m/-c/SCRIPT` of this interpreter, same env."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from prtoggle.protocol import (
    DETECT_MODE_ENV,
    NAN_DETECTION_ENV,
    OOB_DETECTION_ENV,
    POISON_ENV,
    REVERT_ENV,
    RUN_REPORT_ENV,
    TRACE_ENV,
    TRACE_PACKAGES_ENV,
    YAML_PATH_ENV,
)
from prtoggle.revert.processes import BOOTSTRAP_DIR

RUNTIME_VARIABLES = frozenset(
    {
        REVERT_ENV,
        RUN_REPORT_ENV,
        NAN_DETECTION_ENV,
        OOB_DETECTION_ENV,
        POISON_ENV,
        DETECT_MODE_ENV,
        YAML_PATH_ENV,
        TRACE_ENV,
        TRACE_PACKAGES_ENV,
    }
)
"""Variables read when used, not at import: a warm run may differ from the server in them
(the recipe folders are read when the run's reverts are chosen, after the fork; a trace
starts after the fork too)."""

Form = Literal["module", "script", "code"]


@dataclass(frozen=True)
class PythonInvocation:
    """A command that starts this interpreter's main: `-m MODULE`, `SCRIPT` or `-c CODE`."""

    form: Form
    target: str
    args: tuple[str, ...]


def python_invocation(argv: Sequence[str], *, path: str | None = None) -> PythonInvocation | None:
    """The invocation `argv` is when it runs this interpreter without options; else None."""
    if len(argv) < 2 or not _is_this_interpreter(argv[0], path=path):
        return None
    first, rest = argv[1], tuple(argv[2:])
    if first in ("-m", "-c"):
        if not rest:
            return None
        return PythonInvocation("module" if first == "-m" else "code", rest[0], rest[1:])
    if first.startswith("-"):
        return None
    return PythonInvocation("script", first, rest)


def cold_reason(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    base_env: Mapping[str, str],
    cwd: str | None = None,
) -> str | None:
    """Why `argv` with `env` must run as a plain child of a worker started with `base_env`;
    None when it can run warm.

    A SCRIPT that is a directory or a zip archive (`python DIR`, `python app.pyz`:
    Python runs the `__main__.py` inside through runpy) runs in a plain child.
    """
    invocation = python_invocation(argv, path=env.get("PATH"))
    if invocation is None:
        return "not `python -m/-c/SCRIPT` of this interpreter without interpreter options"
    if invocation.form == "script" and not _is_source_file(invocation.target, cwd=cwd):
        return (
            f"{invocation.target} is a directory or a zip archive, whose __main__.py "
            "Python runs through runpy"
        )
    differing = _differing_variables(env, base_env)
    if differing:
        return f"its environment differs from the worker's in {', '.join(differing)}"
    return None


def env_without_revert(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without SGLANG_DEBUG_REVERT_PR: what a worker starts with."""
    return {key: value for key, value in env.items() if key != REVERT_ENV}


def _differing_variables(env: Mapping[str, str], base: Mapping[str, str]) -> list[str]:
    keys = (set(env) | set(base)) - RUNTIME_VARIABLES - {"PYTHONPATH"}
    differing = sorted(key for key in keys if env.get(key) != base.get(key))
    if _python_path(env) != _python_path(base):
        differing.append("PYTHONPATH")
    return differing


def _python_path(env: Mapping[str, str]) -> list[str]:
    entries = env.get("PYTHONPATH", "").split(os.pathsep)
    return [entry for entry in entries if entry and entry != str(BOOTSTRAP_DIR)]


def _is_this_interpreter(program: str, *, path: str | None) -> bool:
    found = program if os.sep in program else shutil.which(program, path=path)
    if found is None:
        return False
    if os.path.abspath(found) == os.path.abspath(sys.executable):
        return True
    return os.path.realpath(found) == os.path.realpath(sys.executable) and _venv_of(
        found
    ) == _venv_of(sys.executable)


def _is_source_file(script: str, *, cwd: str | None) -> bool:
    """Whether `python SCRIPT` compiles SCRIPT itself (not a directory or zip archive)."""
    path = os.path.join(cwd or os.getcwd(), script)
    if os.path.isdir(path):
        return False
    try:
        return not zipfile.is_zipfile(path)
    except OSError:
        return True  # missing or unreadable: the warm run reports it as Python would


def _venv_of(executable: str) -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(executable)))
    return root if os.path.exists(os.path.join(root, "pyvenv.cfg")) else None
