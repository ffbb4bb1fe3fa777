"""Recipe YAML read through libyaml where it can be: the pure loader's results and messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from prtoggle.errors import RegistryError
from prtoggle.recipes.yaml_loader import HAVE_LIBYAML, parse_yaml

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "yaml").glob("*/*.yaml"))


def both(text: str) -> tuple[object, object]:
    """What parse_yaml gives, or the message it raises, with and without libyaml."""
    outcomes = []
    for libyaml in (True, False):
        try:
            outcomes.append(parse_yaml(text, name="r.yaml", libyaml=libyaml))
        except RegistryError as exc:
            outcomes.append(str(exc))
    return outcomes[0], outcomes[1]


def lines_of(value: object) -> object:
    """The value with the line of every mapping, key and sequence, for comparison."""
    if isinstance(value, dict):
        items = {key: lines_of(item) for key, item in value.items()}
        return (getattr(value, "line", None), getattr(value, "key_lines", None), items)
    if isinstance(value, list):
        return (getattr(value, "line", None), [lines_of(item) for item in value])
    return value


def test_pyyaml_has_libyaml_here_so_both_paths_are_compared() -> None:
    assert HAVE_LIBYAML


def test_every_shipped_recipe_reads_the_same_with_and_without_libyaml() -> None:
    assert len(SHIPPED) >= 10
    for path in SHIPPED:
        fast, pure = both(path.read_text())
        assert isinstance(fast, dict), path
        assert lines_of(fast) == lines_of(pure), path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "targets: [a,\tb]\n",
            "r.yaml:1: YAML syntax error: found character '\\t' that cannot start any token",
        ),
        (
            "a: |#\n  x\n",
            "r.yaml:1: YAML syntax error: expected chomping or indentation "
            "indicators, but found '#'",
        ),
    ],
)
def test_what_libyaml_accepts_and_the_pure_loader_refuses_is_refused(
    text: str, message: str
) -> None:
    assert both(text) == (message, message)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("!\n", None),
        ("\x85\ufeff#x\n", "\ufeff#x"),
        ("a: \ufeff1\n", {"a": "\ufeff1"}),
        ("a: 1\n\ufeffb\n", "r.yaml:3: YAML syntax error: could not find expected ':'"),
    ],
)
def test_what_libyaml_reads_differently_is_read_as_the_pure_loader_reads_it(
    text: str, value: object
) -> None:
    assert both(text) == (value, value)


def test_a_tab_and_a_bang_inside_a_block_scalar_read_alike() -> None:
    text = "pr: 1\npatches:\n  - match: |\n      if a != b:\n      \treturn\n"
    fast, pure = both(text)
    assert lines_of(fast) == lines_of(pure)
    assert fast == {"pr": 1, "patches": [{"match": "if a != b:\n\treturn\n"}]}
