"""A git range read as revert candidates, and history recipes drafted once and cached."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from prtoggle.errors import CommandUsageError
from prtoggle.recipes.authoring.history import (
    HistoryRecipe,
    commit_recipe,
    drafting_stamp,
    is_test_path,
    read_range,
    stayed_commits,
    suffix_recipe,
)
from prtoggle.recipes.authoring.stopping import DraftStopped, stoppable
from tests.prtoggle.history_fakes import HistoryRepo, history_repo

FIX = "fix: absval of negatives (#200)"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> HistoryRepo:
    return history_repo(tmp_path_factory.mktemp("history") / "repo")


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("test/registered/unit/test_x.py", True),
        ("python/sglang/test/runner.py", True),
        ("pkg/tests/helpers.py", True),
        ("pkg/conftest.py", True),
        ("pkg/io_test.py", True),
        ("pkg/testing_utils.py", False),
        ("pkg/attestation.py", False),
        ("sglang/srt/managers/scheduler.py", False),
    ],
)
def test_test_files_are_told_by_folder_and_name(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def test_candidates_are_the_commits_changing_the_packages_python_source(repo: HistoryRepo) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    assert len(history.commits) == 19
    assert [c.subject for c in history.commits if not c.candidate] == [
        "docs: readme (#400)",
        "test: comment (#401)",
    ]
    assert [c.reason_not_candidate for c in history.commits if not c.candidate] == [
        "docs-only",
        "test-only",
    ]
    fix = next(c for c in history.commits if c.subject == FIX)
    assert (fix.pr, fix.files, fix.sha) == (200, ("calc/core.py",), repo.shas[FIX])
    assert fix.describe().startswith(f"{fix.sha[:12]} (#200) fix: absval of negatives, ")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("HEAD", "--git 'HEAD': expected a range A..B"),
        ("a...b", "--git 'a...b': expected a range A..B"),
        ("nope..HEAD", "--git 'nope..HEAD': 'nope' is not a commit of "),
        ("HEAD..HEAD~3", "--git 'HEAD..HEAD~3': HEAD is not an ancestor of HEAD~3 in "),
    ],
)
def test_a_range_that_is_not_a_to_b_of_the_repository_is_a_usage_error(
    repo: HistoryRepo, spec: str, message: str
) -> None:
    with pytest.raises(CommandUsageError) as raised:
        read_range(repo.root, spec, source_dir="python")
    assert str(raised.value).startswith(message)


def test_a_suffix_recipe_reverts_to_the_code_before_its_oldest_commit_and_is_cached(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    fix = next(c for c in history.commits if c.subject == FIX)
    made = suffix_recipe(history, fix, cache=tmp_path)
    assert (made.whole, made.cached, made.spec.endswith(":200")) == (True, False, True)
    text = next(made.directory.glob("*.yaml")).read_text()
    assert "target: calc.core.absval" in text and "target: calc.core.triple" in text
    again = suffix_recipe(history, fix, cache=tmp_path)
    assert (again.cached, again.spec, again.directory) == (True, made.spec, made.directory)
    assert made.directory.parent.parent.name == drafting_stamp()


def test_a_corrupt_cache_record_is_drafted_again_never_trusted(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    fix = next(c for c in history.commits if c.subject == FIX)
    made = commit_recipe(history, fix, cache=tmp_path)
    record = made.directory.parent / "draft.json"
    record.write_text("{not json")
    again = commit_recipe(history, fix, cache=tmp_path)
    assert (again.cached, again.spec) == (False, made.spec)
    assert json.loads(record.read_text())["spec"] == made.spec


def test_a_commit_that_changes_only_what_cannot_be_reverted_has_nothing_to_revert(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit(
        "python/calc/core.py",
        "def double(x):",
        "import dataclasses\n\n\n@CONFIGS.register\n@dataclasses.dataclass\nclass Config:\n"
        "    on: bool = False\n\n\n"
        "def double(x):",
    )
    repo.commit("feat: config (#700)")
    repo.edit("python/calc/core.py", "on: bool = False", "on: bool = True")
    field = repo.commit("fix: config on (#701)")
    history = read_range(repo.root, "HEAD~1..HEAD", source_dir="python")
    made = commit_recipe(history, history.commits[0], cache=tmp_path / "c")
    assert made.spec == ""
    # registered at import: the class is not defined again, its field is listed
    assert made.nothing == "calc/core.py:13: a field of Config changed"
    assert [c.sha for c in stayed_commits(history, made, among=history.commits)] == [field]


def test_the_cache_follows_prtoggle_cache_dir_and_keeps_nothing_when_it_is_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from prtoggle.recipes.authoring.history import default_cache

    monkeypatch.setenv("PRTOGGLE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache() == tmp_path / "c" / "history"
    monkeypatch.setenv("PRTOGGLE_CACHE_DIR", "off")
    scratch = default_cache()
    assert scratch.is_dir() and scratch.name.startswith("prtoggle-history-")
    monkeypatch.delenv("PRTOGGLE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache() == tmp_path / "x" / "prtoggle" / "history"


def test_a_define_importing_a_module_a_newer_commit_deleted_is_left_out_and_the_rest_lands(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.write("python/calc/legacy.py", "OLD = 10\n")
    core = "python/calc/core.py"
    repo.edit(core, "def double(x):", "from calc.legacy import OLD\n\n\ndef double(x):")
    repo.edit(core, "def triple(x):", "def scaled(x):\n    return x * OLD\n\n\ndef triple(x):")
    repo.commit("feat: legacy scale (#700)")
    repo.edit(core, "from calc.legacy import OLD\n", "NEW = 20\n")
    repo.edit(core, "return x * OLD", "return x * NEW")
    repo.edit(core, "return x * 3  # v9", "return x * 3 + 1")
    repo.commit("fix: new scale (#701)")
    (repo.root / "python/calc/legacy.py").unlink()
    repo.commit("chore: drop legacy (#702)")
    history = read_range(repo.root, "HEAD~2..HEAD", source_dir="python")
    made = suffix_recipe(history, history.commits[0], cache=tmp_path / "c")
    assert made.not_reverted == (
        "calc/legacy.py:1: a module the fix removed (calc.legacy cannot be imported reverted)",
        "calc/core.py:7: `calc.core.OLD` not defined back: its pre-fix code imports "
        "`calc.legacy`, which the installed package does not have",
        "calc/core.py:15: the revert does not check (error: reads `OLD`, not defined in "
        "module calc.core after the revert)",
    )
    # the rest lands in a real process (before: ModuleNotFoundError, nothing landed)
    code = "from calc.core import triple; print(triple(1))"
    env = {"PRTOGGLE_YAML_PATH": str(made.directory)}
    done = repo.prtoggle(
        "run", "-r", made.spec, "--", sys.executable, "-c", code, cache=tmp_path / "c", env=env
    )
    assert (done.returncode, done.stdout) == (0, "3\n")  # 4 with the fix


def test_suffixes_sharing_a_files_two_sides_compare_that_module_once_and_draft_the_same(
    repo: HistoryRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prtoggle.recipes.authoring import from_diff

    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    fix = next(c for c in history.commits if c.subject == FIX)
    compared: list[str] = []
    real = from_diff.compare_module

    def counting(pre: str, post: str, **kwargs: object) -> object:
        compared.append(str(kwargs["module"]))
        return real(pre, post, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(from_diff, "compare_module", counting)
    from_diff.forget_comparisons()
    first = suffix_recipe(history, fix, cache=tmp_path / "one")
    assert compared == ["calc.core"]
    again = suffix_recipe(history, fix, cache=tmp_path / "two")  # drafted again, not cached
    assert (again.cached, compared) == (False, ["calc.core"])
    texts = [next(made.directory.glob("*.yaml")).read_text() for made in (first, again)]
    assert texts[0] == texts[1]


def test_the_changes_a_recipe_leaves_in_one_file_are_each_blamed_on_the_commit_that_wrote_them(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    head = repo.git("rev-parse", "HEAD").strip()
    lines = repo.git("show", "HEAD:python/calc/core.py").splitlines()
    negative = lines.index("    if x < 0:") + 1  # the fix wrote it
    triple = next(n for n, text in enumerate(lines, 1) if text.startswith("def triple"))
    left = HistoryRecipe(
        tmp_path,
        "",
        places=(("calc/core.py", triple + 1), ("calc/core.py", negative)),
        drafted_at=head,
    )
    stayed = stayed_commits(history, left, among=history.commits)
    # the last refactor wrote `return x * 3  # v9`
    assert [c.subject for c in stayed] == [
        "fix: absval of negatives (#200)",
        "refactor: triple v9 (#309)",
    ]


def test_a_draft_asked_to_stop_raises_at_its_first_stop_point_and_caches_nothing(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    fix = next(c for c in history.commits if c.subject == FIX)
    stop = threading.Event()
    stop.set()
    with stoppable(stop), pytest.raises(DraftStopped):
        suffix_recipe(history, fix, cache=tmp_path)
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("*.yaml"))
    made = suffix_recipe(history, fix, cache=tmp_path)  # not asked to stop: drafted
    assert (made.cached, made.spec != "") == (False, True)
