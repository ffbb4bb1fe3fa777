"""Deferred reverts in real child processes: import cycles, half-initialised parents, strictness."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from processes import without_in_force_lines

from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE
from prtoggle.revert import toggle

# A package shaped like sglang's: packages import each other while half-initialised.
#   cyc/__init__          imports cyc.srt.server
#   cyc/srt/server        imports cyc.srt.speculative first, defines serve() afterwards
#   cyc/srt/speculative/  re-exports Worker from .worker (Worker reached via the package)
#   .../worker            imports .utils while `speculative` is half-initialised
#   .../utils             imports cyc.srt.server back while `server` is half-initialised
CYCLIC_PACKAGE = {
    "cyc/__init__.py": "from cyc.srt import server\n",
    "cyc/srt/__init__.py": "",
    "cyc/srt/server.py": """\
        from cyc.srt.speculative import Worker


        def serve(x):
            return Worker().step(x) * 10
        """,
    "cyc/srt/speculative/__init__.py": "from cyc.srt.speculative.worker import Worker\n",
    "cyc/srt/speculative/worker.py": """\
        from cyc.srt.speculative import utils


        class Worker:
            def step(self, x):
                return utils.tail_tokens(x)
        """,
    "cyc/srt/speculative/utils.py": """\
        import cyc.srt.server


        def tail_tokens(x):
            return x + 1
        """,
    # cyc.lazy is a namespace package (no __init__.py), imported only on demand
    "cyc/lazy/leaf.py": """\
        def width(topk):
            return 8 * topk
        """,
}
RECIPES = {
    # holder module is reached only through a half-initialised package
    101: """\
        patches:
          - target: cyc.srt.speculative.utils.tail_tokens
            edits:
              - match: return x + 1
                replacement: return x + 2
        """,
    # defined after the cyclic import point of a half-initialised module
    102: """\
        patches:
          - target: cyc.srt.server.serve
            edits:
              - match: return Worker().step(x) * 10
                replacement: return Worker().step(x) * 100
        """,
    # reached through the package's re-export, bound only when the package finishes
    103: """\
        patches:
          - target: cyc.srt.speculative.Worker.step
            edits:
              - match: return utils.tail_tokens(x)
                replacement: return utils.tail_tokens(x) - 1000
        """,
    # the attribute does not exist once its module has finished importing
    104: """\
        patches:
          - target: cyc.srt.speculative.utils.head_tokens
            edits:
              - match: return x
                replacement: return -x
        """,
    # its module sits under a namespace package, whose import runs no loader code
    106: """\
        patches:
          - target: cyc.lazy.leaf.width
            edits:
              - match: return 8 * topk
                replacement: return 8
        """,
}
SHOW_STATE = """\
import prtoggle
from prtoggle.revert import toggle
from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE
for pr in {prs}:
    print(pr, prtoggle.is_reverted(pr), toggle.patched_targets(pr), toggle.pending_targets(pr))
"""


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    for name, text in CYCLIC_PACKAGE.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    recipes = tmp_path / "cyclic"
    recipes.mkdir()
    for pr, text in RECIPES.items():
        (recipes / f"{pr}.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def run_reverting(project: Path, prs: str, code: str) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project / "src"), os.environ.get("PYTHONPATH", "")]),
        "PRTOGGLE_YAML_PATH": str(project / "cyclic"),
    }
    env = toggle.child_env([], base=base)
    env["SGLANG_DEBUG_REVERT_PR"] = prs
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "entry",
    [
        "import cyc",
        "import cyc.srt.speculative.utils",
        "import cyc.srt.speculative",
        "from cyc.srt.speculative import worker",
        "import cyc.srt.server",
    ],
)
def test_reverts_land_whatever_module_of_a_cyclic_package_is_imported_first(
    project: Path, entry: str
) -> None:
    code = textwrap.dedent(f"""\
        {entry}
        from cyc.srt import server
        from cyc.srt.speculative import utils, Worker
        print(utils.tail_tokens(0), Worker().step(0), server.serve(0))
        """) + SHOW_STATE.format(prs=(101, 102, 103))
    result = run_reverting(project, "101,102,103", code)
    assert result.returncode == 0
    assert result.stderr == ""  # a reverting child is quiet (a `run` parent would say it)
    assert result.stdout.splitlines() == [
        "2 -998 -99800",
        "101 True ('cyc.srt.speculative.utils.tail_tokens',) ()",
        "102 True ('cyc.srt.server.serve',) ()",
        "103 True ('cyc.srt.speculative.Worker.step',) ()",
    ]


def test_without_reverts_the_cyclic_package_gives_the_fixed_results(project: Path) -> None:
    code = """\
        import cyc
        from cyc.srt.speculative import utils, Worker
        print(utils.tail_tokens(0), Worker().step(0), cyc.srt.server.serve(0))
        """
    result = run_reverting(project, "", code)
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 1 10\n", "")


@pytest.mark.parametrize("entry", ["import cyc\nimport cyc.lazy.leaf", "import cyc.lazy.leaf"])
def test_a_revert_under_a_namespace_package_lands(project: Path, entry: str) -> None:
    code = entry + "\nprint(cyc.lazy.leaf.width(4))\n" + SHOW_STATE.format(prs=(106,))
    result = run_reverting(project, "106", code)
    assert (result.returncode, without_in_force_lines(result.stderr)) == (0, "")
    assert result.stdout.splitlines() == ["8", "106 True ('cyc.lazy.leaf.width',) ()"]


def test_a_revert_is_in_force_before_its_module_is_imported_and_patched_after(
    project: Path,
) -> None:
    code = SHOW_STATE.format(prs=(101,)) + "import cyc\n" + SHOW_STATE.format(prs=(101,))
    result = run_reverting(project, "101", code)
    assert (result.returncode, without_in_force_lines(result.stderr)) == (0, "")
    assert result.stdout.splitlines() == [
        "101 True () ('cyc.srt.speculative.utils.tail_tokens',)",
        "101 True ('cyc.srt.speculative.utils.tail_tokens',) ()",
    ]


def test_a_deferred_revert_that_cannot_land_stops_the_child_with_one_line(
    project: Path,
) -> None:
    result = run_reverting(project, "101,104", "import cyc\nprint('ran unreverted')\n")
    assert result.returncode == BOOTSTRAP_FAILURE_EXIT_CODE
    assert result.stdout == ""
    assert without_in_force_lines(result.stderr) == (
        "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR 104 could not be reverted when "
        "cyc.srt.speculative.utils was imported, so it is not reverted at all: "
        "cyc.srt.speculative.utils.head_tokens: cyc.srt.speculative.utils has no attribute "
        "'head_tokens'; closest names: tail_tokens\n"
    )


def test_a_revert_whose_module_was_loaded_behind_the_import_system_is_reported_at_exit(
    project: Path,
) -> None:
    code = f"""\
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("lonely", {str(project / "lonely.py")!r})
        module = importlib.util.module_from_spec(spec)
        sys.modules["lonely"] = module
        spec.loader.exec_module(module)
        print(module.value())
        """
    (project / "lonely.py").write_text("def value():\n    return 1\n")
    (project / "cyclic" / "105.yaml").write_text(
        "patches:\n  - target: lonely.value\n    edits:\n"
        "      - match: return 1\n        replacement: return 2\n"
    )
    result = run_reverting(project, "105", code)
    assert (result.returncode, result.stdout) == (0, "1\n")
    assert without_in_force_lines(result.stderr) == (
        "prtoggle: PR 105 was requested but never reverted: lonely.value imported and not patched\n"
    )


def test_a_reverted_block_still_open_at_interpreter_exit_prints_nothing(project: Path) -> None:
    code = """\
        import prtoggle
        from cyc.srt.speculative import utils

        def suspended():
            with prtoggle.reverted(101):
                yield utils.tail_tokens(0)

        held = suspended()
        print(next(held), prtoggle.is_reverted(101))
        """
    result = run_reverting(project, "", code)
    assert (result.returncode, result.stdout, result.stderr) == (0, "2 True\n", "")
