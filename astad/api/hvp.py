"""Hessian-vector products written out: reverse mode over forward mode's code for floats.

``jvp(grad(f), (x,), (v,))`` is ``(grad f(x), H(x) v)``. Forward mode's code for floats
(specialise/forward.py) computes ``t(x, v) = grad f(x) . v`` with plain floats; one reverse
pass over that code (the specialised writer, specialise/loops.py) gives, with respect to ``x``,
``H(x) v``, and with respect to ``v``, since ``t`` is linear in ``v``, ``grad f(x)``:
both results of the Hessian-vector product from one forward-mode pass taped once and swept
once (Pearlmutter's R-operator, taken here as reverse over forward). No dual is made.

Forward mode's code has no zero guards (``p * v if v else 0.0`` where a partial may be
infinite), and must not here: a guard's own derivative is wrong where ``v`` or an adjoint
is zero but its derivative is not. Without them, a zero times an infinite partial is NaN,
so a result that is not finite is not returned from here: the general path (forward
duals through the reverse transform) runs and gives its documented result.
"""
from __future__ import annotations

import ast
import inspect
from collections import namedtuple
import linecache
import math
import re

from ..compile.entry import UNBUILT
from ..compile.numba_backend import compiled_code
from ..compile.pipeline import compile_as, front
from ..errors import AstadError
from .diff import DiffFunction, with_defaults
from ..specialise.expressions import CannotSpecialise
from ..specialise.value_kinds import (float_lists, float_rows, floats, record_gradient,
                                     record_tangents, record_values)
from ..specialise.loops import write_scalar_loops
from ..specialise.straight_line import write_straight_line
from ..specialise.folding import inline_single_uses, names_in
from ..specialise.forward import ForwardWriter, write_tangents


# What a gradient knows of its Hessian-vector code once it has found it (``grad.hvp_known``:
# api/transforms.py), read by position by the compiled jvp (runtime/_native.h): the
# function, its entry, the entry's code for float arguments (None: not all floats), its
# arity, the entry's ``__code__`` and dependencies (still current?), and the argnums'
# positions and single.
HvpKnown = namedtuple("HvpKnown", "function entry floats arity code dependencies positions "
                                  "single")


class _TangentWriter(ForwardWriter):
    """Forward mode's writer for code that reverse mode differentiates again: the
    function returns its tangent alone (``t(x, v)``)."""

    def return_statement(self, value, index, depth, line):
        if self.function is not None:  # (a nested function gives both to its caller)
            super().return_statement(value, index, depth, line)
        else:
            self.emit(depth, f"return {index}", line)


def tangent_function(fn):
    """``fn``'s directional derivative ``t(*primals, *tangents)`` as Python code for
    floats, compiled, with its text registered (reverse mode reads it as it reads the
    user's), each parameter's plan: ``(kind, fields)``, a dataclass passed as its float
    fields ``fields``, and the global bindings it was written for; None if forward mode
    has no code for floats for it."""
    try:
        parsed, node, local_names, _ = front(fn)
        written = write_tangents(node, fn, local_names, parsed.filename, _TangentWriter,
                                 head=False)
    except (AstadError, CannotSpecialise):
        return None
    if written is None:
        return None
    writer, _, found = written
    if writer.classes:
        return None  # (its entry checks the class whose methods it inlined: not written here)
    plans, primals, tangents = [], [], []
    for p in writer.params:
        kind = writer.kinds[p]
        if kind == "record":
            fields = writer.scope.vars[p].value.fields
            if not fields:
                return None
            plans.append((kind, tuple(fields)))
            primals += [f.name for f in fields.values()]
            tangents += [f.handle for f in fields.values()]
        else:
            plans.append((kind, None))
            primals.append(p)
            tangents.append(writer.tangents[p])
    if all(kind == "plain" for kind, _ in plans):
        return None
    # (a closure's cells: read by name as fn reads them, checked by the prologue of the
    # reverse code written from this)
    lines = [f"def {node.name}_tangent({', '.join(primals + tangents)}):",
             f"    # d/dt {fn.__name__}(x + t v) at t = 0, with plain floats: each tangent a "
             "local *_dot (api/hvp.py)"]
    body = writer.functions_text + writer.lines
    body = body if writer.functions_text else _without_dead(body)
    lines += [text for text, _ in inline_single_uses(body, writer.names["temp"])]
    text = "\n".join(lines) + "\n"
    filename = f"<astad: the tangent of {fn.__qualname__} ({parsed.filename}:{node.lineno})>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    function = ast.parse(text).body[0]
    function.astad_callees, function.astad_cells = {}, tuple(writer.cells)
    compiled = compile_as(function, fn, filename, keep_name=True)[0]  # (fn's cells)
    return compiled, plans, found


_CANNOT_RAISE = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.UnaryOp,
                 ast.USub, ast.UAdd, ast.Name, ast.Load, ast.Constant)


def _without_dead(lines: list) -> list:
    """The lines without the assignments of values the tangent never needs (the primal of
    a sum whose value is not returned, only its tangent): every line is kept, and what it
    reads needed, except an assignment from arithmetic that cannot raise (+, -, *),
    which is kept only if what it assigns is needed. Fewer entries on the tape reverse
    mode keeps of this code."""
    texts = [text for text, _ in lines]
    candidates: dict = {}  # line -> (the name it assigns, the names it reads)
    needed: set = set()
    for k, text in enumerate(texts):
        if text.lstrip().startswith("#"):
            continue
        match = re.fullmatch(r" *(\w+) = (.+)", text)
        if match and all(isinstance(node, _CANNOT_RAISE) for node in
                         ast.walk(ast.parse(match.group(2), mode="eval"))):
            candidates[k] = (match.group(1), set(names_in(match.group(2))))
        else:
            needed |= set(names_in(text))
    changed = True
    while changed:
        changed = False
        for name, reads in candidates.values():
            if name in needed and not reads <= needed:
                needed |= reads
                changed = True
    kept = [line for k, line in enumerate(lines)
            if k not in candidates or candidates[k][0] in needed]
    out = []  # (a block left with no statement gets ``pass``)
    for k, (text, user_line) in enumerate(kept):
        out.append((text, user_line))
        if text.rstrip().endswith(":") and not text.lstrip().startswith("#"):
            depth = len(text) - len(text.lstrip())
            following = [t for t, _ in kept[k + 1:] if not t.lstrip().startswith("#")]
            if not following or len(following[0]) - len(following[0].lstrip()) <= depth:
                out.append((" " * (depth + 4) + "pass", user_line))
    return out


def hvp_function(fn):
    """The Hessian-vector function of ``fn`` (``(t, gradients)`` for the arguments
    ``(*primals, *tangents)``, as the specialised reverse code gives them), the
    parameters' plans (tangent_function), its text and the global bindings it was
    written for; None where it cannot be written."""
    made = tangent_function(fn)
    if made is None:
        return None
    tangent, plans, found = made
    try:
        parsed, node, local_names, _ = front(tangent)
        written = write_straight_line(node, tangent, local_names, parsed.filename, []) or \
            write_scalar_loops(node, tangent, local_names, parsed.filename, [])
    except (AstadError, CannotSpecialise):
        return None
    if written is None:  # (a recursive helper returning its tangent with its value)
        return _general_reverse(tangent, plans, found)
    function, text = written
    compiled = compile_as(function, tangent, parsed.filename, keep_name=True)[0]
    compiled.astad_tree, compiled.astad_of = function, tangent  # (a compiled backend's)
    return compiled, plans, text, found


def _general_reverse(tangent, plans, found):
    """``hvp_function`` where the specialised writer has no code for the tangent: the
    tangent code through reverse mode's general transform (a tape of duals; recursion,
    tuples and nested functions as it supports them), still one pass of plain floats
    taped once, rather than forward duals carried through the whole reverse transform."""

    n = len(inspect.signature(tangent).parameters) // 2
    flat, position = [], 0
    for kind, fields in plans:  # (a record's fields: one float each)
        width = len(fields) if kind == "record" else 1
        if kind != "plain":
            flat += range(position, position + width)
        position += width
    positions = tuple(flat) + tuple(n + p for p in flat)
    try:
        diff = DiffFunction(tangent, argnums=positions).decorated()
    except AstadError:
        return None
    value_and_grad = diff.value_and_grad

    def function(*args):
        value, gradients = value_and_grad(*args)
        out = [None] * len(args)
        for p, g in zip(positions, gradients):
            out[p] = g
        return value, out
    function.tangent = tangent  # (the code hvp_source shows: not this function's module)
    text = diff.source
    return function, plans, text, found


def _built(entry, fn):
    """``entry.hvp``, written now if it was not (hvp_function)."""
    built = entry.hvp
    if built is UNBUILT:
        built = hvp_function(fn)
        if built is not None:  # (the globals it was written for: the entry's, rebuilt
            entry.dependencies.extend(built[3])  # when one changes, as forward mode's)
        entry.hvp = built
    return built


def floats_code(entry, fn, n: int, backend=None):
    """The Hessian-vector code of ``fn`` (``code(*primals, *tangents) -> (t, flat)``,
    ``flat`` H v then the gradient) when its ``n`` parameters are all floats, or None."""
    built = _built(entry, fn)
    if not built or len(built[1]) != n or any(kind != "float" for kind, _ in built[1]):
        return None
    return _code(entry, fn, built, backend)


def _code(entry, fn, built, backend):
    """The Hessian-vector code ``built``, compiled by ``backend`` where it can be."""
    return compiled_code(entry, fn, backend, "hvp", built[0])


def hvp_source(entry, fn) -> str | None:
    """The code a Hessian-vector product of ``fn`` runs for floats: forward mode's
    tangent code, then reverse mode's code of it; None where it is not written."""
    built = _built(entry, fn)
    if built is None:
        return None
    function, _, text, _ = built
    code = getattr(function, "tangent", function).__code__
    tangent = "".join(linecache.getlines(code.co_filename)).rstrip("\n")
    return ("# a Hessian-vector product, jvp(grad(f), (x,), (v,)), for float arguments "
            "(api/hvp.py):\n# forward mode's tangent t(x, v) = grad f(x) . v, "
            "written with plain floats\n" + tangent + "\n\n# and reverse mode of it, "
            "which jvp runs: H v with respect to x, grad f(x) with respect to v\n"
            + text.rstrip("\n") + "\n")


def _exact(value, tangent, kind) -> bool:
    if kind == "float":
        return type(value) is float and type(tangent) is float
    if kind == "list":
        return float_lists(value, tangent) and len(value) == len(tangent)
    return float_rows(value, tangent)


def _finite(values) -> bool:
    """No inf or NaN among the floats of ``values`` (a sum is: NaN and inf propagate;
    a finite sum that overflows says no, and the general path runs)."""
    total = 0.0
    for value in values:
        t = type(value)
        if t is float:
            total += value
        elif t is list:
            total += sum(value) if not value or type(value[0]) is float else \
                sum(map(sum, value))
        elif hasattr(value, "__dict__"):  # a dataclass
            total += sum(v for v in value.__dict__.values() if type(v) is float)
        # (anything else holds no float: a plain argument's own value in the code's answer)
    return math.isfinite(total)


def hessian_vector_product(entry, fn, positions, single, primals, tangents, backend=None):
    """``(gradient, H v)`` of ``fn`` with respect to ``positions`` (as ``grad`` gives the
    gradient: one value if ``single``, else a tuple), or None where this code does not
    apply (the general path runs). ``backend``: that code compiled (``compile=``)."""
    built = _built(entry, fn)
    if built is None:
        return None
    function, plans = _code(entry, fn, built, backend), built[1]
    if len(primals) != len(plans):  # (parameters left to their defaults: constants)
        full = with_defaults(fn, tuple(primals), len(plans))
        if full is None:
            return None
        tangents = tuple(tangents) + tuple(
            0.0 if type(v) is float else [0.0] * len(v) if type(v) is list else None
            for v in full[len(primals):])
        primals = full
    if _floats_only(plans, primals, tangents):
        return of_floats(function, positions, single, primals, tangents)
    values, dots, at = [], [], []  # (at: each parameter's first argument of ``function``)
    for k, (kind, fields) in enumerate(plans):
        at.append(len(values))
        primal, tangent = primals[k], tangents[k]
        if kind == "plain":
            values.append(primal)
            dots.append(None)  # (its tangent is never read)
        elif kind == "record":
            parts = record_values(primal, fields)
            parts_dot = record_tangents(tangent, fields)
            if parts is None or parts_dot is None or \
                    not all(type(v) is float for v in parts):
                return None
            values += parts
            dots += parts_dot
        elif _exact(primal, tangent, kind):
            values.append(primal)
            dots.append(tangent)
        else:
            return None
    if any(plans[k][0] == "plain" for k in positions):
        return None  # (the error of a gradient with respect to an int: the general path)
    try:
        out = function(*values, *dots)
    except Exception:  # noqa: BLE001 (it only reads its arguments: the general path runs
        return None  # and raises the error at the user's line)
    if out is None:
        return None
    flat = out[1]
    if not _finite(flat):
        return None  # (a zero times an infinite partial: the guarded general path)
    gradient, product = [], []
    for k in positions:
        kind, fields = plans[k]
        i, j = at[k], len(values) + at[k]
        if kind == "record":
            gradient.append(record_gradient(primals[k], fields, flat[j:j + len(fields)]))
            product.append(record_gradient(primals[k], fields, flat[i:i + len(fields)]))
        else:
            gradient.append(flat[j])
            product.append(flat[i])
    if single:
        return gradient[0], product[0]
    return tuple(gradient), tuple(product)


def _floats_only(plans, primals, tangents) -> bool:
    return all(kind == "float" for kind, _ in plans) and floats(*primals, *tangents)


def of_floats(function, positions, single, primals, tangents):
    """``hessian_vector_product`` when every argument is a float (the common case, and the
    one whose fixed cost shows: ``x * y``)."""
    try:
        out = function(*primals, *tangents)
    except Exception:  # noqa: BLE001 (as hessian_vector_product)
        return None
    if out is None:
        return None
    flat, n = out[1], len(primals)
    if single:
        k = positions[0]
        gradient, product = flat[n + k], flat[k]
        return (gradient, product) if math.isfinite(gradient + product) else None
    if len(positions) == n and positions[-1] == n - 1 and type(flat) is tuple and \
            len(flat) == 2 * n:  # all of them, in order: H v, then the gradient
        if not math.isfinite(sum(flat)):
            return None
        return flat[n:], flat[:n]
    gradient, product = [], []  # (a loop: a comprehension costs a function call here)
    for k in positions:
        gradient.append(flat[n + k])
        product.append(flat[k])
    if not math.isfinite(sum(gradient) + sum(product)):
        return None  # (as hessian_vector_product)
    return tuple(gradient), tuple(product)
