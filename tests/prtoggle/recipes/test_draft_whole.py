"""Drafting whole fixes (issue 27): what `draft_from_diff` gives for each kind of change."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from prtoggle.patching.define_code import compile_define
from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.authoring.from_diff import (
    Draft,
    DraftNames,
    NotRevertedChange,
    SkippedChange,
    draft_from_diff,
)


def git_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    return f"diff --git a/{path} b/{path}\n" + "\n".join(lines) + "\n"


def draft(tmp_path: Path, before: str, after: str, *, name: str = "mod.py") -> Draft:
    """The draft of one module of package `pkg` (post-fix text `after`) under python/."""
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / name).write_text(after)
    diff = git_diff(f"python/pkg/{name}", before, after)
    return draft_from_diff(diff, source="fix.diff", roots=[open_source_tree(tmp_path / "python")])


def names(result: Draft) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(entry.scope, entry.define, entry.remove) for entry in result.names]


def listed(result: Draft) -> list[tuple[int, str | None, str]]:
    return [(change.line, change.code, change.reason) for change in result.not_reverted]


def test_a_function_the_fix_added_is_removed_and_one_it_removed_is_defined_byte_for_byte(
    tmp_path: Path,
) -> None:
    before = "def old(x):\n    # the helper\n\n    return x + 1\n"
    after = "def new(x):\n    return x + 2\n"
    result = draft(tmp_path, before, after)
    assert names(result) == [("pkg.mod", before, ("new",))]
    assert (result.targets, result.not_reverted) == ([], [])


def test_only_the_import_names_that_changed_are_defined_as_the_module_wrote_them(
    tmp_path: Path,
) -> None:
    before = "import os\nfrom a.b import c as d, e\nfrom .x import y\n"
    after = "import os\nfrom a.b import e\nfrom .z import y\nimport sys\n"
    result = draft(tmp_path, before, after)
    assert names(result) == [("pkg.mod", "from a.b import c as d\nfrom .x import y\n", ("sys",))]


def test_a_method_added_to_a_subclass_is_removed_in_the_class_scope(tmp_path: Path) -> None:
    before = "class Base:\n    def f(self):\n        return 1\n\n\nclass Sub(Base):\n    X = 1\n"
    after = before + "\n    def f(self):\n        return 2\n"
    assert names(draft(tmp_path, before, after)) == [("pkg.mod.Sub", "", ("f",))]


def test_a_method_whose_use_of_super_changes_is_defined_whole_not_patched(
    tmp_path: Path,
) -> None:
    before = "class A(B):\n    def f(self):\n        return B.f(self)\n"
    after = "class A(B):\n    def f(self):\n        return super().f()\n"
    result = draft(tmp_path, before, after)
    assert result.targets == []
    assert names(result) == [("pkg.mod.A", "def f(self):\n    return B.f(self)\n", ())]


def test_a_decorator_change_is_defined_when_sound_else_patched_and_listed(
    tmp_path: Path,
) -> None:
    before = (
        "class A:\n    @staticmethod\n    def f(x):\n        return x\n\n"
        "    @register\n    def g(x):\n        return x\n"
    )
    after = (
        "class A:\n    @classmethod\n    def f(x):\n        return x\n\n"
        "    @torch.compile\n    def g(x):\n        return x + 1\n"
    )
    result = draft(tmp_path, before, after)
    assert names(result) == [("pkg.mod.A", "@staticmethod\ndef f(x):\n    return x\n", ())]
    assert [t.target for t in result.targets] == ["pkg.mod.A.g"]
    assert listed(result) == [
        (6, "@torch.compile", "decorators of A.g changed (@register not re-applied)")
    ]


def test_dataclass_fields_and_class_headers_define_the_class_whole_other_module_code_is_listed(
    tmp_path: Path,
) -> None:
    before = (
        "@dataclass\nclass C:\n    a: int = 1\n\n\nclass D(object):\n    pass\n\n\n"
        "for i in range(3):\n    pass\n"
    )
    after = (
        "@dataclass\nclass C:\n    a: int = 2\n\n\nclass D(dict):\n    pass\n\n\n"
        "for i in range(4):\n    pass\n"
    )
    result = draft(tmp_path, before, after)
    define = "@dataclass\nclass C:\n    a: int = 1\nclass D(object):\n    pass\n"
    assert names(result) == [("pkg.mod", define, ())]
    whole = (
        "defined back whole, a new class: instances and subclasses made from the post-fix "
        "class before the revert landed keep it (isinstance against the pre-fix class fails "
        "for them)"
    )
    assert listed(result) == [
        (10, "for i in range(4):", "module-level code changed"),
        (3, "a: int = 2", f"C {whole}"),
        (6, "class D(dict):", f"D {whole}"),
    ]
    registered = draft(tmp_path, "@register\n" + before, "@register\n" + after)
    assert listed(registered)[1:] == [
        (4, "a: int = 2", "a field of C changed"),
        (7, "class D(dict):", f"D {whole}"),
    ]


def test_a_name_also_bound_by_other_module_code_is_listed_not_defined(tmp_path: Path) -> None:
    before = "try:\n    import fast\nexcept ImportError:\n    fast = None\nfast = 1\n"
    after = before.replace("fast = 1", "fast = 2")
    assert listed(draft(tmp_path, before, after)) == [
        (5, "fast = 2", "fast is also bound by other module-level code")
    ]


def test_names_under_an_if_are_drafted_only_with_a_remove_that_refuses_where_it_did_not_run(
    tmp_path: Path,
) -> None:
    before = "if ENABLED:\n    from lib import get\n"
    after = (
        "if ENABLED:\n    from lib import get as _get\n\n    def get(x):\n        return _get(x)\n"
    )
    assert names(draft(tmp_path, before, after)) == [
        ("pkg.mod", "from lib import get\n", ("_get",))
    ]
    changed_value = draft(tmp_path, "if ENABLED:\n    X = 1\n", "if ENABLED:\n    X = 2\n")
    assert (names(changed_value), listed(changed_value)) == (
        [],
        [(2, "X = 2", "module-level code changed")],
    )


def test_a_function_added_under_a_registering_decorator_is_removed_and_listed(
    tmp_path: Path,
) -> None:
    after = (
        "@register_model('x')\ndef f():\n    pass\n\n\n@register_custom_op\ndef g():\n    pass\n"
    )
    result = draft(tmp_path, "", after)
    assert names(result) == [("pkg.mod", "", ("f", "g"))]
    assert listed(result) == [
        (
            1,
            "@register_model('x')",
            "f added by the fix is removed, but @register_model may have registered it",
        ),
    ]


def test_type_checking_only_code_is_skipped_as_never_run(tmp_path: Path) -> None:
    before = "if TYPE_CHECKING:\n    from a import B\n"
    after = "if TYPE_CHECKING:\n    from a import B, C\n"
    result = draft(tmp_path, before, after)
    assert (result.names, result.not_reverted) == ([], [])
    assert result.skipped == [
        SkippedChange("python/pkg/mod.py", 2, "type-checking-only code (never runs)")
    ]


def test_a_module_added_whole_is_an_added_module_and_a_non_python_file_is_listed(
    tmp_path: Path,
) -> None:
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "new.py").write_text("X = 1\n")
    (package / "kernel.cu").write_text("int a;\nint b;\n")
    diff = git_diff("python/pkg/kernel.cu", "int a;\n", "int a;\nint b;\n")
    diff += "diff --git a/python/pkg/new.py b/python/pkg/new.py\n--- /dev/null\n"
    diff += "+++ b/python/pkg/new.py\n@@ -0,0 +1 @@\n+X = 1\n"
    result = draft_from_diff(diff, source="d", roots=[open_source_tree(tmp_path / "python")])
    assert result.not_reverted == [
        NotRevertedChange("pkg/kernel.cu", 2, "not Python source", "int b;"),
    ]
    assert result.added_modules == ["pkg.new"]


def test_a_package_added_whole_is_one_added_module_and_an_added_test_file_stays_listed(
    tmp_path: Path,
) -> None:
    package = tmp_path / "python" / "pkg"
    (package / "fresh").mkdir(parents=True)
    (package / "tests").mkdir()
    for name in ("__init__.py", "fresh/__init__.py", "fresh/impl.py", "tests/test_fresh.py"):
        (package / name).write_text("X = 1\n")
    diff = "".join(
        f"diff --git a/python/pkg/{name} b/python/pkg/{name}\n--- /dev/null\n"
        f"+++ b/python/pkg/{name}\n@@ -0,0 +1 @@\n+X = 1\n"
        for name in ("fresh/impl.py", "fresh/__init__.py", "tests/test_fresh.py")
    )
    result = draft_from_diff(diff, source="d", roots=[open_source_tree(tmp_path / "python")])
    assert result.added_modules == ["pkg.fresh"]
    assert result.not_reverted == [
        NotRevertedChange("pkg/tests/test_fresh.py", 1, "a module added whole", "X = 1"),
    ]


@pytest.mark.parametrize("path", ["../x.py", "/etc/x.py", "python/../../x.py"])
def test_a_path_leaving_the_source_root_is_skipped_never_read(tmp_path: Path, path: str) -> None:
    root = tmp_path / "python"
    root.mkdir()
    (root / "x.py").write_text("disagrees with the diff\n")
    diff = git_diff(path, "a = 1\n", "a = 2\n")
    result = draft_from_diff(diff, source="d", roots=[open_source_tree(root)])
    assert result.skipped == [SkippedChange(path, 1, "not in the source root")]


def test_a_link_in_the_root_pointing_out_of_it_is_skipped_never_read(tmp_path: Path) -> None:
    root = tmp_path / "python" / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    outside = tmp_path / "outside.py"
    outside.write_text("disagrees with the diff\n")
    os.symlink(outside, root / "mod.py")
    diff = git_diff("python/pkg/mod.py", "a = 1\n", "a = 2\n")
    result = draft_from_diff(diff, source="d", roots=[open_source_tree(tmp_path / "python")])
    assert result.skipped == [SkippedChange("python/pkg/mod.py", 1, "not in the source root")]


def test_a_byte_order_mark_file_names_the_right_function_when_its_first_line_changes(
    tmp_path: Path,
) -> None:
    before = "# header\nX = 1\n\n\ndef f():\n    return 1\n"
    after = "# header v2\nX = 1\n\n\ndef f():\n    return 2\n"
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_bytes(b"\xef\xbb\xbf" + after.encode())
    diff = git_diff("python/pkg/mod.py", "\ufeff" + before, "\ufeff" + after)
    result = draft_from_diff(diff, source="d", roots=[open_source_tree(tmp_path / "python")])
    assert [(t.target, t.line) for t in result.targets] == [("pkg.mod.f", 6)]
    assert (result.names, result.not_reverted, result.skipped) == ([], [], [])


def test_draft_names_keep_the_scope_file_and_first_changed_line(tmp_path: Path) -> None:
    result = draft(tmp_path, "A = 1\nB = 2\n", "A = 1\nB = 3\n")
    assert result.names == [DraftNames("pkg.mod", "B = 2\n", (), "pkg/mod.py", 2)]


def test_a_triton_kernel_is_defined_back_whole_and_another_kernel_object_listed(
    tmp_path: Path,
) -> None:
    # @triton.jit makes a JITFunction, not a function: the runtime refuses a code swap.
    # Defined again, it is a new kernel that compiles the pre-fix source; a TorchScript
    # function has no such sound define.
    before = "import triton\n\n\n@triton.jit\ndef kernel(x):\n    return x + 1\n"
    result = draft(tmp_path, before, before.replace("x + 1", "x + 2"))
    assert result.targets == [] and result.not_reverted == []
    assert names(result) == [("pkg.mod", before[before.index("@") :], ())]
    removed = draft(tmp_path, before, "import triton\n")  # the fix removed the kernel
    assert names(removed) == [("pkg.mod", before[before.index("@") :], ())]
    scripted = before.replace("@triton.jit", "@torch.jit.script")
    result = draft(tmp_path, scripted, scripted.replace("x + 1", "x + 2"))
    assert (result.targets, result.names) == ([], [])
    reason = "kernel changed (@torch.jit.script: a kernel object, not a function, no swap)"
    assert listed(result) == [(6, "return x + 2", reason)]


def test_a_changed_docstring_of_the_module_or_a_class_is_defined_as_its_pre_fix_value(
    tmp_path: Path,
) -> None:
    # A docstring binds `__doc__`; its value keeps the class's indentation, so it is
    # written as a literal of that value, not as the dedented text.
    before = (
        '"""Module, before."""\n\nimport os\n\n\n'
        'class C:\n    """Class,\n    before."""\n\n    x = 1\n'
    )
    after = before.replace("before.", "after.")
    result = draft(tmp_path, before, after)
    assert names(result) == [
        ("pkg.mod", "__doc__ = 'Module, before.'\n", ()),
        ("pkg.mod.C", "__doc__ = 'Class,\\n    before.'\n", ()),
    ]
    assert (result.targets, result.not_reverted) == ([], [])
    namespace: dict[str, object] = {}
    exec(before, namespace)
    assert namespace["C"].__doc__ == "Class,\n    before."  # type: ignore[attr-defined]


def test_a_method_with_a_multi_line_docstring_is_defined_as_the_file_indents_it(
    tmp_path: Path,
) -> None:
    # Dedented, the docstring's second line would lose the class's indentation: another
    # __doc__ than the pre-fix method's (Python 3.11 keeps a docstring as written).
    method = '    def old(self):\n        """Two\n        lines."""\n        return 1\n'
    before = f"class C:\n    x = 1\n\n{method}"
    result = draft(tmp_path, before, "class C:\n    x = 1\n")
    assert names(result) == [("pkg.mod.C", method, ())]
    code = compile_define(method, filename="r.yaml", first_line=1, class_name="C", future_flags=0)
    built: dict[str, object] = {}
    exec(code, {}, built)
    assert built["C"].old.__doc__ == "Two\n        lines."  # type: ignore[attr-defined]


DESCRIPTOR_MODULE = """\
class Field:
    allow = True

    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        assert Field.allow, "naming a field after import is not allowed"
        self.name = name


class BoolField(Field):
    pass


class Envs:
    FLAG = BoolField({flag})
    LIMIT = {limit}
"""


def test_a_class_attribute_made_by_a_descriptor_class_of_the_module_is_listed_not_defined(
    tmp_path: Path,
) -> None:
    before = DESCRIPTOR_MODULE.format(flag="False", limit="1")
    after = DESCRIPTOR_MODULE.format(flag="True", limit="2")
    result = draft(tmp_path, before, after)
    assert names(result) == [("pkg.mod.Envs", "LIMIT = 1\n", ())]
    assert listed(result) == [
        (
            17,
            "FLAG = BoolField(True)",
            "Envs.FLAG changed (a BoolField, whose __set_name__ runs only when the class "
            "statement does: defined back, it would be named on a stand-in class)",
        )
    ]
