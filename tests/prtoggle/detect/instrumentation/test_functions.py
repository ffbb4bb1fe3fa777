"""Tests of detect.instrumentation.functions: NaN probes on what plain functions and methods return
and write, first writer first, originals restored."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
import torch

from prtoggle import detect
from prtoggle.detect import config
from prtoggle.errors import DetectUsageError, NaNDetected

ENGINE_SOURCE = """
import torch

def produce(n):
    return torch.zeros(n, 2)

def unwritten(n):
    return torch.full((n, 2), float("nan"))  # stands for uninitialised memory

def poison(x, row):
    x[row, 1] = float("nan")

class Stage:
    def run(self, x):
        return {"out": x * 2, "count": 3}

    def first_rows(self, x, rows):
        return x[:rows]

    def crash(self, rows):
        return index_rows(torch.zeros(2, 2), rows)

def index_rows(t, rows):
    if rows >= t.shape[0]:
        raise IndexError(f"row {rows} out of bounds")
    return t[rows]
"""


@pytest.fixture
def engine() -> Iterator[types.ModuleType]:
    module = types.ModuleType("fake_engine.stages")
    exec(compile(ENGINE_SOURCE, "fake_engine/stages.py", "exec"), module.__dict__)
    package = types.ModuleType("fake_engine")
    sys.modules.update({"fake_engine": package, "fake_engine.stages": module})
    yield module
    del sys.modules["fake_engine"], sys.modules["fake_engine.stages"]


@pytest.mark.usefixtures("detection_on")
def test_the_function_that_wrote_the_nan_in_place_is_named_first(
    engine: types.ModuleType,
) -> None:
    with detect.instrument_functions(["fake_engine"]) as handle:
        x = engine.produce(3)
        engine.poison(x, 2)
        engine.Stage().run(x)
    assert set(handle.sites) == set()  # removed on exit
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert excinfo.value.sites == (
        "fake_engine.stages.poison(x)",
        "fake_engine.stages.Stage.run(return)[out]",
    )  # Stage.run only read x: an argument is probed when the call changed it in place
    assert (excinfo.value.first.first_row, excinfo.value.first.last_row) == (2, 2)


def test_originals_come_back_and_nothing_runs_while_off(engine: types.ModuleType) -> None:
    originals = (engine.produce, engine.poison, engine.Stage.run)
    handle = detect.instrument_functions([engine])
    assert engine.produce is not originals[0]
    assert engine.produce.__wrapped__ is originals[0]
    assert len(handle.sites) == 7
    x = engine.produce(2)
    engine.poison(x, 0)
    detect.check()  # detection off: nothing recorded
    handle.remove()
    handle.remove()
    assert (engine.produce, engine.poison, engine.Stage.run) == originals


def test_a_module_that_is_not_imported_is_refused() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.instrument_functions(["no_such_engine"])
    assert str(excinfo.value) == (
        "instrument_functions(): module 'no_such_engine' is not imported; import it first "
        "(only loaded modules are instrumented)"
    )


@pytest.mark.usefixtures("detection_on")
def test_hand_probes_off_leaves_only_the_automatic_probes(
    engine: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(detect.config.HAND_PROBES_ENV, "0")
    bad = torch.tensor([float("nan")])
    detect.maybe_detect_nan(bad, "hand.nan")
    detect.maybe_detect_oob(torch.tensor([9]), 0, 1, "hand.oob")
    detect.maybe_check_host_range(9, 0, 1, "hand.host")
    detect.check()
    with detect.instrument_functions([engine]):
        engine.poison(engine.produce(1), 0)
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert excinfo.value.sites == ("fake_engine.stages.poison(x)",)


def test_a_crash_names_the_innermost_instrumented_function(engine: types.ModuleType) -> None:
    with detect.instrument_functions(["fake_engine"]), pytest.raises(IndexError) as excinfo:
        engine.Stage().crash(5)
    assert excinfo.value.site == "fake_engine.stages.index_rows"  # type: ignore[attr-defined]
    assert excinfo.value.__notes__ == [
        "raised through instrumented fake_engine.stages.index_rows",
        "raised through instrumented fake_engine.stages.Stage.crash",
    ]


@pytest.mark.usefixtures("detection_on")
def test_a_view_of_an_unwritten_argument_handed_back_is_not_probed(
    engine: types.ModuleType,
) -> None:
    x = torch.full((3, 2), float("nan"))  # e.g. a poisoned buffer a later kernel will write
    with detect.instrument_functions(["fake_engine"]):
        assert engine.Stage().first_rows(x, 2).shape == (2, 2)
    detect.check()  # nothing raised: first_rows only sliced it


@pytest.mark.usefixtures("detection_on")
def test_excluded_functions_stay_unwrapped(engine: types.ModuleType) -> None:
    with detect.instrument_functions(["fake_engine"], exclude=["fake_engine.stages.unwr*"]):
        assert not hasattr(engine.unwritten, "__wrapped__")
        assert hasattr(engine.produce, "__wrapped__")
        assert engine.unwritten(2).isnan().all()
    detect.check()  # unwritten's output was not probed
    with detect.instrument_functions(["fake_engine"]):
        engine.unwritten(2)
    with pytest.raises(NaNDetected):  # and without the exclusion it is
        detect.check()


@pytest.mark.usefixtures("detection_on")
def test_an_unwritten_poisoned_buffer_handed_back_is_not_probed(
    monkeypatch: pytest.MonkeyPatch, engine: types.ModuleType
) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")
    engine.allocate = lambda: detect.poisoned_buffer(
        (2, 2), dtype=torch.float32, device="cpu", name="graph.out"
    )
    engine.allocate.__module__ = engine.__name__
    with detect.instrument_functions(["fake_engine"]):
        buffer = engine.allocate()  # deliberate NaN poison, not a result
        detect.check()
        engine.poison(buffer, 0)  # written since: a NaN it holds now is reported
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert excinfo.value.sites == ("fake_engine.stages.poison(x)",)
