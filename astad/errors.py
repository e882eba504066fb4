"""Every error astad raises derives from :class:`AstadError`.

Errors about the user's code carry a location (file, line, column) and print the
offending source line with a caret under the column, like Python's own SyntaxError.
"""
from __future__ import annotations

import linecache
import os
import sys


class AstadError(Exception):
    """Base class of every error raised by astad."""


def format_location(filename: str, lineno: int | None, col: int | None) -> str:
    """``file:line:col`` followed by the source line and a caret (when readable)."""
    if lineno is None:
        return f"{filename}"
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
