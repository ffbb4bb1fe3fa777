"""Tests for recipes.schema: schema, sglang compatibility, limits, file:line diagnostics."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from revert_fixtures import write_fix

from prtoggle.errors import RegistryError
from prtoggle.recipes.registry import Edit, Patch, load_registry
from prtoggle.recipes.schema import MAX_RECIPE_BYTES, load_recipe

FULL_FIX = """\
pr: 901
title: copy lengths during capture
url: https://example.invalid/pull/901
merged: 2026-05-29
component: app.attention
symptom: nan
expect: NaNDetected.*capture
repro: app.scenarios.capture
patches:
  - target: app.attention.Backend.init_capture
    edits:
      - match: |
          lengths.copy_(seq_lens)
        replacement: ""
      - match: x = 1
        prepend: |
          y = 2
  - target: app.attention.forward
    edits:
      - match: return out
        append: "log(out)"
bench: app.benchmarks.capture
"""


def test_full_fix_loads_every_field_with_yaml_lines(tmp_path: Path) -> None:
    path = write_fix(tmp_path, 901, FULL_FIX)
    fix = load_recipe(path)
    assert fix.pr == 901
    assert fix.merged == datetime.date(2026, 5, 29)
    assert (fix.url, fix.component, fix.symptom, fix.expect, fix.repro, fix.bench) == (
        "https://example.invalid/pull/901",
        "app.attention",
        "nan",
        "NaNDetected.*capture",
        "app.scenarios.capture",
        "app.benchmarks.capture",
    )
    assert fix.patches == (
        Patch(
            target="app.attention.Backend.init_capture",
            edits=(
                Edit(match="lengths.copy_(seq_lens)\n", kind="replacement", text="", line=12),
                Edit(match="x = 1", kind="prepend", text="y = 2\n", line=15),
            ),
            line=10,
        ),
        Patch(
            target="app.attention.forward",
            edits=(Edit(match="return out", kind="append", text="log(out)", line=20),),
            line=18,
        ),
    )
    assert fix.acts_at_capture


def test_sglang_patches_block_with_only_pr_and_title_loads(tmp_path: Path) -> None:
    path = write_fix(
        tmp_path,
        902,
        """\
        pr: 902
        title: plain sglang file
        patches:
          - target: app.f
            edits:
              - match: a = 1
                replacement: a = 2
        """,
    )
    fix = load_recipe(path)
    assert (fix.url, fix.merged, fix.symptom, fix.acts_at_capture) == (None, None, None, False)
    assert fix.patches[0].edits[0].kind == "replacement"


def test_edit_kinds_follow_sglang_defaults(tmp_path: Path) -> None:
    path = write_fix(
        tmp_path,
        902,
        """\
        pr: 902
        title: sglang defaults
        patches:
          - target: app.f
            edits:
              - match: a = 1
              - match: b = 1
                replacement:
              - match: c = 1
                replacement: ""
                append: "c = 2"
        """,
    )
    assert [(e.kind, e.text) for e in load_recipe(path).patches[0].edits] == [
        ("replacement", ""),
        ("replacement", ""),
        ("append", "c = 2"),
    ]


def test_a_file_of_sglang_text_alone_takes_its_pr_from_the_file_name(tmp_path: Path) -> None:
    path = write_fix(
        tmp_path / "sglang",
        27460,
        """\
        patches:
          - target: app.f
            preamble: |
              import math
            edits:
              - match: a = 1
                prepend:
        """,
    )
    fix = load_recipe(path)
    assert (fix.pr, fix.title, fix.collection, fix.label) == (27460, "", "sglang", "sglang/27460")
    assert fix.patches[0].preamble == "import math\n"
    assert [(e.kind, e.text) for e in fix.patches[0].edits] == [("replacement", "")]


@pytest.mark.parametrize("kind", ["prepend", "append"])
def test_an_edit_whose_only_kind_is_empty_deletes_the_matched_lines(
    tmp_path: Path, kind: str
) -> None:
    body = f"patches:\n  - target: app.f\n    edits:\n      - match: a = 1\n        {kind}: ''\n"
    edit = load_recipe(write_fix(tmp_path, 902, body)).patches[0].edits[0]
    assert (edit.kind, edit.text) == ("replacement", "")


def test_recipe_module_key_examples_name_real_modules() -> None:
    import importlib.util

    from prtoggle.recipes.schema import _MODULE_KEY_EXAMPLES

    for key, module in _MODULE_KEY_EXAMPLES.items():
        assert importlib.util.find_spec(module) is not None, (key, module)


def error_for(tmp_path: Path, body: str) -> str:
    path = write_fix(tmp_path, 903, body)
    with pytest.raises(RegistryError) as caught:
        load_recipe(path)
    return str(caught.value).replace(str(path), "F")


ONE_EDIT = "patches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n"
MINIMAL = "pr: 903\ntitle: t\npatches:\n  - target: app.f\n    edits:\n      - match: a\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            MINIMAL + "        replacement: b\nowner: me\n",
            "F:8: unknown key 'owner' in fix file; expected one of: patches, pr, title, url, "
            "merged, component, symptom, expect, repro, bench, verified_on, applies_to, names, "
            "not_reverted, guards, added_modules",
        ),
        (
            "pr: 903\ntitle: t\n",
            "F:1: fix file is missing required key 'patches'; required keys: patches",
        ),
        ("pr: '903'\ntitle: t\npatches: []\n", "F:1: 'pr' must be a positive integer, got '903'"),
        (
            "pr: 903\ntitle: t\npatches: []\n",
            "F:3: 'patches' must be a non-empty list of {target, edits} mappings, got []",
        ),
        (
            MINIMAL + "        replacement: b\nsymptom: nans\n",
            "F:8: 'symptom' 'nans' is not one of: nan, illegal-memory-access, out-of-bounds, "
            "memory-corruption, stale-read, wrong-output",
        ),
        (
            MINIMAL + "        replacement: b\nexpect: 'NaN('\n",
            "F:8: 'expect' 'NaN(' is not a valid regular expression: missing ), unterminated "
            "subpattern at position 3",
        ),
        (
            MINIMAL + "        replacement: b\nrepro: scenarios/run.py\n",
            "F:8: 'repro' must be a dotted module name like "
            "fixes.scenarios.trtllm_draft_decode_capture, got "
            "'scenarios/run.py'",
        ),
        (
            MINIMAL + "        replacement: b\nbench: benchmarks/run.py\n",
            "F:8: 'bench' must be a dotted module name like "
            "fixes.benchmarks.draft_decode_capture_cost, got "
            "'benchmarks/run.py'",
        ),
        (
            MINIMAL + "        replacement: b\nmerged: 29 May\n",
            "F:8: 'merged' must be a date YYYY-MM-DD, got '29 May'",
        ),
        (
            MINIMAL + "        prepend: b\n        append: c\n",
            "F:6: edit sets more than one of replacement, prepend, append (got prepend, append); "
            "use one per edit",
        ),
        (MINIMAL + "        replacement: 3\n", "F:7: 'replacement' must be a string, got int 3"),
        (
            MINIMAL + "        replace: b\n",
            "F:7: unknown key 'replace' in edit; expected one of: match, replacement, prepend, "
            "append",
        ),
        (
            "pr: 903\ntitle: t\npatches:\n  - target: f\n    edits: []\n",
            "F:4: 'target' must be a dotted path module[.Class].function, got 'f'",
        ),
        (
            "pr: 903\ntitle: t\npatches:\n  - target: a.f\n    edits: []\n",
            "F:5: 'edits' must be a non-empty list of {match, replacement|prepend|append} "
            "mappings, got []",
        ),
        (
            "pr: 903\ntitle: t\npatches:\n  - target: a.f\n    edits:\n      - a\n",
            "F:6: edit must be a mapping with keys match; got str 'a'",
        ),
        (
            "pr: 903\ntitle: t\npatches:\n  - target: a.f\n    edits: [{match: x, append: y}]\n"
            "  - target: a.f\n    edits: [{match: z, append: y}]\n",
            "F:6: target a.f is already patched at line 4; put all its edits in one entry",
        ),
        ("pr: 903\ntitle: t\ntitle: u\n", "F:3: duplicate key 'title'"),
        ("- 903\n", "F:1: fix file must be a mapping with keys patches; got list [903]"),
        (
            "pr: 903\ntitle: [unclosed\npatches: []\n",
            "F:3: YAML syntax error: expected ',' or ']', but got ':'",
        ),
        (
            "pr: 0\ntitle: t\n" + ONE_EDIT,
            "F:1: 'pr' gives PR number 0, outside the supported range 1..10000000",
        ),
        (
            "pr: 10000001\n" + ONE_EDIT,
            "F:1: 'pr' gives PR number 10000001, outside the supported range 1..10000000",
        ),
        (
            "pr: 904\n" + ONE_EDIT,
            "F:1: 'pr' is 904 but the file is named 903.yaml; name a recipe file after its PR "
            "or give it another name",
        ),
        (
            "title: t\npatches:\n  - target: a.f\n    preamble: [x]\n    edits: [{match: x}]\n",
            "F:4: 'preamble' must be a string, got list ['x']",
        ),
        (
            "pr: 903\ntitle: t\npatches: !!python/object:os.system {}\n",
            "F:3: YAML value error: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object:os.system'",
        ),
    ],
)
def test_malformed_fix_files_name_the_file_line_and_choices(
    tmp_path: Path, body: str, message: str
) -> None:
    assert error_for(tmp_path, body) == message


def write_named(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_recipe_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write_named(tmp_path, "905.yaml", b"# " + b"x" * MAX_RECIPE_BYTES + b"\n")
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path])
    assert str(caught.value) == (
        f"{path}: recipe file is {MAX_RECIPE_BYTES + 3} bytes, over the limit of 1048576 bytes "
        "(1 MiB)"
    )


def test_a_recipe_that_is_not_utf8_names_the_line_and_byte(tmp_path: Path) -> None:
    path = write_named(tmp_path, "905.yaml", b"pr: 905\ntitle: caf\xe9\n" + ONE_EDIT.encode())
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path])
    assert str(caught.value) == (
        f"{path}:2: not UTF-8 text (byte 0xe9 at offset 18); recipe files must be UTF-8"
    )


@pytest.mark.parametrize("opener", ["[", "{a: ", "- "])
def test_a_deeply_nested_recipe_is_one_error_naming_the_file(tmp_path: Path, opener: str) -> None:
    path = write_named(tmp_path, "905.yaml", (opener * 20_000).encode())
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path])
    assert str(caught.value) == (
        f"{path}: nested too deeply for the YAML loader (RecursionError); a recipe is a mapping "
        "of at most a few levels"
    )


@pytest.mark.parametrize("name", ["0.yaml", "10000001.yaml"])
def test_a_file_name_pr_outside_the_range_is_refused(tmp_path: Path, name: str) -> None:
    path = write_named(tmp_path, name, ONE_EDIT.encode())
    with pytest.raises(RegistryError) as caught:
        load_recipe(path)
    number = int(Path(name).stem)
    assert str(caught.value) == (
        f"{path}:1: file name {name} gives PR number {number}, outside the supported range "
        "1..10000000"
    )


def test_a_file_without_pr_and_without_a_number_for_a_name_is_refused(tmp_path: Path) -> None:
    path = write_named(tmp_path, "kv_width.yaml", ONE_EDIT.encode())
    with pytest.raises(RegistryError) as caught:
        load_recipe(path)
    assert str(caught.value) == (
        f"{path}:1: fix file has no 'pr' key and its name is not <PR>.yaml; add `pr: <number>` "
        "or name the file after the PR number"
    )


def test_verified_on_lists_the_versions_a_recipe_was_checked_against(tmp_path: Path) -> None:
    text = """\
        verified_on: ["0.5.22", "0.5.23"]
        patches:
          - target: app.f
            edits: [{match: a = 1, replacement: a = 2}]
        """
    fix = load_recipe(write_fix(tmp_path / "sglang", 21649, text))
    assert fix.verified_on == ("0.5.22", "0.5.23")
    bad = write_fix(tmp_path / "other", 21649, text.replace('["0.5.22", "0.5.23"]', "0.5.23"))
    with pytest.raises(RegistryError, match=r"21649.yaml:1: 'verified_on' must be a list of"):
        load_recipe(bad)


def test_applies_to_names_the_distribution_and_versions_a_recipe_is_for(tmp_path: Path) -> None:
    text = """\
        applies_to: sglang>=0.5.12,<0.5.14
        verified_on: ["0.5.12", "0.5.13.post1"]
        patches:
          - target: app.f
            edits: [{match: a = 1, replacement: a = 2}]
        """
    fix = load_recipe(write_fix(tmp_path / "sglang", 24856, text))
    assert fix.applies_to is not None
    assert (fix.applies_to.distribution, fix.applies_to.text) == (
        "sglang",
        "sglang>=0.5.12,<0.5.14",
    )
    assert load_recipe(write_fix(tmp_path / "plain", 24856, ONE_EDIT)).applies_to is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "[sglang]",
            "F:1: 'applies_to' must be a string like 'sglang>=0.5.11,<0.5.15', got ['sglang']",
        ),
        (
            "'>=0.5.12'",
            "F:1: 'applies_to' '>=0.5.12' is not a distribution name followed by version "
            "specifiers, like 'sglang>=0.5.11,<0.5.15'",
        ),
        (
            "sglang",
            "F:1: 'applies_to' 'sglang' names no versions; give specifiers, like "
            "'sglang>=0.5.11,<0.5.15'",
        ),
        (
            "sglang>=0.5.14",
            "F:2: 'verified_on' lists 0.5.12, 0.5.13, outside applies_to sglang>=0.5.14; a "
            "recipe is verified only on versions it covers",
        ),
    ],
)
def test_a_malformed_applies_to_names_the_file_line_and_what_is_expected(
    tmp_path: Path, value: str, message: str
) -> None:
    text = f'applies_to: {value}\nverified_on: ["0.5.12", "0.5.13"]\n{ONE_EDIT}'
    path = write_fix(tmp_path / "sglang", 24856, text)
    with pytest.raises(RegistryError) as caught:
        load_recipe(path)
    assert str(caught.value) == message.replace("F:", f"{path}:")


GUARDED = MINIMAL + "        replacement: b\n"


def test_guards_and_added_modules_load_as_given(tmp_path: Path) -> None:
    body = (
        GUARDED + "guards:\n  - test/unit/test_x.py::TestX::test_y\n  - test/unit/test_z.py\n"
        "added_modules: [app.new_helpers, app.kernels]\n"
    )
    fix = load_recipe(write_fix(tmp_path, 903, body))
    assert fix.guards == ("test/unit/test_x.py::TestX::test_y", "test/unit/test_z.py")
    assert fix.added_modules == ("app.new_helpers", "app.kernels")


def test_a_recipe_without_guards_has_none(tmp_path: Path) -> None:
    fix = load_recipe(write_fix(tmp_path, 903, GUARDED))
    assert (fix.guards, fix.added_modules) == ((), ())


def test_a_recipe_adding_modules_only_needs_no_patches(tmp_path: Path) -> None:
    fix = load_recipe(write_fix(tmp_path, 903, "pr: 903\ntitle: t\nadded_modules: [app.new]\n"))
    assert (fix.patches, fix.added_modules) == ((), ("app.new",))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "[app/new.py]",
            "F:8: 'added_modules' must be a list of dotted module names like "
            "['sglang.srt.new_helpers'], got ['app/new.py']",
        ),
        ("[app.new, app.new]", "F:8: 'added_modules' lists 'app.new' twice"),
    ],
)
def test_a_malformed_added_modules_list_names_the_line_and_the_form_expected(
    tmp_path: Path, value: str, message: str
) -> None:
    assert error_for(tmp_path, GUARDED + f"added_modules: {value}\n") == message
