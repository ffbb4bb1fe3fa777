"""Rewrite a recipe's YAML text in place: new targets and edit texts, comments and layout kept."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import yaml

from prtoggle.errors import RegistryError
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes.authoring.recipe_file import render_patches

_BIG_WIDTH = 1 << 30
_HEADER_COMMENT = re.compile(r"[ \t]+#.*$")
_TRAILING_BLANK_LINES = re.compile(r"\n((?:[ \t]*\n)*)$")


@dataclass(frozen=True)
class _Span:
    """Text `start:end` of the document becomes `text`."""

    start: int
    end: int
    text: str


def rewrite_patches(text: str, *, old: Sequence[Patch], new: Sequence[Patch], name: str) -> str:
    """`text` with each changed patch target and edit text of `old` set to its value in `new`.

    `new` has the shape of `old` (the same patches and edits, in order), which is the shape
    of the document's `patches:` list. Only the values that changed are rewritten, in the
    style they had where YAML allows it; every other byte (comments, key order, quoting,
    blank lines, other keys) is kept. A document whose `patches:` cannot be rewritten in
    place (an alias, another shape) is a RegistryError naming `name`.
    """
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:
        raise RegistryError(f"{name}: empty; expected a recipe mapping with 'patches'")
    patch_nodes = _sequence(_value(root, "patches", name), "patches", name)
    if len(patch_nodes) != len(old) or len(old) != len(new):
        raise RegistryError(f"{name}: 'patches' does not hold the recipe's {len(old)} patches")
    spans: list[_Span] = []
    for node, before, after in zip(patch_nodes, old, new, strict=True):
        spans.extend(_patch_spans(text, node, before, after, name=name))
    _refuse_shared(spans, name)
    for span in sorted(spans, key=lambda s: s.start, reverse=True):
        text = text[: span.start] + span.text + text[span.end :]
    return text


def _patch_spans(
    text: str, node: yaml.Node, old: Patch, new: Patch, *, name: str
) -> Iterator[_Span]:
    if old.target != new.target:
        yield _scalar_span(text, node, "target", new.target, name=name)
    edit_nodes = _sequence(_value(node, "edits", name), "edits", name)
    if len(edit_nodes) != len(old.edits) or len(old.edits) != len(new.edits):
        raise RegistryError(f"{name}: the edits of {old.target} changed in number")
    for edit_node, before, after in zip(edit_nodes, old.edits, new.edits, strict=True):
        yield from _edit_spans(text, edit_node, before, after, name=name)


def _edit_spans(text: str, node: yaml.Node, old: Edit, new: Edit, *, name: str) -> Iterator[_Span]:
    if old.match != new.match:
        yield _scalar_span(text, node, "match", new.match, name=name)
    if old.text != new.text or old.kind != new.kind:
        yield _scalar_span(text, node, old.kind, new.text, name=name)


def _scalar_span(text: str, mapping: yaml.Node, key: str, value: str, *, name: str) -> _Span:
    """The span of `mapping[key]`'s value and its new text at the same indentation."""
    key_node, node = _entry(mapping, key, name)
    if not isinstance(node, yaml.ScalarNode):
        raise RegistryError(f"{name}:{node.start_mark.line + 1}: {key!r} is not a string")
    original = text[node.start_mark.index : node.end_mark.index]
    if node.style in ("|", ">"):
        indent = _content_indent(original, fallback=key_node.start_mark.column + 2)
    else:
        indent = key_node.start_mark.column + 2
    rendered = _render(value, indent=indent, flow=bool(getattr(mapping, "flow_style", False)))
    if node.style in ("|", ">"):
        rendered = _as_block_was(rendered, original, node.value)
    elif rendered.startswith(("|", ">")):  # a plain value became lines: end where it ended
        rendered = rendered.removesuffix("\n")
    return _Span(node.start_mark.index, node.end_mark.index, rendered)


def _render(value: str, *, indent: int, flow: bool) -> str:
    """`value` as the YAML of a mapping value whose lines sit at column `indent`.

    A block literal (`|`) when it has line breaks (double-quoted inside a flow mapping, or
    where YAML cannot hold it as a block), else the style PyYAML's emitter chooses. A block
    ends with its line break; a flow scalar does not.
    """
    dumped = render_patches({"k": value}) if not flow else _double_quoted({"k": value})
    body = dumped[len("k: ") :]
    lines = body.split("\n")
    shift = " " * (indent - 2)
    shifted = "\n".join([lines[0], *(shift + line if line else line for line in lines[1:])])
    return shifted if shifted.startswith(("|", ">")) else shifted.rstrip("\n")


def _double_quoted(document: dict[str, str]) -> str:
    return yaml.dump(document, Dumper=yaml.SafeDumper, default_style='"', width=_BIG_WIDTH)[1:]


def _as_block_was(rendered: str, original: str, old_value: str) -> str:
    """A block value's new text keeps the comment of its header line and the blank lines
    after it that belong to the document, not to the value."""
    if rendered.startswith(("|", ">")):
        header, newline, rest = rendered.partition("\n")
        comment = _HEADER_COMMENT.search(original.partition("\n")[0])
        if comment is not None:
            rendered = header + comment.group(0) + newline + rest
    else:
        rendered += "\n"
    blank = _TRAILING_BLANK_LINES.search(original)
    if blank is None:
        return rendered
    lines = blank.group(1).splitlines(keepends=True)
    owned = max(len(old_value) - len(old_value.rstrip("\n")) - 1, 0)
    return rendered + "".join(lines[owned:])


def _content_indent(block: str, *, fallback: int) -> int:
    for line in block.split("\n")[1:]:
        if line.strip():
            return len(line) - len(line.lstrip(" "))
    return fallback


def _value(mapping: yaml.Node, key: str, name: str) -> yaml.Node:
    return _entry(mapping, key, name)[1]


def _entry(mapping: yaml.Node, key: str, name: str) -> tuple[yaml.Node, yaml.Node]:
    if isinstance(mapping, yaml.MappingNode):
        for key_node, value_node in mapping.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node, value_node
    line = mapping.start_mark.line + 1
    raise RegistryError(f"{name}:{line}: no {key!r} key to rewrite in place")


def _sequence(node: yaml.Node, key: str, name: str) -> list[yaml.Node]:
    if not isinstance(node, yaml.SequenceNode):
        raise RegistryError(f"{name}:{node.start_mark.line + 1}: {key!r} is not a list")
    return list(node.value)


def _refuse_shared(spans: Sequence[_Span], name: str) -> None:
    """Two values that are one YAML node (an alias): rewriting one would change both."""
    starts = [span.start for span in spans]
    if len(set(starts)) != len(starts):
        raise RegistryError(
            f"{name}: a rewritten value is an alias of another (`*name`); expected each "
            "target and edit text written out where it is used"
        )
