"""bench/stand_ins.py: GPU-only packages sglang imports for names, stood in for on CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
PROGRAM = """\
import sys
sys.path.insert(0, sys.argv[1])
import stand_ins
assert stand_ins.install(["json", "no_such_gpu_package"]) == ["no_such_gpu_package"]
import json, no_such_gpu_package as gpu
from no_such_gpu_package.bindings import runtime, Kernel
class Mine(Kernel):
    pass
@gpu.jit
def f(x):
    return x + 1
@gpu.jit(cache=True)
def g(x):
    return x
print(f(1), g(2), callable(runtime.cudaMalloc), Mine.__mro__[1] is Kernel, json.dumps([]))
"""


def test_a_missing_package_gives_any_name_a_class_a_decorator_and_others_stay_real() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(BENCH)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "2 2 True True []\n"), done.stderr


def test_a_submodule_a_suite_stand_in_lacks_is_stood_in_for_and_its_own_stay_real(
    tmp_path: Path,
) -> None:
    package = tmp_path / "gpu_kernels"
    package.mkdir()
    (package / "__init__.py").write_text("IS_PRTOGGLE_STUB = True\n")
    (package / "real.py").write_text("VALUE = 3\n")
    program = (
        f"import sys; sys.path[:0] = [{str(BENCH)!r}, {str(tmp_path)!r}]\n"
        "import stand_ins\n"
        "assert stand_ins.install([], stubbed=['gpu_kernels']) == []\n"
        "from gpu_kernels.real import VALUE\n"
        "from gpu_kernels.flash_attn import flash_attn_varlen_func\n"
        "print(VALUE, callable(flash_attn_varlen_func))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "3 True\n"), done.stderr
