"""Property tests of the editor: any edit fails cleanly or compiles; restore is exact."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.compiler import FunctionShape, compile_function
from prtoggle.patching.editor import EditContext, edit_numbered, number_lines
from prtoggle.patching.swap import CodeSwapper, EditLayer, apply_layers
from prtoggle.patching.targets import function_source
from prtoggle.patching.types import Edit, Patch

SIMPLE = st.one_of(
    st.builds("v{} = v{} + {}".format, st.integers(0, 2), st.integers(0, 2), st.integers(0, 9)),
    st.just("pass"),
    st.builds("return v{}".format, st.integers(0, 2)),
)
HEADER = st.builds("if v{} > {}:".format, st.integers(0, 2), st.integers(0, 9))
STATEMENT = st.one_of(
    SIMPLE.map(lambda line: [line]),
    st.tuples(HEADER, st.lists(SIMPLE, min_size=1, max_size=2)).map(
        lambda block: [block[0], *(f"    {line}" for line in block[1])]
    ),
)
BODY = st.lists(STATEMENT, min_size=1, max_size=6).map(
    lambda blocks: list(itertools.chain(*blocks))
)
TEXT = st.lists(st.one_of(SIMPLE, HEADER, st.just("    pass"), st.just("")), max_size=3).map(
    "\n".join
)
KIND = st.sampled_from(["replacement", "prepend", "append"])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


def function_text(body: list[str], indent: str) -> str:
    lines = [f"{indent}def target(v0, v1, v2):", *(f"{indent}    {line}" for line in body)]
    return "\n".join(lines) + "\n"


@st.composite
def edit_cases(draw: st.DrawFn) -> tuple[str, list[Edit]]:
    body = draw(BODY)
    edits = []
    for line in range(1, draw(st.integers(1, 3)) + 1):
        if draw(st.integers(0, 3)):
            start = draw(st.integers(0, len(body) - 1))
            stop = draw(st.integers(start + 1, min(len(body), start + 3)))
            match = "\n".join(text.strip() for text in body[start:stop])
        else:
            match = draw(SIMPLE)
        edits.append(Edit(match=match, kind=draw(KIND), text=draw(TEXT), line=line))
    return function_text(body, draw(st.sampled_from(["", "    "]))), edits


@SETTINGS
@given(edit_cases())
def test_any_edit_either_fails_cleanly_or_compiles_with_monotonic_lines(
    case: tuple[str, list[Edit]],
) -> None:
    source, edits = case
    context = EditContext(target="m.target", filename="m.py")
    shape = FunctionShape(name="target", class_name=None, freevars=(), future_flags=0)
    try:
        edited = edit_numbered(number_lines(source, first_line=10), edits, context=context)
        code = compile_function(edited, shape=shape, filename="m.py", target="m.target")
    except PatchApplicationError:
        return
    assert list(edited.origins) == sorted(edited.origins)
    assert code.co_name == "target" and code.co_filename == "m.py"
    assert all(line is None or line >= 10 for _, _, line in code.co_lines())


@SETTINGS
@given(edit_cases())
def test_apply_then_restore_gives_back_the_original_code_object(
    case: tuple[str, list[Edit]],
) -> None:
    source, edits = case
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"prop_{next(_counter)}.py"
        text = source if not source.startswith(" ") else "class Holder:\n" + source
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        function = module.Holder.target if hasattr(module, "Holder") else module.target
        original = function.__code__
        swapper = CodeSwapper()
        layer = EditLayer(
            pr=1, patch=Patch(target="m.target", edits=tuple(edits), line=1), yaml_path=None
        )
        try:
            swapper.patch(function, layer)
        except PatchApplicationError:
            assert function.__code__ is original
            return
        assert function.__code__ is not original
        swapper.unpatch(function, 1)
        assert function.__code__ is original


SIGNATURE_MODULE = """\
LIMIT = 7


def tag(function):
    function.tagged = True
    return function


def other(function):
    return function


@tag
def target(a, b={b}, *, c={c}):
    return a * b + c
"""
SMALL = st.integers(-3, 3)


@st.composite
def signature_edits(draw: st.DrawFn) -> tuple[str, list[Edit]]:
    b, c = draw(SMALL), draw(SMALL)
    header = f"def target(a, b={b}, *, c={c}):"
    new_headers = st.sampled_from(
        [
            "def target(a, b={0}, *, c={1}):",
            "def target(a, b={0}, d={1}, *, c={1}, e=LIMIT):",
            "def target(a, b, *, c={0}):",
            "def target(a, *, c={0}, b={1}):",
            "def target(a, b=LIMIT + {0}, *args, c={1}, **kwargs):",
            "def target(a: int = {0}, b={1}, *, c={1}) -> int:",
            "def target(a, b={0}, *, c=undefined_name):",
        ]
    ).map(lambda text: text.format(draw(SMALL), draw(SMALL)))
    candidates = st.one_of(
        new_headers.map(lambda text: (header, "replacement", text)),
        st.sampled_from(
            [
                ("return a * b + c", "replacement", "return a - b * c"),
                ("return a * b + c", "prepend", "a = a + 1"),
                ("return a * b + c", "replacement", "return (a, b, c, d, e)"),
                ("@tag", "replacement", ""),
                ("@tag", "replacement", "@other"),
                ("@tag", "append", "@other"),
            ]
        ),
    )
    chosen = draw(st.lists(candidates, min_size=1, max_size=3))
    edits = [
        Edit(match=match, kind=kind, text=text, line=index)  # type: ignore[arg-type]
        for index, (match, kind, text) in enumerate(chosen, start=1)
    ]
    return SIGNATURE_MODULE.format(b=b, c=c), edits


CALLS = st.lists(
    st.tuples(
        st.lists(SMALL, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), SMALL, max_size=3),
    ),
    min_size=1,
    max_size=6,
)


@SETTINGS
@given(signature_edits(), CALLS)
def test_every_accepted_edit_behaves_like_the_function_compiled_from_the_edited_file(
    case: tuple[str, list[Edit]], calls: list[tuple[list[int], dict[str, int]]]
) -> None:
    module_text, edits = case
    with tempfile.TemporaryDirectory() as directory:
        reverted = load_module(Path(directory), module_text).target
        originals = (reverted.__code__, reverted.__defaults__, reverted.__kwdefaults__)
        layer = EditLayer(
            pr=1, patch=Patch(target="m.target", edits=tuple(edits), line=1), yaml_path=None
        )
        source = function_source(reverted, target="m.target")
        swapper = CodeSwapper()
        try:
            swapper.patch(reverted, layer)
        except PatchApplicationError:
            return
        lines = module_text.splitlines(keepends=True)
        start, stop = source.first_line - 1, source.first_line - 1 + len(source.text.splitlines())
        edited = apply_layers(source, [layer]).text
        edited_file = "".join([*lines[:start], edited, *lines[stop:]])
        expected = load_module(Path(directory), edited_file).target
        assert getattr(reverted, "tagged", False) == getattr(expected, "tagged", False)
        assert str(inspect.signature(reverted)) == str(inspect.signature(expected))
        for args, kwargs in calls:
            assert outcome(reverted, args, kwargs) == outcome(expected, args, kwargs)
        swapper.unpatch(reverted, 1)
        restored = (reverted.__code__, reverted.__defaults__, reverted.__kwdefaults__)
        assert all(old is new for old, new in zip(originals, restored, strict=True))


def load_module(directory: Path, text: str) -> ModuleType:
    path = directory / f"prop_{next(_counter)}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcome(function: Callable[..., object], args: list[int], kwargs: dict[str, int]) -> object:
    try:
        return ("returned", function(*args, **kwargs))
    except Exception as exc:  # the same exception type on both sides is the property
        return ("raised", type(exc).__name__)
