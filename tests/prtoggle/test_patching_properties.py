"""Property tests of the editor: any edit fails cleanly or compiles; restore is exact."""

from __future__ import annotations

import importlib.util
import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.compiler import FunctionShape, compile_function
from prtoggle.patching.editor import EditContext, edit_numbered, number_lines
from prtoggle.patching.swap import CodeSwapper, EditLayer
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
