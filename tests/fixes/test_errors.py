"""The engine's errors have their own root, apart from prtoggle's."""

from __future__ import annotations

import inspect
import pathlib

from fixes import errors
from prtoggle.errors import PrToggleError


def _engine_error_classes() -> list[type[BaseException]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == errors.__name__
    ]


def test_every_engine_error_derives_from_engine_error_and_not_from_prtoggle() -> None:
    classes = _engine_error_classes()
    assert sorted(cls.__name__ for cls in classes) == sorted(errors.__all__)
    assert len(classes) == 7
    for cls in classes:
        assert issubclass(cls, errors.EngineError), cls
        assert not issubclass(cls, PrToggleError), cls


def test_no_module_of_the_engine_raises_prtoggle_error() -> None:
    root = pathlib.Path(errors.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if "PrToggleError(" in path.read_text()
    ]
    assert offenders == []
