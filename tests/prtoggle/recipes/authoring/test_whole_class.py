"""Tests of recipes.authoring.whole_class: when a changed class can be defined back whole."""

from __future__ import annotations

import ast

from prtoggle.recipes.authoring.whole_class import whole_class_blocker, whole_class_reason


def classes(pre: str, post: str) -> tuple[ast.ClassDef, ast.ClassDef]:
    old, new = ast.parse(pre).body[-1], ast.parse(post).body[-1]
    assert isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef)
    return old, new


def blocker(pre: str, post: str, *, descriptors: frozenset[str] = frozenset()) -> str | None:
    old, new = classes(pre, post)
    return whole_class_blocker(old, new, descriptors=descriptors)


def test_a_dataclass_or_a_struct_with_plain_members_can_run_again() -> None:
    pre = '@dataclass(frozen=True)\nclass P:\n    """Doc."""\n    a: int\n    b = 1\n'
    assert blocker(pre, pre.replace("a: int", "c: str")) is None
    struct = "class V(msgspec.Struct):\n    x: int\n\n    @property\n    def y(self):\n"
    struct += "        return 1\n"
    assert blocker(struct, struct.replace("Struct)", "Struct, frozen=True)")) is None


def test_a_registering_decorator_of_either_class_blocks_it() -> None:
    pre = "class C:\n    pass\n"
    assert blocker("@register\n" + pre, pre) == "@register not re-applied"
    assert blocker(pre, "@models.add('c')\n" + pre) == "@models.add not re-applied"


def test_a_member_decorator_or_nested_class_decorator_not_re_applied_blocks_it() -> None:
    method = "class C:\n    @torch.compile\n    def f(self):\n        pass\n"
    assert blocker(method, method) == "@torch.compile of C.f not re-applied"
    nested = "class C:\n    @register\n    class Inner:\n        pass\n"
    assert blocker(nested, nested) == "@register not re-applied"


def test_code_in_the_body_that_binds_nothing_blocks_it() -> None:
    called = "class C:\n    x = 1\n    hooks.append(x)\n"
    assert blocker(called, called) == "code in the class body of C runs again"
    branch = "class C:\n    if FLAG:\n        x = 1\n"
    assert blocker(branch, branch) == "code in the class body of C runs again"


def test_a_descriptor_class_and_an_attribute_made_by_one_block_it() -> None:
    envs = "class Envs:\n    FLAG = EnvBool(False)\n"
    descriptors = frozenset({"EnvBool"})
    assert blocker(envs, envs, descriptors=descriptors) == ("an attribute of Envs made by EnvBool")
    field = "class EnvBool:\n    def __set_name__(self, owner, name):\n        pass\n"
    assert blocker(field, field, descriptors=descriptors) == (
        "EnvBool names its instances (__set_name__)"
    )


def test_the_reason_says_what_keeps_the_post_fix_class() -> None:
    assert whole_class_reason("P") == (
        "P defined back whole, a new class: instances and subclasses made from the post-fix "
        "class before the revert landed keep it (isinstance against the pre-fix class fails "
        "for them)"
    )
