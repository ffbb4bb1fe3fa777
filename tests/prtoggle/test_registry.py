"""Tests for prtoggle.registry: schema, sglang compatibility, file:line diagnostics, dirs."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from revert_fixtures import clean_toggle_state, write_fix  # noqa: F401

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.registry import (
    Edit,
    Patch,
    default_registry,
    load_fix,
    load_registry,
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


def error_for(tmp_path: Path, body: str) -> str:
    path = write_fix(tmp_path, 903, body)
    with pytest.raises(RegistryError) as caught:
        load_fix(path)
    return str(caught.value).replace(str(path), "F")


MINIMAL = "pr: 903\ntitle: t\npatches:\n  - target: app.f\n    edits:\n      - match: a\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            MINIMAL + "        replacement: b\nowner: me\n",
            "F:8: unknown key 'owner' in fix file; expected one of: pr, title, patches, url, "
            "merged, component, symptom, expect, repro, bench",
        ),
        (
            "pr: 903\npatches: []\n",
            "F:1: fix file is missing required key 'title'; required keys: pr, title, patches",
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
            "F:8: 'repro' must be a dotted module name like fixes.scenarios.pr26521, got "
            "'scenarios/run.py'",
        ),
        (
            MINIMAL + "        replacement: b\nbench: benchmarks/run.py\n",
            "F:8: 'bench' must be a dotted module name like fixes.benchmarks.pr26521, got "
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
        ("- 903\n", "F:1: fix file must be a mapping with keys pr, title, patches; got list [903]"),
        (
            "pr: 903\ntitle: [unclosed\npatches: []\n",
            "F:3: YAML syntax error: expected ',' or ']', but got ':'",
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


def test_duplicate_pr_names_both_files(tmp_path: Path) -> None:
    first = write_fix(
        tmp_path / "a",
        904,
        "pr: 904\ntitle: t\npatches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n",
    )
    second = tmp_path / "b" / "other.yaml"
    second.parent.mkdir()
    second.write_text("# copy\n" + first.read_text())
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path / "a", tmp_path / "b"])
    assert str(caught.value) == f"duplicate PR 904: defined in {first}:1 and in {second}:2"


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
    assert registry.dirs == (shipped_yaml_dir(), tmp_path / "extra")
    assert registry.get(910).path == tmp_path / "extra" / "910.yaml"


def test_missing_yaml_path_directory_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "absent"))
    with pytest.raises(RegistryError) as caught:
        default_registry()
    assert str(caught.value) == (
        f"registry directory {tmp_path / 'absent'} does not exist or is not a directory "
        f"(registry directories: {shipped_yaml_dir()}, {tmp_path / 'absent'}; extra ones "
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
