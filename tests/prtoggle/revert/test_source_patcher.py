"""Tests for prtoggle.revert.source_patcher: sglang's source_patcher API on prtoggle's patching."""

from __future__ import annotations

import importlib
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

import prtoggle
from prtoggle.errors import PatchApplicationError, RegistryError
from prtoggle.revert.source_patcher import EditSpec, PatchSpec, patch_function

MODULE_TEXT = '''\
def tail(values):
    """Last two values."""
    picked = values[-2:]
    return picked


def boom(x):
    y = x + 1
    return y


class Holder:
    def scaled(self, x):
        factor = 2
        return x * factor
'''


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    name = f"sp_sample_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(MODULE_TEXT)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def recipe(module: object, body: str) -> str:
    return textwrap.dedent(body).replace("MOD", module.__name__)  # type: ignore[attr-defined]


def test_apply_edits_replaces_prepends_appends_and_keeps_the_trailing_newline() -> None:
    source = "def f():\n    a = 1\n    return a\n"
    edits = [
        EditSpec(match="a = 1", replacement="a = 2"),
        EditSpec(match="return a", prepend="a += 1"),
        EditSpec(match="a = 2", append="a *= 3"),
    ]
    assert prtoggle.apply_edits(source=source, edits=edits) == (
        "def f():\n    a = 2\n    a *= 3\n    a += 1\n    return a\n"
    )
    assert prtoggle.apply_edits(source="x = 1", edits=[{"match": "x = 1", "append": "y"}]) == (
        "x = 1\ny"
    )


def test_apply_edits_with_only_empty_kinds_deletes_the_matched_lines() -> None:
    source = "a = 1\nb = 2\nc = 3\n"
    deleted = prtoggle.apply_edits(source=source, edits=[{"match": "b = 2", "prepend": ""}])
    assert deleted == "a = 1\nc = 3\n"


def test_apply_edits_names_the_match_and_line_numbers_when_nothing_matches() -> None:
    with pytest.raises(PatchApplicationError) as info:
        prtoggle.apply_edits(source="a = 1\nb = 2\n", edits=[EditSpec(match="b = 3")])
    message = str(info.value)
    assert "<source>: edit 1 of 1 (line 1) matched 0 times in <source>:1-2" in message
    assert "       2 | b = 2" in message


def test_an_edit_spec_with_two_kinds_is_refused_like_a_recipe_file_with_two() -> None:
    with pytest.raises(RegistryError) as info:
        EditSpec(match="a", replacement="b", append="c")
    assert str(info.value) == (
        "EditSpec: edit sets more than one of replacement, prepend, append "
        "(got replacement, append); use one per edit"
    )


def test_a_config_edit_with_two_kinds_is_the_recipe_error_with_its_line(sample: object) -> None:
    config = "patches:\n- target: MOD.tail\n  edits:\n  - {match: a, prepend: b, append: c}\n"
    with pytest.raises(RegistryError) as info:
        prtoggle.apply_patches_from_config(recipe(sample, config))
    assert str(info.value) == (
        "patch config:4: edit sets more than one of replacement, prepend, append "
        "(got prepend, append); use one per edit"
    )


def test_apply_patches_from_config_patches_and_the_handle_restores_the_exact_code(
    sample: object,
) -> None:
    original = sample.tail.__code__  # type: ignore[attr-defined]
    states = prtoggle.apply_patches_from_config(
        recipe(
            sample,
            """
            patches:
              - target: MOD.tail
                edits:
                  - match: picked = values[-2:]
                    replacement: picked = values[-1:]
            """,
        )
    )
    assert sample.tail([1, 2, 3]) == [3]  # type: ignore[attr-defined]
    assert [state.target for state in states] == [f"{sample.__name__}.tail"]  # type: ignore[attr-defined]
    states[0].restore()
    assert sample.tail.__code__ is original  # type: ignore[attr-defined]
    states[0].restore()  # a second restore does nothing
    assert sample.tail([1, 2, 3]) == [2, 3]  # type: ignore[attr-defined]


def test_a_patched_function_keeps_its_real_file_line_numbers(sample: object) -> None:
    states = prtoggle.apply_patches_from_config(
        recipe(
            sample,
            """
            patches:
              - target: MOD.boom
                edits:
                  - match: y = x + 1
                    replacement: y = x / 0
            """,
        )
    )
    try:
        with pytest.raises(ZeroDivisionError) as info:
            sample.boom(1)  # type: ignore[attr-defined]
        frame = traceback.extract_tb(info.value.__traceback__)[-1]
        assert (Path(frame.filename).name, frame.lineno) == (Path(sample.__file__).name, 8)  # type: ignore[attr-defined]
    finally:
        states[0].restore()


def test_code_patcher_restores_on_exit_and_methods_patch_through_the_class(
    sample: object,
) -> None:
    spec = PatchSpec(
        target=f"{sample.__name__}.Holder.scaled",  # type: ignore[attr-defined]
        edits=[EditSpec(match="factor = 2", replacement="factor = 5")],
    )
    holder = sample.Holder()  # type: ignore[attr-defined]
    with prtoggle.CodePatcher(patches=[spec]) as patcher:
        assert isinstance(patcher, prtoggle.CodePatcher)
        assert holder.scaled(3) == 15
    assert holder.scaled(3) == 6


def test_a_failing_patch_restores_those_already_applied(sample: object) -> None:
    original = sample.tail.__code__  # type: ignore[attr-defined]
    with pytest.raises(PatchApplicationError, match="matched 0 times"):
        prtoggle.apply_patches_from_config(
            recipe(
                sample,
                """
                patches:
                  - target: MOD.tail
                    edits: [{match: "picked = values[-2:]", replacement: "picked = []"}]
                  - target: MOD.boom
                    edits: [{match: "no such line", replacement: "pass"}]
                """,
            )
        )
    assert sample.tail.__code__ is original  # type: ignore[attr-defined]


def test_patches_of_one_function_stack_and_restore_in_any_order(sample: object) -> None:
    original = sample.tail.__code__  # type: ignore[attr-defined]
    first = patch_function(
        target=sample.tail,  # type: ignore[attr-defined]
        edits=[EditSpec(match="picked = values[-2:]", replacement="picked = values[-1:]")],
    )
    second = patch_function(
        target=sample.tail,  # type: ignore[attr-defined]
        edits=[EditSpec(match="return picked", replacement="return picked * 2")],
    )
    assert sample.tail([1, 2, 3]) == [3, 3]  # type: ignore[attr-defined]
    assert second.original_code is original
    first.restore()
    assert sample.tail([1, 2, 3]) == [2, 3, 2, 3]  # type: ignore[attr-defined]
    second.restore()
    assert sample.tail.__code__ is original  # type: ignore[attr-defined]


def test_extra_imports_go_at_the_top_of_every_patched_body(sample: object) -> None:
    states = prtoggle.apply_patches_from_config(
        recipe(
            sample,
            """
            patches:
              - target: MOD.tail
                edits:
                  - match: picked = values[-2:]
                    replacement: picked = [sqrt(v) for v in values[-2:]]
            """,
        ),
        extra_imports=["from math import sqrt"],
    )
    try:
        assert sample.tail([1, 4, 9]) == [2.0, 3.0]  # type: ignore[attr-defined]
    finally:
        states[0].restore()


def test_unknown_keys_in_the_config_are_errors_that_list_the_allowed_ones(sample: object) -> None:
    with pytest.raises(RegistryError, match="unknown key 'patchez' in patch config; expected one "):
        prtoggle.apply_patches_from_config("patchez: []\npatches: []\n")
    with pytest.raises(RegistryError, match="unknown key 'matc'"):
        prtoggle.apply_patches_from_config(
            recipe(sample, "patches: [{target: MOD.tail, edits: [{matc: x}]}]")
        )


def test_the_drop_ins_are_lazy_exports_of_prtoggle() -> None:
    assert {"CodePatcher", "apply_edits", "apply_patches_from_config"} <= set(prtoggle.__all__)
    assert prtoggle.apply_edits is sys.modules["prtoggle.revert.source_patcher"].apply_edits
