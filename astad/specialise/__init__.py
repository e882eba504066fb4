"""Code specialised for its arguments' kinds: when every argument is a float, a list of
floats, a list of lists of floats or a dataclass of floats, each float a local of its own
(and its tape index, or its tangent, another), no duals at all.

- ``specialise`` writes, for the normalized tree of a function, its value-and-gradient
  code (straight_line.py: no tape where there is no loop; loops.py: loops on a flat
  tape) and its forward-mode code (forward.py);
- value_kinds.py says what the writers know of each value; expressions.py writes expressions;
  inline.py inlines the helpers, methods and local functions a function calls;
  comprehensions.py writes ``sum`` of a generator as its loop; lists.py the lists the code
  makes and writes;
- ``Writer`` (loops.py) is the writers' base class: statements there, expressions in
  expressions.py, inlined calls in inline.py; a ``Scope`` is one function body being
  written (the user's function, or one inlined call of a helper); a writer that meets
  what it cannot specialise says so (``CannotSpecialise``), and the function then runs
  the taped code alone.
"""
from __future__ import annotations

from .expressions import CannotSpecialise
from .loops import Writer
from .scope import Scope
from .forward import write_forward
from .loops import write_scalar_loops
from .straight_line import write_straight_line

__all__ = ["specialise", "CannotSpecialise", "Scope", "Writer"]


def specialise(node, fn, local_names: set, filename: str, dependencies: list,
               preaccumulate: bool = True, as_method: bool = False) -> tuple:
    """``(tapeless, forward)`` for the normalized tree ``node`` of ``fn``, before the
    transform changes it: the value-and-gradient code ``(ast.FunctionDef, text)`` and the
    forward-mode code ``(ast.FunctionDef, text, unchecked)``, each None where it cannot
    be written; the bindings they were written for are added to ``dependencies``."""
    if as_method:
        return None, None
    tapeless = None
    if preaccumulate:
        tapeless = write_straight_line(node, fn, local_names, filename, dependencies) or \
            write_scalar_loops(node, fn, local_names, filename, dependencies)
    return tapeless, write_forward(node, fn, local_names, filename, dependencies)
