"""Tests for prtoggle.registry: schema, sglang compatibility, file:line diagnostics, dirs."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from revert_fixtures import clean_toggle_state, write_fix  # noqa: F401

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.registry import (
    MAX_RECIPE_BYTES,
    Edit,
    Patch,
    default_registry,
    load_fix,
    load_registry,
    shipped_collection_dirs,
    shipped_yaml_dir,
)

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
    fix = load_fix(path)
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
    fix = load_fix(path)
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
    assert [(e.kind, e.text) for e in load_fix(path).patches[0].edits] == [
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
    fix = load_fix(path)
    assert (fix.pr, fix.title, fix.collection, fix.label) == (27460, "", "sglang", "sglang/27460")
    assert fix.patches[0].preamble == "import math\n"
    assert [(e.kind, e.text) for e in fix.patches[0].edits] == [("replacement", "")]


@pytest.mark.parametrize("kind", ["prepend", "append"])
def test_an_edit_whose_only_kind_is_empty_deletes_the_matched_lines(
    tmp_path: Path, kind: str
) -> None:
    body = f"patches:\n  - target: app.f\n    edits:\n      - match: a = 1\n        {kind}: ''\n"
    edit = load_fix(write_fix(tmp_path, 902, body)).patches[0].edits[0]
    assert (edit.kind, edit.text) == ("replacement", "")


def test_recipe_module_key_examples_name_real_modules() -> None:
    import importlib.util

    from prtoggle.recipe import _MODULE_KEY_EXAMPLES

    for key, module in _MODULE_KEY_EXAMPLES.items():
        assert importlib.util.find_spec(module) is not None, (key, module)


def error_for(tmp_path: Path, body: str) -> str:
    path = write_fix(tmp_path, 903, body)
    with pytest.raises(RegistryError) as caught:
        load_fix(path)
    return str(caught.value).replace(str(path), "F")


ONE_EDIT = "patches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n"
MINIMAL = "pr: 903\ntitle: t\npatches:\n  - target: app.f\n    edits:\n      - match: a\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            MINIMAL + "        replacement: b\nowner: me\n",
            "F:8: unknown key 'owner' in fix file; expected one of: patches, pr, title, url, "
            "merged, component, symptom, expect, repro, bench",
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
            "F:3: YAML syntax error: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object:os.system'",
        ),
    ],
)
def test_malformed_fix_files_name_the_file_line_and_choices(
    tmp_path: Path, body: str, message: str
) -> None:
    assert error_for(tmp_path, body) == message


def test_duplicate_pr_within_one_collection_names_both_files(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "a", 904, "pr: 904\ntitle: t\n" + ONE_EDIT)
    second = tmp_path / "a" / "other.yaml"
    second.write_text("# copy\n" + first.read_text())
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path / "a"])
    assert str(caught.value) == (
        f"duplicate PR 904 in collection 'a': defined in {first}:1 and in {second}:2"
    )


def test_the_same_pr_in_two_collections_is_two_fixes(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "engine", 904, "pr: 904\ntitle: engine's\n" + ONE_EDIT)
    second = write_fix(tmp_path / "sglang", 904, ONE_EDIT)
    write_fix(tmp_path / "sglang", 905, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    assert registry.collections() == ("engine", "sglang")
    assert registry.prs() == (904, 905)
    assert [(fix.label, fix.path) for fix in registry.find(904)] == [
        ("engine/904", first),
        ("sglang/904", second),
    ]
    assert registry.get(904, collection="sglang").path == second
    assert registry.get(905).collection == "sglang"
    assert [fix.label for fix in registry.in_collection("engine").fixes] == ["engine/904"]


def test_get_of_a_pr_in_several_collections_asks_for_one_and_lists_them(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "engine", 904, ONE_EDIT)
    second = write_fix(tmp_path / "sglang", 904, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    with pytest.raises(UnknownPRError) as caught:
        registry.get(904)
    assert str(caught.value) == (
        f"PR 904 is in 2 collections: engine ({first}), sglang ({second}); choose one with "
        "--collection engine or --collection sglang"
    )


def test_lookup_in_a_collection_names_where_the_pr_is_instead(tmp_path: Path) -> None:
    write_fix(tmp_path / "engine", 904, ONE_EDIT)
    write_fix(tmp_path / "sglang", 905, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    with pytest.raises(UnknownPRError) as caught:
        registry.find(904, collection="sglang")
    assert str(caught.value) == (
        "PR 904 is not in collection 'sglang'; its PRs: 905; PR 904 is in: engine"
    )
    with pytest.raises(UnknownPRError) as caught:
        registry.in_collection("vllm")
    assert str(caught.value) == (
        f"no recipe collection named 'vllm'; collections: engine ({tmp_path / 'engine'}), "
        f"sglang ({tmp_path / 'sglang'})"
    )


def test_two_collections_with_one_name_is_an_error_naming_both_dirs(tmp_path: Path) -> None:
    (tmp_path / "one" / "recipes").mkdir(parents=True)
    (tmp_path / "two" / "recipes").mkdir(parents=True)
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path / "one" / "recipes", tmp_path / "two" / "recipes"])
    assert str(caught.value) == (
        f"two recipe collections are named 'recipes': {tmp_path / 'one' / 'recipes'} and "
        f"{tmp_path / 'two' / 'recipes'}; a collection is named after its directory, rename one"
    )


def test_an_empty_collection_is_valid(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("nothing yet\n")
    registry = load_registry(dirs=[tmp_path / "empty"])
    assert (registry.collections(), registry.fixes, registry.prs()) == (("empty",), (), ())


def test_shipped_collections_are_the_subdirectories_of_yaml() -> None:
    assert [d.name for d in shipped_collection_dirs()] == ["fixes", "sglang"]
    registry = load_registry(dirs=shipped_collection_dirs())
    demo = registry.in_collection("fixes")
    assert demo.prs() == (21649, 22832, 24856, 26521, 27460)
    assert all(fix.path.parent == shipped_yaml_dir() / "fixes" for fix in demo.fixes)


def test_registry_lookup_of_an_unknown_pr_lists_registered_ones(tmp_path: Path) -> None:
    for pr in (906, 905):
        write_fix(
            tmp_path,
            pr,
            f"pr: {pr}\ntitle: t\npatches: [{{target: a.f, "
            "edits: [{match: x, replacement: y}]}]\n",
        )
    registry = load_registry(dirs=[tmp_path])
    assert registry.prs() == (905, 906)
    with pytest.raises(UnknownPRError) as caught:
        registry.get(7)
    assert str(caught.value) == (
        f"PR 7 is not registered; registered PRs: 905, 906 (registry directories: {tmp_path})"
    )


def test_fixes_sort_by_merge_date_with_undated_last(tmp_path: Path) -> None:
    for pr, merged in ((907, "2026-03-01"), (908, None), (909, "2025-12-31")):
        date = f"merged: {merged}\n" if merged else ""
        write_fix(
            tmp_path,
            pr,
            f"pr: {pr}\ntitle: t\n{date}patches: [{{target: a.f, "
            "edits: [{match: x, replacement: y}]}]\n",
        )
    assert [fix.pr for fix in load_registry(dirs=[tmp_path]).by_merge_date()] == [909, 907, 908]


def test_yaml_path_env_adds_directories_after_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fix(
        tmp_path / "extra",
        910,
        "pr: 910\ntitle: t\npatches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n",
    )
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", f"{tmp_path / 'extra'}{os.pathsep}")
    registry = default_registry()
    assert registry.dirs == (*shipped_collection_dirs(), tmp_path / "extra")
    assert registry.get(910).path == tmp_path / "extra" / "910.yaml"
    assert registry.get(910).collection == "extra"


def test_missing_yaml_path_directory_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "absent"))
    with pytest.raises(RegistryError) as caught:
        default_registry()
    assert str(caught.value) == (
        f"registry directory {tmp_path / 'absent'} does not exist or is not a directory "
        f"(registry directories: {shipped_yaml_dir() / 'fixes'}, {shipped_yaml_dir() / 'sglang'}, "
        f"{tmp_path / 'absent'}; extra ones "
        "come from PRTOGGLE_YAML_PATH)"
    )


def test_shipped_yaml_dir_is_the_repository_yaml_directory_in_a_checkout() -> None:
    assert shipped_yaml_dir() == Path(__file__).resolve().parents[2] / "yaml"


def test_unreadable_fix_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "905.yaml").mkdir()
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path])
    assert str(caught.value) == (
        f"{tmp_path / '905.yaml'}: cannot read fix file: [Errno 21] Is a directory: "
        f"'{tmp_path / '905.yaml'}'"
    )


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
        load_fix(path)
    number = int(Path(name).stem)
    assert str(caught.value) == (
        f"{path}:1: file name {name} gives PR number {number}, outside the supported range "
        "1..10000000"
    )


def test_a_file_without_pr_and_without_a_number_for_a_name_is_refused(tmp_path: Path) -> None:
    path = write_named(tmp_path, "kv_width.yaml", ONE_EDIT.encode())
    with pytest.raises(RegistryError) as caught:
        load_fix(path)
    assert str(caught.value) == (
        f"{path}:1: fix file has no 'pr' key and its name is not <PR>.yaml; add `pr: <number>` "
        "or name the file after the PR number"
    )
