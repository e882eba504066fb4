"""Does a dual depend on a differentiated input? Asked only where the answer decides
between a refusal and a write: a value computed only from arrays made inside the
function (``c.copy()``, ``np.zeros``: constants of every level) may be written into a
plain array, its derivative being 0.

A reverse level answers from its tape: the entries reached from the value's through
their parents, an input's slot being ``()`` and a constant's ``CONSTANT_ENTRY``; a
forward level from the tangent (not a plain zero)."""
from __future__ import annotations

import numpy as np

from .array_dual import ARRAY_DUALS, CONSTANT_ENTRY, index_of
from .duals import DUAL_TYPES


def carries_derivative(value) -> bool:
    """Does the dual ``value`` depend on a differentiated input at any of its levels?"""
    while type(value) in DUAL_TYPES:
        handle = value.t
        if type(handle) is not list:  # forward mode: a tangent that is not zero
            d = value.d
            if type(d) in DUAL_TYPES or np.any(d != 0):
                return True
        elif _reaches_input(handle, index_of(value) if type(value) in ARRAY_DUALS
                            else value.i):
            return True
        value = value.v
    return False


def _reaches_input(tape, k) -> bool:
    seen, todo = set(), [k]
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        entry = tape[k]
        if entry is CONSTANT_ENTRY:
            continue
        if entry == ():  # an input slot
            return True
        if len(entry) == 3 and callable(entry[0]):  # an array entry: (position, parent)s
            for part in entry[1]:
                slot = part[1] if type(part) is tuple and len(part) == 2 else part
                slot = slot[0] if type(slot) is tuple else slot
                if type(slot) is not int:
                    return True  # (a form not known here: taken as differentiated)
                todo.append(slot)
        else:
            todo.extend(entry[0::2])
    return False
