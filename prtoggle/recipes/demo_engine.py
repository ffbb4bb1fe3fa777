"""The demo engine `fixes` of a source checkout: importable by prtoggle run from that checkout.

Neither the wheel nor an editable install puts `fixes` on sys.path (only `prtoggle` is
installed, so a project's own `tests` or `fixes` is never shadowed). A command run from the
checkout's root finds the demo engine as Python does there (`python -m`, `python -c`,
pytest's `pythonpath` setting); `prtoggle` itself, whose console script does not put the
current directory on sys.path, finds it through `make_importable()`: exactly the name
`fixes`, from the current directory when that is prtoggle's own checkout.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

DEMO_PACKAGE = "fixes"
"""The demo engine's import name (the `fixes` collection's package)."""


def checkout_root() -> str | None:
    """prtoggle's source checkout (the folder above the package holding `yaml/` and the demo
    engine), or None for an installed wheel."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(package_dir)
    demo = os.path.join(root, DEMO_PACKAGE, "__init__.py")
    if os.path.isdir(os.path.join(root, "yaml")) and os.path.isfile(demo):
        return root
    return None


def make_importable(*, cwd: str | None = None) -> bool:
    """Let this process import `fixes` when `cwd` (default: the current directory) is
    prtoggle's checkout, as its `python -m` children can; True when it now can."""
    root = checkout_root()
    if root is None:
        return False
    try:
        here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    except OSError:
        return False
    if here != os.path.realpath(root):
        return False
    if not any(isinstance(finder, _DemoEngineFinder) for finder in sys.meta_path):
        sys.meta_path.append(_DemoEngineFinder(root))
    return True


def forget() -> None:
    """Take the finder `make_importable` added out of sys.meta_path (tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _DemoEngineFinder)]


class _DemoEngineFinder:
    """A meta path finder of the top-level name `fixes` in one folder (its submodules follow
    its __path__); no importlib.abc base: that import costs every command's start-up."""

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != DEMO_PACKAGE:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])
