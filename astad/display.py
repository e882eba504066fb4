"""Showing a function's source beside the code astad generated from it.

    astad.display.show(loss)          # in a terminal: original and generated code
    astad.display.html(loss)          # an HTML string, the two side by side

In a notebook a decorated function displays itself this way: :func:`attach` gives it a
``_repr_html_`` attribute, which IPython's HTML formatter finds with ``getattr`` on the
function object. (IPython's plain-text printer has its own printer for functions, looked
up by type, so a ``_repr_pretty_`` attribute on a function would never be called; the
text form stays ``<function loss at 0x...>``.)

Both forms put each line of the original on the row of the generated statements that come
from it (astad writes the original line as a comment above them), keep the generated
function first and the other functions astad generated after it (the fused ``_lineN``
rules, the code specialised for floats, then the helpers the function calls: ``f.source``
ends with them, compile/helpers.py), folded in HTML. A line too long for its column
continues on the next row: the terminal breaks it between words, the HTML wraps it
(inside a word only when the word alone is too wide). Locations in a notebook are
IPython's own names for cells (``Cell In[22], line 5``).

The HTML carries all its styling inline (notebook front ends keep ``style`` attributes
and drop ``<style>`` elements of untrusted output) and sets the font of every code
element itself: JupyterLab's stylesheet would otherwise give ``<pre>`` blocks its own
font and let them wrap. Syntax highlighting uses pygments when it is installed (it comes
with IPython).
"""
from __future__ import annotations

import ast
import html as _html
import os
import shutil
import sys
import textwrap
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from .errors import api_boundary, notebook_cell

__all__ = ["show", "html", "attach", "sources"]

F = TypeVar("F", bound=Callable[..., Any])


def _decorated(f: Callable[..., Any]) -> tuple[Any, str]:
    """``(f, the code astad generates from it)``: a decorated function's ``.source``
    (astad.grad(f)'s too), or a plain function's, transformed now."""
    if isinstance(getattr(f, "source", None), str) and hasattr(f, "__wrapped__"):
        return f, f.source
    if not isinstance(f, types.FunctionType):
        raise TypeError(f"astad.display needs a Python function (decorated with "
                        f"astad.reverse_diff or not), got {f!r}")
    from .compile import calls
    return f, calls.readable_source(f, calls.transformed(f), True)


@dataclass
class _Parts:
    original: list      # (line number, text) of the definition, decorators included
    main: list          # the lines of the generated function
    helpers: list       # (name, lines) of each generated helper, in order
    title: str          # the function's name and where it is defined


def sources(f: Callable[..., Any]) -> tuple[list[tuple[int, str]], str, str]:
    """``(original, generated, title)`` for a decorated (or plain) function ``f``.

    ``original`` is a list of ``(line_number, text)`` pairs (empty when the source
    cannot be read), ``generated`` the text of ``f.source``, ``title`` the function's
    name with where it is defined (``model.py:7``, or ``Cell In[22], line 5`` in a
    notebook)."""
    decorated, source = _decorated(f)
    # (astad.grad(f) has the source of f and of its Hessian-vector products: f's lines)
    function = decorated if hasattr(decorated, "__code__") else decorated.__wrapped__
    original, location = _original(function)
    name = getattr(decorated, "__qualname__", function.__code__.co_name)
    title = f"{name} ({location})" if location else name
    return original, source.rstrip("\n"), title


def _parts(f) -> _Parts:
    original, generated, title = sources(f)
    main, helpers = _split(generated)
    return _Parts(original, main, helpers, title)


def _original(decorated) -> tuple[list, str]:
    """The definition's numbered lines as the file has them now, and its location."""
    from .errors import AstadError
    from .front.source import definition_lines
    code = decorated.__code__  # the code that runs (and that astad transformed)
    try:
        first, lines = definition_lines(decorated)
    except (AstadError, OSError, TypeError):
        return [], ""
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()),
                 default=0)
    return ([(first + k, line[indent:]) for k, line in enumerate(lines)],
            location(code.co_filename, first))


def location(filename: str, line: int) -> str:
    """Where line ``line`` of ``filename`` is, as the user knows it: a notebook cell as
    IPython names it in its own tracebacks (``Cell In[22], line 5``), else the file,
    relative to the working directory when it is below it (``model.py:7``)."""
    cell = notebook_cell(filename)
    if cell is not None:
        return f"{cell}, line {line}"
    if os.path.basename(os.path.dirname(filename)).startswith("ipykernel_") or \
            filename.startswith("<ipython-input-"):
        return f"notebook cell, line {line}"  # a cell of a kernel this process is not
    return f"{_short_path(filename)}:{line}"


def _short_path(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return rel if not rel.startswith(".." + os.sep) and len(rel) < len(filename) else filename


def _split(generated: str) -> tuple[list, list]:
    """The generated function's lines, and each helper after it as ``(name, lines)``:
    every top-level statement of the generated source with the comments above it."""
    lines = generated.split("\n")
    try:
        body = ast.parse(generated).body
    except SyntaxError:
        return lines, []
    if not body:
        return lines, []
    chunks, start = [], 0
    for node in body[1:]:
        first = node.lineno - 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            first = node.decorator_list[0].lineno - 1
        while first > start and lines[first - 1].startswith("#"):
            first -= 1  # the comments above it belong to it
        chunks.append((start, first))
        start = first
    chunks.append((start, len(lines)))
    blocks = [_trim(lines[a:b]) for a, b in chunks]
    names = [getattr(node, "name", type(node).__name__) for node in body]
    # f.source shows the paper's transform first and the code that runs after it, under
    # the same name
    names[1:] = [f"{name} as it runs" if name == names[0] else name for name in names[1:]]
    return blocks[0], list(zip(names[1:], blocks[1:]))


def _trim(lines: list) -> list:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _anchors(original: list, generated: list) -> list:
    """(original index, generated index) pairs of lines to print on the same row: the
    ``def`` lines, and each original statement with the comment astad put above its
    rewrite (the comment is the statement's text, with " ..." when it spans lines).
    Matched in order, so a repeated statement pairs with its own occurrence."""
    pairs: list[tuple[int, int]] = []
    start = next((k for k, text in enumerate(original)
                  if text.lstrip().startswith(("def ", "async def "))), None)
    if start is None or not generated or not generated[0].startswith("def "):
        return pairs
    pairs.append((start, 0))
    position = start
    for k, line in enumerate(generated[1:], start=1):
        stripped = line.strip()
        if not stripped.startswith("# ") or stripped.startswith("# line "):
            continue
        statement = stripped[2:].removesuffix(" ...")
        match = next((j for j in range(position + 1, len(original))
                      if original[j].strip() == statement), None)
        if match is not None:
            pairs.append((match, k))
            position = match
    return pairs


def _aligned(left: list, right: list, pairs: list) -> tuple[list, set]:
    """Rows of (left, right) items in which each anchored pair starts a row, and the
    indices of those rows. Between two anchors the items go side by side, the shorter
    side padded with None. An item may be a list of rows of its own (a line folded to
    fit): the padding keeps the next anchor level."""
    rows, starts = [], set()
    i = j = 0
    for a, b in pairs + [(len(left), len(right))]:
        left_rows = [row for item in left[i:a] for row in _as_rows(item)]
        right_rows = [row for item in right[j:b] for row in _as_rows(item)]
        gap = max(len(left_rows), len(right_rows))
        rows += [(left_rows[n] if n < len(left_rows) else None,
                  right_rows[n] if n < len(right_rows) else None) for n in range(gap)]
        starts.add(len(rows))
        i, j = a, b
    return rows, starts - {0, len(rows)}


def _as_rows(item) -> list:
    return item if isinstance(item, list) else [item]


# -- terminal -------------------------------------------------------------------------------
@api_boundary
def show(f: Callable[..., Any], file: TextIO | None = None, *, width: int | None = None,
         layout: str = "auto") -> None:
    """Print ``f``'s original source and the code astad generated from it.

    ``layout`` is ``"side"`` (two columns), ``"stacked"`` (original above generated) or
    ``"auto"``: side by side when the original and the generated function fit in
    ``width`` columns, but for one line (or one in ten) that is broken (by default the
    terminal's width, or 100 when ``file`` is not a terminal). The original is printed
    with its line numbers in its file: the generated code's comments refer to them. The
    helpers the generated function calls come after it. A line too long for its column
    is broken between words, never inside one, and continues on the next row, indented.
    """
    if layout not in ("auto", "side", "stacked"):
        raise ValueError(f"layout must be 'auto', 'side' or 'stacked', got {layout!r}")
    out = sys.stdout if file is None else file
    parts = _parts(f)
    if width is None:
        isatty = getattr(out, "isatty", None)
        width = shutil.get_terminal_size((100, 24)).columns if isatty and isatty() else 100
    original = parts.original
    digits = len(str(original[-1][0])) if original else 1
    left = [f"{n:>{digits}}  {text}".rstrip() for n, text in original] or \
        ["(source not available)"]
    left_title = f"original: {parts.title}"
    right_title = "generated by astad"
    left_width = max(len(line) for line in left + ["original"])  # the title may overflow
    available = width - left_width - 3
    # side by side when the generated function fits beside the original, but for a few
    # lines that can be broken between words
    side = layout == "side" or (layout == "auto" and available >= 40 and sum(
        len(line) > available for line in parts.main) <= max(1, len(parts.main) // 10))
    text = []
    if side:
        right = [_fold(line, max(available, 20)) for line in parts.main]
        used = max([len(row) for rows in right for row in rows] + [len(right_title)])
        rows = [(left_title, right_title)]
        if len(left_title) > left_width:  # a long file name: the title on a line of its own
            rows = [(left_title, ""), ("original", right_title)]
        rows.append(("-" * left_width, "-" * used))
        pairs = _anchors([line for _, line in original], parts.main) if original else []
        rows += [(a or "", b or "") for a, b in _aligned(left, right, pairs)[0]]
        text += [(f"{a:<{left_width}} | {b}" if b or len(a) <= left_width else a).rstrip()
                 for a, b in rows]
    else:
        right = [row for line in parts.main for row in _fold(line, width)]
        left = [row for line in left for row in _fold(line, width)]
        rule = "-" * min(max(len(line) for line in left + right + [left_title]), width)
        text += [left_title, rule, *left, "", right_title, rule, *right]
    if parts.helpers:
        rows = [row for _, lines in parts.helpers for line in lines + [""]
                for row in _fold(line, width)]
        heading = textwrap.wrap(_helpers_heading(parts.helpers), width,  # (words whole)
                                subsequent_indent="    ", break_long_words=False,
                                break_on_hyphens=False)
        text += ["", *heading, "-" * min(max(len(row) for row in rows + heading), width),
                 *_trim(rows)]
    print("\n".join(text), file=out)


def _helpers_heading(helpers: list) -> str:
    # the helpers the function calls come last, the first under "# helper: ..."
    first = next((k for k, (_, lines) in enumerate(helpers)
                  if lines and lines[0].startswith("# helper: ")), len(helpers))
    names = ", ".join(name for name, _ in helpers[:first])
    if first < len(helpers):
        called = ", ".join(name for name, _ in helpers[first:])
        names = f"{names}; the helpers it calls: {called}" if names else \
            f"the helpers it calls: {called}"
    count = sum(len(lines) for _, lines in helpers)
    what = "function" if len(helpers) == 1 else "functions"
    return f"{len(helpers)} more {what} generated by astad ({count} lines): {names}"


def _fold(line: str, width: int) -> list:
    """``line`` as rows of at most ``width`` characters, broken at spaces outside string
    literals, each continuation indented four more than the line: code continues after a
    backslash, a comment as a comment. A word longer than the row is left whole."""
    indent = len(line) - len(line.lstrip())
    rows, rest, start = [], line, indent + 1
    while len(rest) > width:
        cut, in_comment = _break_before(rest, width - 2, start)
        if cut is None:
            break
        rows.append(rest[:cut].rstrip() + ("" if in_comment else " \\"))
        lead = " " * (indent + 4) + ("# " if in_comment else "")
        rest, start = lead + rest[cut:].lstrip(), len(lead) + 1
    return rows + [rest]


def _break_before(text: str, limit: int, start: int) -> tuple:
    """(k, in a comment) for the last space ``text[k]`` with ``start <= k < limit`` that is
    not inside a string literal, or (None, False)."""
    quote, comment, best = None, False, (None, False)
    for k, char in enumerate(text[:limit]):
        if quote:
            if char == quote and text[k - 1] != "\\":
                quote = None
        elif comment or char not in "'\"#":
            if char == " " and k >= start:
                best = (k, comment)
        elif char == "#":
            comment = True
        else:
            quote = char
    return best


# -- HTML -----------------------------------------------------------------------------------
# (single quotes: these go inside style="..." attributes)
_MONO = ("ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', "
         "'Liberation Mono', monospace")
_SANS = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif"
_ROOT = (f"font-family: {_SANS}; color: #1f2328; font-size: 13px; line-height: 1.4; "
         "text-align: left; margin: 0.2em 0;")
# Long lines wrap rather than scroll: the two columns are read against each other row by
# row, and a sideways scroll moves one column only, by a scrollbar at the bottom of its
# block (far below a long function's first lines, hidden until used on some systems).
# Wrapped, every character is on screen. The rows stay level because both columns take
# their rows from the one grid (subgrid): a row is as tall as its taller side. A
# continuation is indented four columns past its line's indentation, past the line
# numbers, beside a thin bar.
_GRID = ("display: grid; grid-template-columns: fit-content(50%) minmax(0, 1fr); "
         "column-gap: 0.8em; row-gap: 0; align-items: start;")
_CAPTION = ("font-family: inherit; font-size: 0.9em; font-weight: 600; color: #57606a; "
            "white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0;")
_BOX = ("overflow-x: auto; min-width: 0; background: #f6f8fa; border-radius: 4px; "
        "padding: 0.4em 0.6em; box-sizing: border-box;")
_COLUMN = ("display: grid; grid-template-rows: subgrid; grid-template-columns: minmax(0, 1fr);"
           " align-self: stretch;")
_WRAP = "white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere;"
_PRE = (f"font-family: {_MONO}; font-size: 12px; margin: 0; padding: 0; "
        f"background: transparent; color: #1f2328; border: 0; {_WRAP} min-width: 0; "
        "text-align: left; display: block;")
_PRE_COLUMN = ("display: grid; grid-row: 1 / -1; grid-template-rows: subgrid; "
               "grid-template-columns: minmax(0, 1fr);")
_ROW = (f"display: block; font-family: {_MONO}; font-size: inherit; min-height: 1.5em; "
        f"line-height: 1.5em; {_WRAP} padding: 0; margin: 0; color: inherit; border: 0; "
        "min-width: 0; align-self: start;")  # (its own height: the bar marks its own lines)
_MARK = "#afb8c1"  # (the bar beside continuation lines)
_START = " box-shadow: inset 0 1px 0 #d8dee4;"  # drawn inside the row: the height stays
_NUMBER = "color: #8c959f; user-select: none;"
_SUMMARY = "cursor: pointer; font-size: 0.9em; color: #57606a; margin-top: 0.4em;"


def _highlighted_rows(lines: list, highlight: bool) -> list:
    """The HTML of each line of code (escaped; coloured by pygments if installed and
    ``highlight``), lexed as one text so that strings across lines stay strings."""
    try:
        if not highlight:
            raise ImportError
        from pygments import lex  # type: ignore[import-untyped]
        from pygments.lexers import PythonLexer  # type: ignore[import-untyped]
        from pygments.styles import get_style_by_name  # type: ignore[import-untyped]
    except ImportError:
        return [_html.escape(line) for line in lines]
    style = get_style_by_name("default")
    rows, current = [], []
    for kind, value in lex("\n".join(lines) + "\n", PythonLexer()):
        css = _token_css(style, kind)
        for k, piece in enumerate(value.split("\n")):
            if k:
                rows.append("".join(current))
                current = []
            if piece:
                text = _html.escape(piece)
                current.append(f'<span style="{css}">{text}</span>' if css else text)
    return rows[:len(lines)]


def _token_css(style, kind) -> str:
    spec = style.style_for_token(kind)
    css = [f"color: #{spec['color']};"] if spec["color"] else []
    css += ["font-weight: bold;"] if spec["bold"] else []
    css += ["font-style: italic;"] if spec["italic"] else []
    return " ".join(css)


def _pre(rows: list, kind: str, starts: frozenset = frozenset(), column: bool = False) -> str:
    """A block of code: one element per row (None: an empty row that keeps the two
    columns level), each row a ``(html, indent)`` pair: its continuations start at
    ``indent`` characters (the line numbers and the line's own indentation) plus four.
    A hairline above each row in ``starts`` (where an original line and the code
    generated from it begin); ``column``: the block is one of the two side by side."""
    body = "".join(f'<code class="astad-row" style="{_ROW}{_hanging(row)}'
                   f'{_START if k in starts else ""}">{row[0] if row else ""}</code>'
                   for k, row in enumerate(rows))
    style = _PRE + (_PRE_COLUMN if column else "")
    return f'<pre class="astad-code astad-{kind}" style="{style}">{body}</pre>'


def _hanging(row) -> str:
    """The style of a row's continuation lines: a hanging indent, and a bar beside the
    continuations only (from the second line down; a row gets no taller than its own
    text: align-self: start)."""
    if not row:
        return " background: transparent;"
    indent = row[1] + 4
    return (f" padding-left: {indent}ch; text-indent: -{indent}ch; background: "
            f"linear-gradient({_MARK}, {_MARK}) {indent - 2.5}ch 1.5em / 1px "
            "calc(100% - 1.5em) no-repeat transparent;")


def _indent(text: str) -> int:
    """Where a continuation of ``text`` is indented from: its indentation, but never
    more than 16 columns (deep code in a narrow column keeps room for its text)."""
    return min(len(text) - len(text.lstrip(" ")), 16)


def html(f: Callable[..., Any], *, highlight: bool = True) -> str:
    """An HTML fragment with ``f``'s original source and the generated code side by side,
    row by row, long lines wrapped, with the other generated functions folded below,
    syntax-highlighted with pygments if installed."""
    parts = _parts(f)
    texts = [text for _, text in parts.original]
    digits = len(str(parts.original[-1][0])) if parts.original else 1
    left = [(f'<span class="astad-number" style="{_NUMBER}">{n:>{digits}}  </span>{code}',
             digits + 2 + _indent(text))
            for (n, text), code in zip(parts.original, _highlighted_rows(texts, highlight))] \
        or [(_html.escape("(source not available)"), 0)]
    right = [(code, _indent(text))
             for text, code in zip(parts.main, _highlighted_rows(parts.main, highlight))]
    pairs = _anchors(texts, parts.main) if parts.original else []
    rows, starts = _aligned(left, right, pairs)
    title = (f'<div class="astad-title" style="{_CAPTION} margin-bottom: 0.2em;">'
             f"{_html.escape(parts.title)}</div>")
    column = f"{_BOX} {_COLUMN} grid-row: 2 / span {len(rows)};"
    grid = (f'<div class="astad-columns" style="{_GRID}">'
            f'<div class="astad-caption" style="{_CAPTION} margin-bottom: 0.2em;">original'
            f'</div><div class="astad-caption" style="{_CAPTION} margin-bottom: 0.2em;">'
            f'generated by astad</div><div class="astad-pane" style="{column} '
            f'grid-column: 1;">{_pre([a for a, _ in rows], "original", starts, True)}</div>'
            f'<div class="astad-pane" style="{column} grid-column: 2;">'
            f'{_pre([b for _, b in rows], "generated", starts, True)}</div></div>')
    helpers = ""
    if parts.helpers:
        lines = [line for _, block in parts.helpers for line in block + [""]][:-1]
        code = [(row, _indent(text))
                for text, row in zip(lines, _highlighted_rows(lines, highlight))]
        helpers = (f'<details class="astad-helpers"><summary style="{_SUMMARY}">'
                   f"{_html.escape(_helpers_heading(parts.helpers))}</summary>"
                   f'<div class="astad-pane" style="{_BOX} margin-top: 0.2em;">'
                   f'{_pre(code, "helpers")}</div></details>')
    return f'<div class="astad-source" style="{_ROOT}">{title}{grid}{helpers}</div>'


# -- notebooks ------------------------------------------------------------------------------
def attach(fn_wrapper: F) -> F:
    """Give a decorated function a ``_repr_html_`` attribute (``html(fn_wrapper)``), so
    that a notebook cell ending in it shows the original and generated code. Returns
    ``fn_wrapper``. The attribute holds the function through a weak reference (no
    reference cycle) and returns None (plain-text display) if anything goes wrong."""
    ref = weakref.ref(fn_wrapper)

    def _repr_html_():
        target = ref()
        if target is None:
            return None
        try:
            return html(target)
        except Exception:
            return None

    fn_wrapper._repr_html_ = _repr_html_  # type: ignore[attr-defined]
    return fn_wrapper
