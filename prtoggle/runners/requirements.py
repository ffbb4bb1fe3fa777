"""What a command needs installed: the `detect` extra, pytest, the modules its children run."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

from prtoggle.errors import MissingDependencyError

DETECT_EXTRA = "detect"
"""The extra that installs torch, triton and numpy: `pip install 'prtoggle[detect]'`."""

TOOL_EXTRAS: dict[str, str] = {"pytest": "pytest"}
"""A tool a command imports -> the extra of prtoggle that installs it."""


def detect_modules() -> tuple[str, ...]:
    """The modules the `detect` extra installs on this platform (triton: Linux only)."""
    return ("torch", "triton", "numpy") if sys.platform == "linux" else ("torch", "numpy")


def require_installed(
    command: str, *, detect: bool = False, tools: Iterable[str] = (), runs: Iterable[str] = ()
) -> None:
    """Raise one MissingDependencyError naming everything `command` lacks here.

    `detect`: it needs the modules of the `detect` extra; `tools`: packages it imports
    (e.g. pytest); `runs`: modules its children run, whose top-level package must be
    findable (the demo engine `fixes` is found from its checkout's root only). Nothing is
    imported.
    """
    problems = []
    missing = [name for name in detect_modules() if detect and not _findable(name)]
    if missing:
        problems.append(
            f"`prtoggle {command}` needs {_join(detect_modules())} (missing here: "
            f"{_join(missing)}): install them with `pip install 'prtoggle[{DETECT_EXTRA}]'`"
        )
    absent_tools = [name for name in tools if not _findable(name)]
    if absent_tools:
        problems.append(
            f"`prtoggle {command}` needs {_join(absent_tools)}, which is not installed here: "
            f"`{_install_line(absent_tools)}`"
        )
    packages = sorted({module.split(".", 1)[0] for module in runs})
    absent = [name for name in packages if not _findable(name)]
    if absent:
        problems.append(
            f"`prtoggle {command}` runs modules of package {_join(absent)}, which is not "
            "importable here (the demo engine `fixes` is found from the root of prtoggle's "
            "source checkout only: run prtoggle there)"
        )
    if problems:
        raise MissingDependencyError("; and ".join(problems))


def _install_line(tools: Iterable[str]) -> str:
    """`pip install 'prtoggle[EXTRA,...]'` for tools an extra installs, else the tools' names."""
    extras = sorted({TOOL_EXTRAS[name] for name in tools if name in TOOL_EXTRAS})
    others = [name for name in tools if name not in TOOL_EXTRAS]
    words = ([f"'prtoggle[{','.join(extras)}]'"] if extras else []) + others
    return f"pip install {' '.join(words)}"


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _join(names: Iterable[str]) -> str:
    return ", ".join(names)
