"""Drafting whole fixes: unchanged statements that read a changed name when the module loads."""

from __future__ import annotations

import difflib
from pathlib import Path

from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.authoring.from_diff import Draft, draft_from_diff

BEFORE = """\
import functools

_MAX = 8
_LIMIT = _MAX * 2
_TABLE = {"limit": _LIMIT}
_OTHER = 3


def size(n=_MAX):
    return n


@functools.lru_cache(maxsize=_LIMIT)
def cached(x):
    return x


def patched(x=_LIMIT):
    return x + 1


def untouched(x=_OTHER):
    return x


class Holder:
    cap = _MAX
    doubled = cap * 2
    plain = 1

    def get(self, k=_MAX):
        return k
"""
AFTER = BEFORE.replace("_MAX = 8", "_MAX = 16").replace("return x + 1", "return x + 2")


def draft(tmp_path: Path, before: str, after: str) -> Draft:
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(after)
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "a/python/pkg/mod.py", "b/python/pkg/mod.py"
    )
    diff = "diff --git a/python/pkg/mod.py b/python/pkg/mod.py\n" + "\n".join(
        line.rstrip("\n") for line in lines
    )
    return draft_from_diff(
        diff + "\n", source="fix.diff", roots=[open_source_tree(tmp_path / "python")]
    )


def test_values_defaults_decorator_arguments_and_class_members_reading_it_are_re_run(
    tmp_path: Path,
) -> None:
    result = draft(tmp_path, BEFORE, AFTER)
    entries = {entry.scope: (entry.define, entry.remove) for entry in result.names}
    assert entries == {
        "pkg.mod": (
            '_MAX = 8\n_LIMIT = _MAX * 2\n_TABLE = {"limit": _LIMIT}\n'
            "def size(n=_MAX):\n    return n\n"
            "@functools.lru_cache(maxsize=_LIMIT)\ndef cached(x):\n    return x\n"
            "def patched(x=_LIMIT):\n    return x + 1\n",
            (),
        ),
        "pkg.mod.Holder": (
            "cap = _MAX\ndoubled = cap * 2\ndef get(self, k=_MAX):\n    return k\n",
            (),
        ),
    }
    assert result.targets == []  # `patched` is defined whole: its default reads _LIMIT
    assert result.not_reverted == []


def test_readers_no_define_can_re_run_are_listed_with_their_line(tmp_path: Path) -> None:
    before = (
        "import dataclasses\nfrom reg import register\n\n_MAX = 8\nprint(_MAX)\n"
        "if TYPE_CHECKING:\n    X = _MAX\n"
        "@dataclasses.dataclass\nclass Config:\n    n: int = _MAX\n\n\n"
        "class Sized(Base, size=_MAX):\n    pass\n\n\n"
        "@register(limit=_MAX)\ndef handler():\n    pass\n"
    )
    after = before.replace("_MAX = 8", "_MAX = 16")
    result = draft(tmp_path, before, after)
    assert [(e.scope, e.define, e.remove) for e in result.names] == [("pkg.mod", "_MAX = 8\n", ())]
    reads = "reads `_MAX` at load time, which the revert changes"
    assert sorted((c.line, c.code, c.reason) for c in result.not_reverted) == [
        (5, "print(_MAX)", f"module-level code {reads}"),
        (10, "n: int = _MAX", f"a field of Config {reads}"),
        (13, "class Sized(Base, size=_MAX):", f"class statement of Sized {reads}"),
        (17, "@register(limit=_MAX)", f"handler (@register not re-applied) {reads}"),
    ]
