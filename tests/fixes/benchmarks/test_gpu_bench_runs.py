"""GPU: every fix-cost benchmark runs fixed and reverted, interleaved, with --device cuda."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

MODULES = {
    21649: "fixes.benchmarks.dp_batch_size_cost",
    22832: "fixes.benchmarks.hidden_states_pool_cost",
    24856: "fixes.benchmarks.draft_extend_routing_cost",
    26521: "fixes.benchmarks.draft_decode_capture_cost",
    27460: "fixes.benchmarks.kv_indices_width_cost",
}


@pytest.mark.gpu
def test_prtoggle_bench_all_on_cuda_measures_every_fix() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "prtoggle",
            "bench",
            "--all",
            "--device",
            "cuda",
            "--repeat",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    records = {record["pr"]: record for record in json.loads(completed.stdout)}
    assert {pr: record["benchmark"] for pr, record in records.items()} == MODULES
    for record in records.values():
        assert record["measured"] is True
        assert record["ratio_reverted_over_fixed"] > 0
        assert record["ratio_iqr"] >= 0
        assert record["run"]["result"]["shape"]
        assert record["run"]["result"]["reverted"]["in_force"] == [record["pr"]]
    assert records[24856]["run"]["result"]["shape"]["bs"] == 32
    extras = records[27460]["extras"]["cuda_graph_kv_indices_bytes"]
    assert extras["fixed"] == 4 * extras["reverted"]  # topk 4
