"""Session-wide test setup: Triton in interpreter mode without a GPU; sglang's CPU stand-ins;
the checkout's demo engine `fixes` importable in every process of the suite.

Each test leaves os.environ's PYTHONPATH as it found it: an in-process
`maybe_revert_pr_fix()` puts prtoggle's start-up hook there for the process's children.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    # Must be set before triton is imported anywhere: kernels then run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")

_CHECKOUT = Path(__file__).resolve().parent.parent
# No install puts the demo engine `fixes` on sys.path (prtoggle alone is installed):
# pytest's `pythonpath` setting puts the checkout on this process's path; the suite's
# children (`prtoggle run`, `repro`, scenario processes) get it through PYTHONPATH.
_entries = [str(_CHECKOUT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(_entries))

# The suite's own parsed-recipe cache (recipes/recipe_cache.py), not the user's ~/.cache.
os.environ.setdefault("PRTOGGLE_CACHE_DIR", tempfile.mkdtemp(prefix="prtoggle-test-cache-"))

_SGLANG_STUBS = Path(__file__).parent / "sglang" / "stubs"
if (
    importlib.util.find_spec("sglang") is not None
    and importlib.util.find_spec("torchvision") is None
):
    # sglang installed for tests/sglang on a CPU-only machine: every process of the suite
    # (children included, e.g. `prtoggle check` over all collections) imports sglang's
    # targets with the import-time stand-ins of tests/sglang/stubs (see its conftest).
    parts = [str(_SGLANG_STUBS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    sys.path.insert(0, str(_SGLANG_STUBS))


@pytest.fixture
def fresh_detection_state() -> Iterator[None]:
    """Detection state (witness tables, redzones, phase and step, set_mode) as a fresh
    process has it, before the test and again after it, through detection's public reset.

    Environment variables are the test's own business (monkeypatch them)."""
    from prtoggle.detect.findings.checking import reset_process_state

    reset_process_state()
    yield
    reset_process_state()


@pytest.fixture(autouse=True)
def _pythonpath_left_as_found() -> Iterator[None]:
    value = os.environ.get("PYTHONPATH")
    yield
    if value is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = value
