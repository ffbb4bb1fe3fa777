"""Every shell example of README.md, docs/*.md and each command's --help runs as written.

Examples run with bash in a scratch copy of the checkout (so files they write stay there),
where `app.py` and `eval.py`, the placeholders of the --help examples, are copies of
examples/app.py and examples/eval.py. An example that cannot run here is listed in SKIPPED
with the reason; the list must match the examples exactly, so none drops out silently.

Where a page shows a ```bash block followed directly by a plain ``` block, the second is
the output it promises: the block's commands run in order and every promised line must be
printed (stdout or stderr) by one of them; `...` in a promised line stands for any text.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from prtoggle.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 600

_NEEDS_RECORDED_GUARDS = (
    "each uses what the one before it made (the repository, then the recipe); the same flow "
    "runs in order in tests/prtoggle/revert/test_added_modules.py"
)

SKIPPED = {
    "pip install torch==2.13.0 && pip install -e '.[detect]' && prtoggle repro --all": (
        "installs packages; its last step runs below"
    ),
    "pip install torch==2.13.0 && pip install -e '.[test]' && pip install --no-deps -r "
    "tests/sglang/requirements.txt && python -m pytest -n 2": "the CI script runs it (.ci/run)",
    "prtoggle repro 24856 --device cuda --provider triton --json": "needs a CUDA GPU",
    "prtoggle bench 24856 27460 --device cuda --provider triton --json": "needs a CUDA GPU",
    "prtoggle bisect --mode ordered --timeout 600 --json -- ./run_eval.sh": (
        "./run_eval.sh stands for the user's own evaluation script"
    ),
    "prtoggle check --source-root ../sglang/python --json": "needs an sglang source checkout",
    "prtoggle check --collection sglang --source-root "
    "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl": "needs the downloaded sglang wheel",
    "prtoggle check --collection sglang --source-root sglang-0.5.14-*.whl "
    "--source-root sglang-0.5.23-*.whl": "needs the downloaded sglang wheels",
    "PRTOGGLE_YAML_PATH=$PWD/sglang_recipes prtoggle coverage --require-guard "
    "--collection sglang_recipes -- python -m pytest -q <regression tests>": (
        "placeholders for sglang's recipe directory and regression tests"
    ),
    "prtoggle coverage -r 26521,24856 --jobs 4 --json -- pytest tests": (
        "runs the whole suite three times: too slow for the CPU suite"
    ),
    "prtoggle bisect -- pytest -q tests/regression/test_pr26521_draft_decode_capture.py": (
        "one pytest run per registered recipe as plain children: too slow for the CPU suite"
    ),
    "prtoggle coverage -- python -m pytest -q tests/regression": (
        "eleven runs of tests/regression: too slow for the CPU suite (.ci/run runs the gate)"
    ),
    "prtoggle coverage --require-guard -- python -m pytest -q tests/regression": (
        "eleven runs of tests/regression: too slow for the CPU suite (.ci/run runs the gate)"
    ),
    "prtoggle coverage --html coverage.html -- pytest -q tests/regression": (
        "eleven runs of tests/regression: too slow for the CPU suite (.ci/run runs the gate)"
    ),
    "prtoggle run -r 26521,24856 -- pytest -q tests/": (
        "the whole suite: too slow for the CPU suite"
    ),
    "prtoggle import-sglang --from sglang/python/sglang/srt/debug_utils/pr_fix_toggle.py "
    "--out up": "needs an sglang source checkout",
    "git -C ../sglang show 1a2b3c | prtoggle new --from-diff - --out yaml/mine": (
        "needs an sglang git checkout (tests/prtoggle/recipes drafts from real release diffs)"
    ),
    "prtoggle new --from-git 1a2b3c --repo ../sglang --out yaml/mine --json": (
        "needs an sglang git checkout (tests cover --from-git on a scratch repository)"
    ),
    "prtoggle rebase 27338 --collection sglang --source-root sglang-0.5.23.whl": (
        "needs the downloaded sglang wheel (tests/sglang rebases on it)"
    ),
    "git diff v0.5.22 v0.5.23 -- python/ > fix.diff": "needs an sglang git checkout",
    "prtoggle new --from-diff fix.diff --pr 27338 --source-root sglang-0.5.23.whl": (
        "needs the diff and the wheel of the example before it"
    ),
    "prtoggle check --collection sglang --source-root "
    "wheels/sglang-0.5.22-cp311-cp311-manylinux_2_34_x86_64.whl --source-root "
    "wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl": (
        "needs the wheels the `pip download` example fetches (CI checks the matrix)"
    ),
    "prtoggle bench --all": "twenty sample pairs of every benchmark: too slow for the CPU suite",
    "prtoggle bisect --git v0.5.16..v0.5.17 --repo ~/sglang -- python -m pytest -q t.py": (
        "needs sglang's history and a test of it; "
        "tests/prtoggle/commands/test_bisect_history.py runs bisect --git on a real repository"
    ),
    "prtoggle bisect --git v0.5.22..v0.5.23 --repo ~/sglang --repeat 3 -- "
    "python -m pytest -q test/registered/unit/test_x.py": (
        "needs sglang's history and a test of it; "
        "tests/prtoggle/commands/test_bisect_history.py runs bisect --git on a real repository"
    ),
    # README's "Reproduce a real fix's failure": runnable once `new --from-git` records the
    # fix's tests as `guards` (issue 33 item 1, another branch); until then `repro` says the
    # recipe has no guards. tests/prtoggle/revert/test_added_modules.py runs the same flow.
    "python examples/fix_repo.py widthlib": _NEEDS_RECORDED_GUARDS,
    "prtoggle new --from-git HEAD --repo widthlib --source-root widthlib/src "
    "--out widthlib/recipes": _NEEDS_RECORDED_GUARDS,
    "PRTOGGLE_YAML_PATH=$PWD/widthlib/recipes prtoggle repro 90301 --tests widthlib "
    "--source-root widthlib/src": _NEEDS_RECORDED_GUARDS,
    "cd widthlib && PRTOGGLE_YAML_PATH=$PWD/recipes PYTHONPATH=src prtoggle coverage -r 90301": (
        _NEEDS_RECORDED_GUARDS
    ),
    "prtoggle repro 27338 --tests ../sglang --json": "needs an sglang checkout with 27338's tests",
    "prtoggle coverage -r 27338": "needs a recipe of 27338 that records guards, and its tests",
}
"""Examples that are not run, and why."""

EXIT_STATUS = {
    "SGLANG_DEBUG_REVERT_PR=27460 python -m fixes.scenarios.mla_draft_kv_indices_width "
    "--auto-detect": 1,
    # sglang 0.5.23's own 27338 and 27460 no longer match its code (docs/sglang.md)
    "PRTOGGLE_YAML_PATH=~/recipes/sglang-upstream prtoggle check --collection sglang-upstream": 1,
    "prtoggle run -r 24856 -- python examples/app.py": 1,
    "prtoggle run --whole-only -r 24856 -- python examples/app.py": 1,
    "prtoggle run -r 26521 -- python app.py": 1,
    "SGLANG_SPEC_OOB_DETECTION=1 prtoggle run -r 24856 -- "
    "python -m fixes.scenarios.trtllm_draft_extend_routing": 1,
    "SGLANG_DEBUG_REVERT_PR=24856 python -m fixes.scenarios.trtllm_draft_extend_routing": 1,
    'SGLANG_DEBUG_REVERT_PR="24856,21649" python -m fixes.scenarios.trtllm_draft_extend_routing': 1,
    "SGLANG_SPEC_NAN_DETECTION=1 SGLANG_DEBUG_REVERT_PR=26521 "
    "python -m fixes.scenarios.trtllm_draft_decode_capture": 1,
    "python -m pytest -q --revert-pr 24856 "
    "tests/regression/test_pr24856_draft_extend_routing.py": 1,
    "prtoggle run -r all -- python -m fixes.scenarios.trtllm_draft_decode_capture": 1,
}
"""Examples whose answer is no (1) or an error (2); every other example exits 0."""

PREREQUISITES = {
    "PRTOGGLE_YAML_PATH=recipes/sglang-upstream prtoggle list --collection sglang-upstream": (
        "prtoggle import-sglang --out recipes/sglang-upstream"
    ),
    "PRTOGGLE_YAML_PATH=~/recipes/sglang-upstream prtoggle check --collection sglang-upstream": (
        "prtoggle import-sglang --out ~/recipes/sglang-upstream"
    ),
}
"""Examples that use what an earlier example made: that one runs first, in the same test."""


def shell_commands(lines: list[str]) -> list[str]:
    """Commands of shell lines: continuation lines joined, comments and blanks dropped."""
    commands: list[str] = []
    pending = ""
    for raw in lines:
        line = re.sub(r"\s{2,}#.*$", "", raw).strip()
        if not line or line.startswith("#"):
            if pending:
                commands.append(pending)
                pending = ""
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        commands.append(pending + line)
        pending = ""
    return commands


def markdown_examples(text: str) -> list[str]:
    """The commands of every ```bash block: continuation lines joined, comments dropped."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        commands.extend(shell_commands(block.splitlines()))
    return commands


def promised_outputs(text: str) -> list[tuple[list[str], list[str]]]:
    """(commands, promised lines) of each ```bash block followed directly by a ``` block."""
    pairs = []
    blocks = list(re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE))
    for shown, shows in itertools.pairwise(blocks):
        adjacent = not text[shown.end() : shows.start()].strip()
        if adjacent and (shown.group(1), shows.group(1)) == ("bash", ""):
            promised = [line.strip() for line in shows.group(2).splitlines() if line.strip()]
            pairs.append((shell_commands(shown.group(2).splitlines()), promised))
    return pairs


def printed(promised: str, output: str) -> bool:
    """Whether a line of `output` holds `promised`, `...` standing for any text."""
    parts = [re.escape(part.strip()) for part in promised.split("...")]
    pattern = re.compile(".*".join(part for part in parts if part))
    return any(pattern.search(line) for line in output.splitlines())


def help_examples(help_text: str) -> list[str]:
    """The commands listed under `Examples:` in a --help text."""
    if "Examples:" not in help_text:
        return []
    return shell_commands(help_text.split("Examples:", 1)[1].splitlines())


def all_examples() -> list[str]:
    examples = [cmd for page in PAGES for cmd in markdown_examples(page.read_text())]
    runner = CliRunner()
    for args in [[], *([name] for name in cli.list_commands(click.Context(cli)))]:
        examples.extend(help_examples(runner.invoke(cli, [*args, "--help"]).output))
    return list(dict.fromkeys(examples))


EXAMPLES = all_examples()
PROMISES = [pair for page in PAGES for pair in promised_outputs(page.read_text())]


def test_every_listed_example_is_still_an_example() -> None:
    assert sorted(set(SKIPPED) - set(EXAMPLES)) == []
    assert sorted(set(EXIT_STATUS) - set(EXAMPLES)) == []
    assert sorted((set(PREREQUISITES) | set(PREREQUISITES.values())) - set(EXAMPLES)) == []


def test_every_relative_link_of_readme_and_docs_points_at_a_file_and_heading() -> None:
    broken = []
    for page in PAGES:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for link in re.findall(r"\]\(([^)]+)\)", prose):
            path, _, anchor = link.partition("#")
            target = page.parent / path if path else page
            if link.startswith("http"):
                continue
            if not target.exists() or (anchor and anchor not in heading_anchors(target)):
                broken.append(f"{page.name}: {link}")
    assert broken == []


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the checkout with app.py and eval.py at its top."""
    root = tmp_path_factory.mktemp("checkout")
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
    for name in ("prtoggle", "fixes", "yaml", "tests", "examples", "docs"):
        shutil.copytree(ROOT / name, root / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", root)
    for name in ("app.py", "eval.py"):
        shutil.copy(ROOT / "examples" / name, root / name)
    yield root


@pytest.mark.parametrize("command", [c for c in EXAMPLES if c not in SKIPPED])
def test_example_runs(command: str, scratch: Path) -> None:
    env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch)}
    stubs = scratch / "tests" / "sglang" / "stubs"
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), str(stubs)])
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    if command in PREREQUISITES:
        first = _run(PREREQUISITES[command], cwd=scratch, env=env)
        assert first.returncode == 0, first.stdout + first.stderr
    result = _run(command, cwd=scratch, env=env)
    assert result.returncode == EXIT_STATUS.get(command, 0), result.stdout + result.stderr


def test_pages_promise_output_for_some_examples() -> None:
    assert len(PROMISES) >= 3  # README's app.py, cli.md's run, reverting.md's variables
    for commands, promised in PROMISES:
        assert commands and promised
        assert not set(commands) & set(SKIPPED), "a promise must be checked"


@pytest.mark.parametrize(
    ("commands", "promised"), PROMISES, ids=[" && ".join(c)[:80] for c, _ in PROMISES]
)
def test_every_promised_output_line_is_printed(
    commands: list[str], promised: list[str], scratch: Path
) -> None:
    env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch)}
    stubs = scratch / "tests" / "sglang" / "stubs"
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), str(stubs)])
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    output = ""
    for command in commands:
        result = _run(command, cwd=scratch, env=env)
        output += result.stdout + result.stderr
    assert [line for line in promised if not printed(line, output)] == [], output[-4000:]


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, - for space."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _run(command: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
