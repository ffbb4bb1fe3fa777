"""The sglang suite (marker `sglang`): real sglang 0.5.23 on CPU, with two import-time stand-ins.

sglang is installed with `pip install --no-deps -r tests/sglang/requirements.txt` (.ci/run
does it). Two of its imports cannot load on a CPU-only machine and are replaced, for this
suite only, by stand-ins under tests/sglang/stubs (names only; calling them raises):
torchvision (PyPI's wheel cannot register its operators against the CPU torch; sglang
binds it at import for vision helpers) and sgl_kernel (CUDA binary; bound at import by the
flash-attention backend that sglang's recipe 27360 targets). The stand-ins go on sys.path
here and on PYTHONPATH of every child the suite starts (`sglang_env`).

Without sglang 0.5.23 every test of this suite fails with one message saying how to
install it; deselect the suite with `-m "not sglang"`.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

SGLANG_VERSION = "0.5.23"
STUBS = Path(__file__).parent / "stubs"
REPO = Path(__file__).parents[2]
WHEEL_ENV = "PRTOGGLE_SGLANG_WHEEL"
"""Path of the sglang 0.5.23 wheel file, for `check --source-root <wheel>` (.ci/run sets it)."""

if str(STUBS) not in sys.path:
    sys.path.insert(0, str(STUBS))


@pytest.fixture(autouse=True, scope="session")
def sglang_installed() -> str:
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != SGLANG_VERSION:
        pytest.fail(
            f"the sglang suite needs sglang {SGLANG_VERSION} (found: {version or 'none'}); "
            "install it with `pip install --no-deps -r tests/sglang/requirements.txt`, or "
            "deselect the suite with -m 'not sglang'",
            pytrace=False,
        )
    return version


@pytest.fixture
def sglang_env() -> dict[str, str]:
    """Environment for children: this checkout and the stand-ins first on PYTHONPATH."""
    env = dict(os.environ)
    parts = [str(REPO), str(STUBS), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    env.pop("PRTOGGLE_YAML_PATH", None)
    return env


@pytest.fixture(scope="session")
def sglang_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sglang 0.5.23 wheel: $PRTOGGLE_SGLANG_WHEEL, else downloaded once per session."""
    value = os.environ.get(WHEEL_ENV)
    if value:
        if not Path(value).is_file():
            pytest.fail(f"{WHEEL_ENV}={value!r} is not a file (expected the sglang wheel)")
        return Path(value)
    directory = tmp_path_factory.mktemp("sglang-wheel")
    spec = f"sglang=={SGLANG_VERSION}"
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d"]
    done = subprocess.run(
        [*command, str(directory)], capture_output=True, text=True, timeout=600, check=False
    )
    wheels = sorted(directory.glob(f"sglang-{SGLANG_VERSION}-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.fail(
            f"could not download the {spec} wheel (set {WHEEL_ENV} to a local copy): "
            f"{done.stderr.strip()[-500:]}",
            pytrace=False,
        )
    return wheels[0]
