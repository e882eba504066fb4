"""The helpers of a function in ``.source``: the generated code of each plain Python
function whose transformed version it calls, and of theirs, after the function's own.

A call by a global name of a plain Python function (or a decorated one) is resolved when
the caller is transformed (``Callees`` in compile/calls.py): the helper is transformed
then too, and the caller's entry lists it (``Entry.helpers``). So every helper reachable
that way is known, transformed, before the function first runs, and is shown whether it
has run or not. A callable known only at run time (a function passed as an argument, a
method of an object) goes through ``ad.rev`` and is not listed: which one it is depends
on the call.

Order: breadth first, each function's helpers in the order its code calls them, so the
function's own helpers come first; a helper reached twice is shown once, at its first
place. Each is the code that runs when it is called from generated code (its
preaccumulated rules included), not its paper-transform version nor its specialised code.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import AstadError
from .entry import Entry


def helper_source(entry: Entry, transformed: Callable) -> str:
    """The text ``.source`` adds after the function of ``entry``: a blank line, then the
    code of each helper under a comment naming it and the call, or '' if there is none.
    ``transformed(fn, preaccumulate)`` gives a helper's current entry (built now if a
    rebinding made it stale)."""
    root = entry.function()
    seen = {root}
    pieces, queue = [], [(entry, None)]
    while queue:
        caller_entry, caller = queue.pop(0)
        for ref, preaccumulate, line in caller_entry.helpers:
            helper = ref()
            if helper is None or helper in seen:
                continue
            seen.add(helper)
            try:
                found = transformed(helper, preaccumulate)
            except AstadError:  # (changed since into code astad refuses: ad.rev says so)
                continue
            where = f"at line {line}" if line is not None else ""
            called = f"called by {caller} {where}" if caller else f"called {where}"
            pieces.append(f"# helper: {helper.__name__} ({called.rstrip()})\n"
                          + found.transformed_source.rstrip("\n"))
            queue.append((found, helper.__name__))
    return "".join(f"\n{piece}\n" for piece in pieces)
