"""missing_imports: a define's imports of modules the installed package lacks are left out."""

from __future__ import annotations

from prtoggle.recipes.authoring.from_diff import DraftNames, NotRevertedChange
from prtoggle.recipes.authoring.missing_imports import without_missing_imports

HAVE = {"pkg", "pkg.core", "pkg.kernels"}


def has_module(name: str) -> bool | None:
    return name in HAVE if name.split(".", maxsplit=1)[0] == "pkg" else None


def test_each_import_form_of_a_missing_module_is_dropped_and_listed_by_what_it_binds() -> None:
    define = (
        "import os\n"
        "import pkg.jit.utils\n"
        "from pkg.jit import ops as jit_ops\n"
        "from pkg.kernels import fast\n"
        "from numpy import array\n"
        "LIMIT = 3\n"
    )
    listed: list[NotRevertedChange] = []
    kept = without_missing_imports(
        [DraftNames("pkg.core", define, ("NEW",), "pkg/core.py", 4)], listed, has_module=has_module
    )
    assert [entry.define for entry in kept] == [
        "import os\nfrom pkg.kernels import fast\nfrom numpy import array\nLIMIT = 3\n"
    ]
    assert [(c.file, c.line, c.reason) for c in listed] == [
        (
            "pkg/core.py",
            4,
            "`pkg.core.pkg` not defined back: its pre-fix code imports `pkg.jit`, which the "
            "installed package does not have",
        ),
        (
            "pkg/core.py",
            4,
            "`pkg.core.jit_ops` not defined back: its pre-fix code imports `pkg.jit`, which "
            "the installed package does not have",
        ),
    ]


def test_an_entry_left_with_nothing_to_do_goes() -> None:
    listed: list[NotRevertedChange] = []
    entry = DraftNames("pkg.core", "from pkg.gone import x\n", (), "pkg/core.py", 2)
    assert without_missing_imports([entry], listed, has_module=has_module) == []
    assert len(listed) == 1
