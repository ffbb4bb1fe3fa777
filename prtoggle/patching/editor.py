"""Text edits on function source: match whitespace-stripped lines once, re-indent, track lines."""

from __future__ import annotations

import ast
import difflib
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.errors import EditMatchError, PatchApplicationError
from prtoggle.patching.lines import split_lines
from prtoggle.patching.types import Edit

NEAREST_WINDOW_COUNT = 3


@dataclass(frozen=True)
class SourceLine:
    """One line of (edited) source and the real file line it is attributed to."""

    text: str
    origin: int


@dataclass(frozen=True)
class NumberedSource:
    """Source text whose every line carries the real file line it is attributed to.

    Unchanged lines keep their own line number. Lines an edit inserts are attributed
    to the first line of the edit's match, so a traceback through them points at the
    code the edit changed and line numbers never decrease along the source.
    """

    lines: tuple[SourceLine, ...]

    @property
    def text(self) -> str:
        return "".join(f"{line.text}\n" for line in self.lines)

    @property
    def origins(self) -> tuple[int, ...]:
        return tuple(line.origin for line in self.lines)


@dataclass(frozen=True)
class EditContext:
    """Where the edits come from and what they apply to, for error messages."""

    target: str
    filename: str
    yaml_path: str | None = None


def number_lines(source: str, *, first_line: int) -> NumberedSource:
    """Number the lines of `source` from `first_line` (the file line of its first line)."""
    return NumberedSource(
        lines=tuple(
            SourceLine(text=text, origin=first_line + index)
            for index, text in enumerate(_source_lines(source))
        )
    )


def edit_numbered(
    source: NumberedSource, edits: Sequence[Edit], *, context: EditContext
) -> NumberedSource:
    """Apply `edits` in order to numbered source; later edits see earlier results.

    Every edit's match must occur exactly once, comparing whitespace-stripped lines with
    blank lines ignored on both sides. When that finds several windows but the match as
    written (blank lines included, as sglang compares) occurs exactly once, that one is
    used, so matching is never stricter than sglang's. Otherwise EditMatchError shows the
    match and the nearest (or every matching) window with real file line numbers. An edit
    whose text is blank deletes the matched lines, whatever its kind (sglang's rule).
    """
    current = list(source.lines)
    stripped = _Stripped([line.text.strip() for line in current])
    for index, edit in enumerate(edits, start=1):
        _apply_edit(
            current,
            stripped,
            edit,
            label=_edit_label(context, index, len(edits), edit),
            filename=context.filename,
        )
    return NumberedSource(lines=tuple(current))


def edit_text(*, source: str, edits: Sequence[Edit], context: EditContext | None = None) -> str:
    """Text in, edited text out: the edits of `edit_numbered` on plain source text.

    The shape of sglang's `apply_edits(source=..., edits=...)`; diagnostics count lines
    from 1 and name `<source>` unless `context` says where the text comes from.
    """
    texts = _plain_edited(source, edits)
    if texts is not None:
        return "\n".join(texts) + "\n" if texts else ""
    # an edit did not apply: the numbered path raises with the diagnostics
    where = context or EditContext(target="<source>", filename="<source>")
    return edit_numbered(number_lines(source, first_line=1), edits, context=where).text


def edits_apply(*, source: str, edits: Sequence[Edit]) -> bool:
    """Whether `edit_text` would apply `edits` to `source`, without building its diagnostics."""
    return _plain_edited(source, edits) is not None


def insert_preamble(
    source: NumberedSource, preamble: str, *, context: EditContext
) -> NumberedSource:
    """Insert `preamble` at the top of the function body, after its docstring (if any).

    The text is dedented and indented like the body's statements; its lines take the file
    line of the statement they precede (of the docstring's last line when nothing follows
    it). A blank preamble changes nothing.
    """
    if not preamble.strip():
        return source
    body, offset = _definition_body(source, context=context)
    lines = list(source.lines)
    first = body[0]
    if _is_docstring(first) and len(body) == 1:
        index = (first.end_lineno or first.lineno) - offset
        origin = lines[index - 1].origin
    else:
        anchor = body[1] if _is_docstring(first) else first
        index = anchor.lineno - 1 - offset
        origin = lines[index].origin
    start = lines[first.lineno - 1 - offset].text
    if first.col_offset != _indent_width(start):
        raise PatchApplicationError(
            f"{context.target}: preamble{_preamble_where(context)}: the function body starts "
            f"on its def line ({context.filename}:{lines[first.lineno - 1 - offset].origin}); "
            "expected the body on lines of its own"
        )
    indent = start[: first.col_offset]
    new = [SourceLine(text=text, origin=origin) for text in reindent(preamble, indent)]
    return NumberedSource(lines=tuple([*lines[:index], *new, *lines[index:]]))


def match_lines(match: str) -> tuple[str, ...]:
    """The whitespace-stripped, non-blank lines an edit's `match` compares."""
    return tuple(stripped for stripped in (line.strip() for line in split_lines(match)) if stripped)


def reindent(text: str, indent: str) -> list[str]:
    """Dedent `text` as a block and indent it to `indent`, keeping relative indentation."""
    block = textwrap.dedent(text)
    return [f"{indent}{line}" if line.strip() else "" for line in split_lines(block)]


def _plain_edited(source: str, edits: Sequence[Edit]) -> list[str] | None:
    """The lines of `source` with `edits` made in order, or None when one does not apply."""
    texts = _source_lines(source)
    stripped = [text.strip() for text in texts]
    for edit in edits:
        wanted = match_lines(edit.match)
        span = _edit_span(stripped, edit, wanted) if wanted else None
        if span is None:
            return None
        texts, stripped = _spliced(texts, stripped, span, edit)
    return texts


def _apply_edit(
    lines: list[SourceLine], stripped: _Stripped, edit: Edit, *, label: str, filename: str
) -> None:
    """Make `edit` on `lines` in place (`stripped`: their whitespace-stripped texts, kept
    in step), or raise EditMatchError showing where the match is or is nearest."""
    wanted = match_lines(edit.match)
    if not wanted:
        raise EditMatchError(f"{label}: the match has no non-blank line; expected code to match")
    span = stripped.span(edit, wanted)
    if span is None:
        nonblank = [i for i, text in enumerate(stripped.texts) if text]
        position = {line: k for k, line in enumerate(nonblank)}
        windows = _windows(stripped.texts, wanted)
        starts = [position[first] for first, _ in windows]
        raise EditMatchError(
            _mismatch_message(lines, nonblank, wanted, starts, label=label, filename=filename)
        )
    first, stop, texts = spliced_lines([line.text for line in lines[span[0] : span[1] + 1]], edit)
    first, stop = span[0] + first, span[0] + stop
    anchor = lines[span[0]].origin if edit.kind != "append" else lines[span[1]].origin
    lines[first:stop] = [SourceLine(text=text, origin=anchor) for text in texts]
    stripped.splice(first, stop, [text.strip() for text in texts])


class _Stripped:
    """The whitespace-stripped lines of a text being edited, how often each occurs, and
    where the last edit was: a match whose first line occurs once is found by a search
    starting there (edits go top to bottom), not by a scan of the whole text."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.counts = Counter(texts)
        self.last = 0

    def span(self, edit: Edit, wanted: Sequence[str]) -> tuple[int, int] | None:
        """_edit_span's answer for `edit`, found faster when its first line is unique."""
        if self.counts[wanted[0]] != 1:
            return _edit_span(self.texts, edit, wanted)
        try:
            start = self.texts.index(wanted[0], min(self.last, len(self.texts)))
        except ValueError:
            start = self.texts.index(wanted[0])
        last = _window_last(self.texts, start, wanted)
        return None if last is None else (start, last)

    def splice(self, first: int, stop: int, texts: list[str]) -> None:
        """Lines first..stop-1 replaced by `texts`."""
        self.counts.subtract(self.texts[first:stop])
        self.counts.update(texts)
        self.texts[first:stop] = texts
        self.last = first


def _edit_span(stripped: list[str], edit: Edit, wanted: Sequence[str]) -> tuple[int, int] | None:
    """The first and last line of the one window the edit's match selects, or None.

    `stripped`: the source's lines, whitespace-stripped.
    """
    windows = _windows(stripped, wanted)
    if len(windows) == 1:
        return windows[0]
    as_written = _windows_as_written(stripped, edit.match) if windows else []
    return as_written[0] if len(as_written) == 1 else None


def _windows(stripped: list[str], wanted: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) line of each window whose non-blank lines are `wanted`, in order.

    Looked for only where the first wanted line occurs (found by list.index).
    """
    found: list[tuple[int, int]] = []
    start = -1
    while True:
        try:
            start = stripped.index(wanted[0], start + 1)
        except ValueError:
            return found
        last = _window_last(stripped, start, wanted)
        if last is not None:
            found.append((start, last))


def _window_last(stripped: list[str], start: int, wanted: Sequence[str]) -> int | None:
    line = start
    for text in wanted[1:]:
        line += 1
        while line < len(stripped) and not stripped[line]:
            line += 1
        if line >= len(stripped) or stripped[line] != text:
            return None
    return line


def edit_span(
    stripped: list[str], edit: Edit, *, alone_at: int | None = None
) -> tuple[int, int] | None:
    """The first and last line of the one window `edit`'s match selects in the lines whose
    whitespace-stripped texts are `stripped` (as edit_text matches), or None.

    `alone_at`: the caller knows that the match's first line, if it is that line's text,
    occurs at no other line: only the window starting there is tried (no scan).
    """
    wanted = match_lines(edit.match)
    if not wanted:
        return None
    if alone_at is not None and stripped[alone_at] == wanted[0]:
        last = _window_last(stripped, alone_at, wanted)
        return None if last is None else (alone_at, last)
    return _edit_span(stripped, edit, wanted)


def spliced_lines(window: Sequence[str], edit: Edit) -> tuple[int, int, list[str]]:
    """How `edit` changes the lines `window` its match selected: `window[start:stop]` is
    replaced by the returned lines (the edit's text indented like the window's first line;
    none when the text is blank, whatever the kind)."""
    anchor = window[0]
    new = reindent(edit.text, anchor[: _indent_width(anchor)])
    if not any(text.strip() for text in new):
        return 0, len(window), []
    if edit.kind == "replacement":
        return 0, len(window), new
    if edit.kind == "prepend":
        return 0, 0, new
    return len(window), len(window), new


def _spliced(
    texts: list[str], stripped: list[str], span: tuple[int, int], edit: Edit
) -> tuple[list[str], list[str]]:
    """`texts` (and their stripped copies) with the edit made on lines span[0]..span[1]."""
    first, last = span
    start, stop, new = spliced_lines(texts[first : last + 1], edit)
    cut = (first + start, first + stop)
    keys = [text.strip() for text in new]
    return (
        [*texts[: cut[0]], *new, *texts[cut[1] :]],
        [*stripped[: cut[0]], *keys, *stripped[cut[1] :]],
    )


def _windows_as_written(have: Sequence[str], match: str) -> list[tuple[int, int]]:
    """Where the match occurs as sglang looks: stripped lines, blank lines kept, contiguous.

    `have`: the source's lines, whitespace-stripped.
    """
    wanted = [line.strip() for line in split_lines(match.strip())]
    size = len(wanted)
    return [
        (start, start + size - 1)
        for start in range(len(have) - size + 1)
        if list(have[start : start + size]) == wanted
    ]


def _edit_label(context: EditContext, index: int, count: int, edit: Edit) -> str:
    where = f"{context.yaml_path}:{edit.line}" if context.yaml_path else f"line {edit.line}"
    return f"{context.target}: edit {index} of {count} ({where})"


def _mismatch_message(
    lines: Sequence[SourceLine],
    nonblank: Sequence[int],
    wanted: Sequence[str],
    starts: Sequence[int],
    *,
    label: str,
    filename: str,
) -> str:
    span = f"{filename}:{lines[0].origin}-{lines[-1].origin}" if lines else filename
    head = [
        f"{label} matched {len(starts)} times in {span}; expected exactly 1.",
        "match (whitespace-stripped, blank lines ignored):",
        *(f"    {text}" for text in wanted),
    ]
    windows: list[tuple[int, float | None]]
    if starts:
        windows = [(start, None) for start in starts]
        head.append("matching windows:")
    else:
        windows = _nearest_windows(lines, nonblank, wanted)
        head.append("nearest windows:" if windows else "nearest windows: none (source is empty)")
    for start, score in windows:
        chosen = [lines[i] for i in nonblank[start : start + len(wanted)]]
        first, last = chosen[0].origin, chosen[-1].origin
        where = f"{filename}:{first}" if first == last else f"{filename}:{first}-{last}"
        head.append(f"  {where}" + ("" if score is None else f" (similarity {score:.0%})"))
        head.extend(f"    {line.origin:>4} | {line.text.rstrip()}" for line in chosen)
    return "\n".join(head)


def _nearest_windows(
    lines: Sequence[SourceLine], nonblank: Sequence[int], wanted: Sequence[str]
) -> list[tuple[int, float | None]]:
    if not nonblank:
        return []
    size = min(len(wanted), len(nonblank))
    scored: list[tuple[float, int]] = []
    for start in range(len(nonblank) - size + 1):
        window = [lines[i].text.strip() for i in nonblank[start : start + size]]
        ratios = [
            difflib.SequenceMatcher(None, have, want).ratio()
            for have, want in zip(window, wanted, strict=False)
        ]
        scored.append((sum(ratios) / len(wanted), start))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(start, score) for score, start in scored[:NEAREST_WINDOW_COUNT]]


def _definition_body(source: NumberedSource, *, context: EditContext) -> tuple[list[ast.stmt], int]:
    """The body statements of the one definition in `source`, and the line offset to apply."""
    text = source.text
    indented = bool(text) and text[0] in " \t"
    try:
        tree = ast.parse(f"if 1:\n{text}" if indented else text)
    except SyntaxError as exc:
        raise PatchApplicationError(
            f"{context.target}: preamble{_preamble_where(context)}: the edited source does "
            f"not parse ({exc.msg}), so the top of the function body cannot be found"
        ) from exc
    body = tree.body[0].body if indented and tree.body else tree.body  # type: ignore[attr-defined]
    definition = body[0] if body else None
    if not isinstance(definition, ast.FunctionDef | ast.AsyncFunctionDef):
        raise PatchApplicationError(
            f"{context.target}: preamble{_preamble_where(context)}: the source is not a "
            "function definition"
        )
    return list(definition.body), 1 if indented else 0


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _source_lines(source: str) -> list[str]:
    """The lines of source text, line ends dropped (split as Python's tokenizer does)."""
    return split_lines(source)


def _indent_width(text: str) -> int:
    return len(text) - len(text.lstrip())


def _preamble_where(context: EditContext) -> str:
    return f" ({context.yaml_path})" if context.yaml_path else ""
