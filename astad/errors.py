"""Every error astad raises derives from :class:`AstadError`.

Errors about the user's code carry a location (file, line, column) and print the
offending source line with a caret under the column, like Python's own SyntaxError.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
import sysconfig
import types


class AstadError(Exception):
    """Base class of every error raised by astad."""


def notebook_cell(filename: str) -> str | None:
    """``Cell In[22]``, IPython's own name for the cell compiled under ``filename`` (as its
    tracebacks say), or None outside a notebook or for another file."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    compiler = getattr(shell, "compile", None)
    named = None
    if hasattr(compiler, "format_code_name"):  # IPython >= 8
        named = compiler.format_code_name(filename)
    elif filename in getattr(compiler, "_filename_map", {}):
        named = ("Cell", f"In[{compiler._filename_map[filename]}]")
    return f"{named[0]} {named[1]}" if named else None


def format_location(filename: str, lineno: int | None, col: int | None) -> str:
    """``file:line:col`` (in a notebook ``Cell In[5], line 7, column 16``) followed by the
    source line and a caret (when readable)."""
    if lineno is None:
        return f"{filename}"
    cell = notebook_cell(filename)
    if cell is not None:
        where = f"{cell}, line {lineno}" + (f", column {col + 1}" if col is not None else "")
    else:
        where = f"{filename}:{lineno}" + (f":{col + 1}" if col is not None else "")
    line = linecache.getline(filename, lineno).rstrip("\n")
    if not line:
        return where
    stripped = line.lstrip()
    indent = len(line) - len(stripped)
    text = f"{where}\n    {stripped}"
    if col is not None and col >= indent:
        text += "\n    " + " " * (col - indent) + "^"
    return text


class LocatedError(AstadError):
    """An error about a construct at a known place in the user's source."""

    def __init__(self, message: str, filename: str, lineno: int | None, col: int | None = None):
        self.message = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        super().__init__(f"{message}\n  at {format_location(filename, lineno, col)}")


class UnsupportedSyntaxError(LocatedError):
    """The function uses a Python construct astad cannot differentiate."""

    def __init__(self, construct: str, filename: str, lineno: int | None, col: int | None,
                 hint: str = ""):
        self.construct = construct
        message = f"astad cannot differentiate code that uses {construct}"
        if hint:
            message += f": {hint}"
        super().__init__(message, filename, lineno, col)


class NotDifferentiableError(LocatedError):
    """An active (differentiated) value reached something astad cannot differentiate.

    Made while a differentiation runs, it ends that differentiation even if the user's
    code catches it (runtime/duals.py: ``level``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        note_refusal(self)


def note_refusal(error) -> None:
    """Replaced by runtime/duals.py, which keeps the refusals of running differentiations."""


class SourceUnavailableError(AstadError):
    """The source text of a function cannot be read, so it cannot be transformed."""


class InputError(AstadError):
    """The arguments or cotangents given to ``.grad``/``.vjp`` are not usable."""


class CompileWarning(UserWarning):
    """A function asked to compile (``compile="numba"``) that runs as Python code
    instead, and why (docs/compiled.md)."""


class SignatureError(InputError, TypeError):
    """The arguments given to ``.grad``/``.vjp`` do not fit the function's signature: the
    TypeError Python would give for the call (an AstadError too, so tools that report
    astad's errors, such as ``python -m astad check``, report it as one)."""


ASTAD_DIR = os.path.dirname(os.path.abspath(__file__))
RULE_FILENAME = "<astad rule>"  # the file name of rules compiled from astad's templates


def _library_file(filename: str) -> bool:
    """Frames of astad itself, of its rule templates and of numpy."""
    return (filename.startswith(ASTAD_DIR) or filename == RULE_FILENAME
            or f"{os.sep}numpy{os.sep}" in filename)


def user_location() -> tuple:
    """(file, line, column) of the innermost frame of the user's code calling astad: for
    generated code that is the user's own line (compile/pipeline.py keeps their line numbers)."""
    frame = sys._getframe(1)
    while frame is not None and _library_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ("<unknown>", None, None)
    col = None
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None and frame.f_lasti >= 0:
        try:
            col = list(positions())[frame.f_lasti // 2][2]
        except (IndexError, TypeError):
            col = None
    return (frame.f_code.co_filename, frame.f_lineno, col)


# -- Tracebacks that show the user's code -------------------------------------------------
# As JAX does, the public entry points (``api_boundary``) take astad's own frames out of
# the traceback of an exception that leaves them, and the standard library's frames that
# astad called (the ast module's visitors): what remains is the user's code, generated code
# included (it carries the user's file and lines). An exception raised inside astad
# that is not an AstadError is a bug of astad's: its traceback is left whole.

TRACEBACK_FILTERING = "ASTAD_TRACEBACK_FILTERING"
_STDLIB = tuple({os.path.normcase(sysconfig.get_paths()[key]) + os.sep
                 for key in ("stdlib", "platstdlib")})


def traceback_filtering() -> bool:
    """Whether astad hides its frames: yes unless ASTAD_TRACEBACK_FILTERING is ``off``
    (read at each error, so setting it in a running notebook takes effect)."""
    return os.environ.get(TRACEBACK_FILTERING, "on").strip().lower() not in (
        "off", "0", "no", "false")


def _own_file(filename: str) -> bool:
    return filename.startswith(ASTAD_DIR + os.sep) or filename == RULE_FILENAME


def _called_library(filename: str) -> bool:
    """The standard library (not its site-packages), which astad calls in its own code."""
    name = os.path.normcase(filename)
    return (name.startswith(_STDLIB) and "site-packages" not in name) \
        or filename.startswith("<frozen ")


def _shown_entries(tb) -> tuple[list, bool]:
    """The traceback entries to show, and whether the innermost entry is astad's (its
    own frame, or the library's called by it)."""
    shown, inside = [], False
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if _own_file(filename) or (inside and _called_library(filename)):
            inside = True
        else:
            inside = False
            shown.append(tb)
        tb = tb.tb_next
    return shown, inside


def _linked(entries: list):
    chain = None
    for entry in reversed(entries):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def hide_own_frames(error: BaseException) -> None:
    """Take astad's frames out of ``error``'s traceback (and of the exceptions chained to
    it), caught by an entry point that re-raises it with a bare ``raise``."""
    if not traceback_filtering():
        return
    tb = error.__traceback__
    shown, inside = _shown_entries(tb)
    if inside and not isinstance(error, AstadError):
        return  # a crash inside astad: its frames are what a bug report needs
    if sys.version_info < (3, 11):
        # 3.10 re-raises the traceback it caught, whose first entry is the entry point's
        # own frame: only what follows it can change (that one frame of astad's stays)
        tb.tb_next = _linked(shown)
    else:
        error.__traceback__ = _linked(shown)
    seen = {id(error)}
    chained = [error.__cause__, error.__context__]
    while chained:
        other = chained.pop()
        if other is not None and id(other) not in seen:
            seen.add(id(other))
            other.__traceback__ = _linked(_shown_entries(other.__traceback__)[0])
            chained += [other.__cause__, other.__context__]


def api_boundary(fn):
    """``fn`` as a public entry point: an exception leaving it shows the user's frames
    only (``hide_own_frames``)."""
    @functools.wraps(fn)
    def entry_point(*args, **kwargs):
        __tracebackhide__ = True  # (pytest's own filter: what check_grads' failures need)
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            hide_own_frames(error)
            raise
    return entry_point
