"""One GPU per child: the GPUs a parent hands out, leases, and `repro --jobs` on CUDA."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from prtoggle.commands import repro
from prtoggle.commands.repro import ScenarioResult, run_repros
from prtoggle.recipes.registry import load_registry
from prtoggle.runners.child_process import CommandRun
from prtoggle.runners.gpu_leases import GpuLeases, visible_gpus


def test_without_cuda_visible_devices_every_counted_gpu_is_handed_out() -> None:
    assert visible_gpus({}, count=lambda: 3) == ["0", "1", "2"]


def test_the_parents_cuda_visible_devices_entries_are_kept_as_written() -> None:
    def never() -> int:
        raise AssertionError("counted GPUs although CUDA_VISIBLE_DEVICES was set")

    env = {"CUDA_VISIBLE_DEVICES": "2, GPU-5f0e,7"}
    assert visible_gpus(env, count=never) == ["2", "GPU-5f0e", "7"]


def test_leases_go_to_the_least_leased_gpu_and_come_back() -> None:
    leases = GpuLeases(["0", "1"])
    with leases.lease() as first, leases.lease() as second:
        assert (first, second) == ("0", "1")
        with leases.lease() as third:
            assert third == "0"
    with leases.lease() as again:
        assert again == "0"


def _fake_children(
    monkeypatch: pytest.MonkeyPatch, *, concurrent: int
) -> list[tuple[str | None, frozenset[str | None]]]:
    """Replace the scenario child: record its CUDA_VISIBLE_DEVICES and those running beside it."""
    running: dict[int, str | None] = {}
    seen: list[tuple[str | None, frozenset[str | None]]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(concurrent, timeout=10)

    def fake_run_scenario(
        module: str,
        *,
        prs: Sequence[int] = (),
        base_env: Mapping[str, str] | None = None,
        **_: object,
    ) -> ScenarioResult:
        gpu = None if base_env is None else base_env.get("CUDA_VISIBLE_DEVICES")
        with lock:
            running[threading.get_ident()] = gpu
        barrier.wait()  # every lease of this wave is held now
        with lock:
            seen.append((gpu, frozenset(running.values())))
        barrier.wait()
        with lock:
            del running[threading.get_ident()]
        run = CommandRun(
            argv=("python", "-m", module), returncode=0, seconds=0.0, stdout="", stderr=""
        )
        return ScenarioResult(kind="clean", error=None, site=None, message="", seconds=0.0, run=run)

    monkeypatch.setattr(repro, "run_scenario", fake_run_scenario)
    return seen


def test_repro_jobs_on_cuda_give_each_running_child_its_own_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    seen = _fake_children(monkeypatch, concurrent=2)
    fixes = [load_registry().get(21649, collection="fixes")]
    run_repros(fixes, device="cuda", provider=None, timeout=5, jobs=2, gpu_count=lambda: 2)
    assert sorted(gpu for gpu, _ in seen) == ["0", "1"]
    assert {beside for _, beside in seen} == {frozenset({"0", "1"})}


def test_repro_on_cpu_leaves_cuda_visible_devices_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_children(monkeypatch, concurrent=2)
    fixes = [load_registry().get(21649, collection="fixes")]

    def never() -> int:
        raise AssertionError("counted GPUs for a CPU run")

    run_repros(fixes, device="cpu", provider=None, timeout=5, jobs=2, gpu_count=never)
    assert [gpu for gpu, _ in seen] == [None, None]
