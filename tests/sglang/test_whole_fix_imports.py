"""The import oracle of whole fixes on real code: sglang 0.5.22 -> 0.5.23, module by module.

`bench/whole_fix_imports.py release` drafts one recipe per module from the release diff
with `prtoggle new`, reverts it in the installed 0.5.23 with prtoggle's runtime and
compares the module with 0.5.22's file, loaded apart (functions by bytecode, values by
value, class members by name). These three modules each needed a fix to come back whole:
a patched method calling a method of an import the release removed (compiled as the
pre-fix module compiles it), a removed `from typing import Optional` (typing's object in
every other module left alone), and a radix cache whose revert was whole all along.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sglang

ROOT = Path(__file__).resolve().parents[2]
WHEELS_ENV = "PRTOGGLE_SGLANG_HISTORY_WHEELS"
MODULES = (
    "sglang/srt/mem_cache/storage/mooncake_store/mooncake_direct_linker.py",
    "sglang/srt/mem_cache/layout/token_major.py",
    "sglang/srt/mem_cache/radix_cache.py",
)


@pytest.fixture(scope="module")
def older_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sglang 0.5.22 wheel: from $PRTOGGLE_SGLANG_HISTORY_WHEELS, else pip download."""
    directory = Path(os.environ.get(WHEELS_ENV) or tmp_path_factory.mktemp("sglang-0.5.22"))
    wheels = sorted(directory.glob("sglang-0.5.22-*.whl"))
    if not wheels:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "sglang==0.5.22"]
        done = subprocess.run(
            [*command, "-d", str(directory)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        wheels = sorted(directory.glob("sglang-0.5.22-*.whl"))
        if done.returncode != 0 or not wheels:
            pytest.fail(f"could not download sglang==0.5.22: {done.stderr[-500:]}")
    return wheels[0]


def test_each_module_reverted_in_0_5_23_is_0_5_22_s_module_and_its_recipe_says_whole(
    older_wheel: Path, sglang_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "whole_fix_imports.py"),
            "release",
            "--older",
            str(older_wheel),
            "--under",
            *MODULES,
            "--json",
        ],
        env=sglang_env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["label"]: r for r in json.loads(done.stdout)}
    assert sorted(results) == sorted(MODULES)
    for label, result in results.items():
        module = label[: -len(".py")].replace("/", ".")
        assert (result["verdict"], sorted(result["modules"]), result["differs"]) == (
            "whole",
            [module],
            {},
        ), label
        # "whole", or "whole (N names differ between two loads: ...)": said, not a difference
        assert result["modules"][module].startswith("whole"), label
        assert result["claims_whole"] is True, label


IMPORT_VENV = Path(os.environ.get("SGLANG_IMPORT_VENV", "/tmp/sglang-import-venv"))


def beside(relative: str) -> Path:
    """`relative` under the nearest folder above the project holding it (a checkout may
    lie one or two levels below the shared data)."""
    found = (folder / relative for folder in ROOT.parents)
    return next((path for path in found if path.exists()), ROOT.parent / relative)


REALFIXES = beside("shared/realfixes")
MIRROR = beside(".mirror/bytedance-iaas+sglang/repo")


@pytest.mark.skipif(
    not ((IMPORT_VENV / ".base-ok").is_file() and REALFIXES.is_dir() and MIRROR.is_dir()),
    reason="needs ../shared/sglang-import-venv.sh's environment, ../shared/realfixes and "
    "sglang's history",
)
def test_realfixes_reverted_in_the_full_tree_of_their_commit_are_their_pre_fix_modules(
    tmp_path: Path,
) -> None:
    # 025: names removed from a module and from the modules that import them (refused
    # at import: `PrepareLoadBackResult` is not bound); 054: an annotated name the fix
    # added left its __annotations__ entry. Both recipes claim whole.
    trees = Path(os.environ.get("PRTOGGLE_SGLANG_TREES") or tmp_path / "trees")
    done = subprocess.run(
        [
            str(IMPORT_VENV / "bin" / "python"),
            str(ROOT / "bench" / "whole_fix_imports.py"),
            *("realfixes", str(REALFIXES), "--trees", str(trees), "--mirror", str(MIRROR)),
            *("--only", "025", "054", "--json"),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["label"][:3]: r for r in json.loads(done.stdout)}
    assert sorted(results) == ["025", "054"]
    for label, result in results.items():
        verdicts = set(result["modules"].values())
        assert (result["verdict"], result["claims_whole"], result["differs"]) == (
            "whole",
            True,
            {},
        ), (label, verdicts)
