"""`prtoggle new` on two real sglang fixes (tests/.../realfixes): a byte-order mark, names
changed under a module-level `if`, a test file outside the source root."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml
from click.testing import CliRunner

from prtoggle.cli.main import cli
from prtoggle.patching.editor import edit_text
from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import load_recipe

DATA = Path(__file__).parent / "realfixes"
QWEN = "sglang/srt/models/qwen2_classification.py"
QWEN_TARGET = "sglang.srt.models.qwen2_classification.Qwen2ForSequenceClassification.load_weights"
DEEP_GEMM = "sglang.srt.layers.deep_gemm_wrapper.entrypoint"


def copy_side(number: str, side: str, to: Path) -> Path:
    """The commit's `side` (pre or post) as a source root, with sglang's `__init__.py`:
    `*.py.txt` copied to `*.py`."""
    for base in (DATA / "common", DATA / number / side):
        for text in base.rglob("*.py.txt"):
            target = to / text.relative_to(base).with_suffix("")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(text, target)
    return to


def run_new(*args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["new", *args, "--json"], prog_name="prtoggle")
    return result.exit_code, json.loads(result.stdout)


def test_a_module_starting_with_a_byte_order_mark_is_drafted_whole_from_its_diff(
    tmp_path: Path,
) -> None:
    post = copy_side("011", "post", tmp_path / "post")
    pre = copy_side("011", "pre", tmp_path / "pre")
    assert (post / QWEN).read_bytes().startswith(b"\xef\xbb\xbf")
    code, record = run_new(
        *("--from-diff", str(DATA / "011" / "fix.patch"), "--source-root", str(post)),
        *("--out", str(tmp_path / "out")),
    )
    assert code == 0
    assert (record["pr"], record["targets"]) == (31988, [QWEN_TARGET])
    assert (record["names"], record["not_reverted"], record["skipped"]) == ([], [], [])
    recipe = load_recipe(tmp_path / "out" / "31988.yaml")
    assert [check.status for check in check_recipe(recipe, tree=open_source_tree(post))] == ["ok"]
    reverted = edit_text(
        source=find_in_source_tree(QWEN_TARGET, source_root=post).text,
        edits=recipe.patches[0].edits,
    )
    assert reverted == find_in_source_tree(QWEN_TARGET, source_root=pre).text


def test_from_git_on_a_byte_order_mark_module_names_the_right_function_and_checks(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    copy_side("011", "pre", repo / "python")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "before"], check=True)
    copy_side("011", "post", repo / "python")
    message = "Fix reward models broken by load_weights v2 (#28671) (#31988)"
    subprocess.run([*git, "commit", "-qam", message], check=True)
    code, record = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path))
    assert code == 0
    assert (record["pr"], record["targets"], record["skipped"]) == (31988, [QWEN_TARGET], [])
    text = (tmp_path / "31988.yaml").read_text()
    title = "title: Fix reward models broken by load_weights v2 (#28671)\n"
    assert text.startswith(f"pr: 31988\n{title}")
    recipe = load_recipe(tmp_path / "31988.yaml")
    tree = open_source_tree(repo / "python")
    assert [check.status for check in check_recipe(recipe, tree=tree)] == ["ok"]


def test_names_changed_under_a_module_level_if_are_drafted_and_the_test_file_a_guard(
    tmp_path: Path,
) -> None:
    post = copy_side("032", "post", tmp_path / "post")
    code, record = run_new(
        *("--from-diff", str(DATA / "032" / "fix.patch"), "--source-root", str(post)),
        *("--out", str(tmp_path / "out")),
    )
    assert code == 0
    assert record["names"] == [
        {
            "scope": DEEP_GEMM,
            "define": "from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor"
            "  # noqa: F401\n",
            "remove": ["_get_mn_major_tma_aligned_tensor"],
        }
    ]
    assert (record["targets"], record["not_reverted"]) == ([], [])
    test_file = "test/registered/kernels/ops/quantization/test_per_token_group_quant.py"
    assert (record["skipped"], record["guards"]) == ([], [test_file])  # not in post/: the file
    document = yaml.safe_load((tmp_path / "out" / "32188.yaml").read_text())
    assert list(document) == ["pr", "title", "merged", "names", "guards"]
