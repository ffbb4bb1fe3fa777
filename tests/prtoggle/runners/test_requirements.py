"""What a command needs installed is said in one error naming the extra or the package."""

from __future__ import annotations

import pytest

from prtoggle.errors import MissingDependencyError
from prtoggle.runners import requirements
from prtoggle.runners.requirements import require_installed


def test_nothing_missing_raises_nothing() -> None:
    require_installed("repro", detect=True, tools=["pytest"], runs=["prtoggle.protocol"])


def test_a_missing_module_of_the_detect_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(requirements, "detect_modules", lambda: ("torch", "no_such_triton"))
    with pytest.raises(MissingDependencyError) as raised:
        require_installed("bench", detect=True)
    assert str(raised.value) == (
        "`prtoggle bench` needs torch, no_such_triton (missing here: no_such_triton): "
        "install them with `pip install 'prtoggle[detect]'`"
    )


def test_a_missing_tool_and_a_missing_engine_are_said_in_one_message() -> None:
    with pytest.raises(MissingDependencyError) as raised:
        require_installed(
            "repro", tools=["no_such_pytest"], runs=["no_engine.scenarios.a", "no_engine.b"]
        )
    assert str(raised.value) == (
        "`prtoggle repro` needs no_such_pytest, which is not installed here: "
        "`pip install no_such_pytest`; and `prtoggle repro` runs modules of package "
        "no_engine, which is not importable here (the demo engine `fixes` is found from "
        "the root of prtoggle's source checkout only: run prtoggle there)"
    )


def test_a_missing_pytest_names_the_extra_that_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(requirements, "_findable", lambda name: name != "pytest")
    with pytest.raises(MissingDependencyError) as raised:
        require_installed("coverage", tools=["pytest"])
    assert str(raised.value) == (
        "`prtoggle coverage` needs pytest, which is not installed here: "
        "`pip install 'prtoggle[pytest]'`"
    )
