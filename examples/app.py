"""A program on the demo engine that never imports prtoggle: the stand-in for `app.py`.

It runs three of the demo engine's scenarios (PRs 24856, 26521, 27460) in this process, with
the NaN and range probes on, prints one line per scenario and `accuracy: X` (the fraction that
ran clean), and exits 1 when one did not. Reverted under `prtoggle run -r 24856 -- python
app.py` (or bisected), the 24856 scenario fails by name; plain, all three are clean.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SCENARIOS = (
    "fixes.scenarios.trtllm_draft_extend_routing",
    "fixes.scenarios.trtllm_draft_decode_capture",
    "fixes.scenarios.mla_draft_kv_indices_width",
)


def accuracy() -> float:
    """Run each scenario once; print its outcome; return the fraction that ran clean."""
    os.environ.setdefault("SGLANG_SPEC_NAN_DETECTION", "1")
    os.environ.setdefault("SGLANG_SPEC_OOB_DETECTION", "1")
    import importlib

    import torch

    _find_the_demo_engine()

    from fixes.scenarios.common import ScenarioOptions, failure_from_exception

    torch.set_num_threads(1)
    clean = 0
    for name in SCENARIOS:
        try:
            outcome = importlib.import_module(name).run(ScenarioOptions())
        except Exception as exc:  # a failing scenario is reported, not raised
            outcome = failure_from_exception(exc)
        clean += outcome.outcome == "clean"
        where = f" at {outcome.site}" if outcome.site else ""
        sys.stdout.write(f"{name}: {outcome.outcome} {outcome.error or ''}{where}".rstrip() + "\n")
    return clean / len(SCENARIOS)


def _find_the_demo_engine() -> None:
    """Put the checkout that holds `fixes/` on sys.path: no install does (docs/demo-engine.md)."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "fixes" / "__init__.py").is_file():
            if str(folder) not in sys.path:
                sys.path.append(str(folder))
            return


def main() -> int:
    """Print the accuracy; exit status 1 when a scenario failed."""
    score = accuracy()
    sys.stdout.write(f"accuracy: {score:.2f}\n")
    return 0 if score == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
