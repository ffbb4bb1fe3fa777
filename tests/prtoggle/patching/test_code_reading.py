"""define_code and global_reads read code as the compiler and `dis` do: a define's code
carries the file's own line numbers, and the names a code reads are those `dis` lists (on
the standard library's modules, and past EXTENDED_ARG)."""

from __future__ import annotations

import dis
import types
from pathlib import Path

from prtoggle.patching.define_code import compile_define
from prtoggle.patching.global_reads import global_reads

MODULE = '''\
"""A module whose middle a define takes."""
import os


def first(x):
    return os.sep + x


class Box:
    size = 1

    def grow(self, by):
        return self.size + by


def last():
    return first("a")
'''


def _codes(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _codes(const)
    return found


def _reads_by_dis(code: types.CodeType) -> frozenset[str]:
    """global_reads' rule, read through dis.get_instructions."""
    reads: set[str] = set()
    stored: set[str] = set()
    for current in _codes(code):
        local: set[str] = set()
        loaded: set[str] = set()
        for instruction in dis.get_instructions(current):
            kinds = {"LOAD_GLOBAL": reads, "LOAD_NAME": loaded, "STORE_NAME": local}
            kinds |= {"STORE_GLOBAL": stored, "DELETE_GLOBAL": stored}
            if instruction.opname in kinds:
                kinds[instruction.opname].add(instruction.argval)
            elif instruction.opname == "SETUP_ANNOTATIONS":
                local.add("__annotations__")
        reads.update(loaded - local)
    return frozenset(reads - stored)


def test_a_define_taken_from_the_middle_of_a_file_compiles_to_the_files_own_code() -> None:
    lines = MODULE.splitlines(keepends=True)
    whole = {c.co_name: c for c in _codes(compile(MODULE, "m.py", "exec", dont_inherit=True))}
    module_body = compile_define(
        "".join(lines[8:13]), filename="m.py", first_line=9, class_name=None, future_flags=0
    )
    class_body = compile_define(
        "".join(lines[9:13]), filename="m.py", first_line=10, class_name="Box", future_flags=0
    )
    for code in (module_body, class_body):
        grow = next(c for c in _codes(code) if c.co_name == "grow")
        assert grow == whole["grow"]
        assert list(grow.co_positions()) == list(whole["grow"].co_positions())
    box = next(c for c in _codes(class_body) if c.co_name == "Box")
    assert box.co_firstlineno == 10


def test_global_reads_lists_what_dis_lists_for_every_code_of_standard_modules() -> None:
    folder = Path(dis.__file__).parent
    checked = 0
    for name in ("dis.py", "inspect.py", "argparse.py", "dataclasses.py", "typing.py"):
        for code in _codes(compile((folder / name).read_text(), name, "exec", dont_inherit=True)):
            assert global_reads(code) == _reads_by_dis(code), (name, code.co_name)
            checked += 1
    assert checked > 500


def test_global_reads_reads_names_past_the_256th_through_extended_arg() -> None:
    names = [f"name_{index}" for index in range(300)]
    text = "def f():\n" + "".join(f"    {name}\n" for name in names)
    code = next(c for c in _codes(compile(text, "f.py", "exec")) if c.co_name == "f")
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(code))
    assert global_reads(code) == frozenset(names) == _reads_by_dis(code)
