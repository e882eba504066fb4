"""Straight-line code: value and gradient in one generated function, no tape.

A function whose body (helpers inlined, tuples and dataclasses kept as their fields) is
only assignments and a ``return``, once its arguments' kinds are known, is one
expression DAG. Statement-level preaccumulation (transform/preaccumulate.py) already
differentiates each statement's tree at transform time; here the statements are chained
in one function: the forward half runs the primal operations exactly as Python would (same
operations, same order, every value in a local of its own), and the backward half is the
tape sweep
written out, one block per statement in reverse order, the partials reading those
locals. No dual, no tape entry, no sweep loop (the paper's section 5 linear factoring,
applied to the whole body). As in the sweep, a statement whose adjoint is zero
contributes nothing, even where one of its partials is infinite.

The writer is specialise/loops.py's: where it appends a tape entry, this one names the
entry's adjoint and keeps its (parent, partial) pairs for the backward half; where it
assigns a local, this one rebinds the name in the writer (every value keeps its own
local, so the backward half reads the values the forward half computed). A loop, a
branch, or a list argument: the code with a tape (specialise/loops.py) instead.
"""
from __future__ import annotations

import linecache
import re

import gast

from .expressions import Plain, Retry, CannotSpecialise, tidy, parse_with_user_lines
from .value_kinds import Alias, Float, FloatLocal, PlainLocal, RecordArg, RecordLocal, TupleLocal
from .loops import kinds_said, PlainParam, tuple_text, Writer, prepare, user_scope, \
    write_attempts


class _TapelessWriter(Writer):
    """Every value its own local, every derivative handle the name of an adjoint."""

    volatile = None
    constant = None  # (a constant has no adjoint)
    static_binding = True  # (so no loop, no call of a nested function: loops.py writes those)

    def __init__(self, *args):
        super().__init__(*args)
        self.blocks: list = []  # (adjoint, [(parent adjoint, partial)], user line)
        self.result = None

    def bind(self, local, value, depth: int, line: int) -> None:
        """No code: the local now names the value's own local (and its adjoint)."""
        if isinstance(local, FloatLocal):
            if isinstance(value, Float):
                local.name, local.handle = value.value, value.handle
                return
            if isinstance(value, Plain):
                if value.param is not None:
                    raise Retry(value.param, "float")
                local.name, local.handle = self.stable(value.value, depth, line), None
                return
        elif isinstance(local, PlainLocal) and isinstance(value, Plain):
            self.taint_local(local, value)
            local.name = self.stable(value.value, depth, line)
            return
        elif isinstance(local, TupleLocal) and hasattr(value, "items") and \
                len(value.items) == len(local.items):
            for item, v in zip(local.items, value.items):
                self.bind(item, v, depth, line)
            return
        elif isinstance(local, RecordLocal) and getattr(value, "cls", None) is local.cls:
            for name, item in local.fields.items():
                self.bind(item, value.fields[name], depth, line)
            return
        raise CannotSpecialise

    def statement(self, stmt, depth: int) -> None:
        if self.result is not None:
            return  # after the return: never runs
        if isinstance(stmt, (gast.If, gast.While, gast.For, gast.Break, gast.Continue)):
            raise CannotSpecialise  # control flow: the code with a tape
        super().statement(stmt, depth)

    def conditional(self, node, depth, line):
        raise CannotSpecialise

    def extreme(self, node, depth, line):
        raise CannotSpecialise  # (min and max are branches)

    def for_loop(self, stmt, depth, line):
        raise CannotSpecialise

    def combine(self, pairs: list, depth: int, lineno: int) -> str:
        adjoint = self.temp("d")
        self.blocks.append((adjoint, pairs, lineno))
        return adjoint

    def element_derivative(self, container, k, nonnegative):
        raise CannotSpecialise  # a list: the code with a tape

    def row_derivative(self, matrix, i, nonnegative):
        raise CannotSpecialise

    def handles(self, value):
        raise CannotSpecialise

    def record_field(self, record, name: str):
        local = self.fresh(f"{record.name}_{name}")
        return FloatLocal(local, self.fresh(f"d{local}"))

    def return_statement(self, value: str, handle, depth: int, line: int) -> None:
        self.result = (value, handle, line)

    def backward(self, first: int, inputs: list) -> list:
        """The sweep of the blocks, last first, from the result: only the blocks the
        result depends on. ``inputs``: the arguments' adjoints."""
        value, result, line = self.result
        live, blocks = {result}, []
        for adjoint, pairs, block_line in reversed(self.blocks):
            if adjoint in live:
                blocks.append((adjoint, pairs, block_line))
                live.update(parent for parent, _ in pairs)
        lines = [("# backward: the sweep of the entries above, last first", first)]
        assigned = set()
        body = []
        said = None
        for adjoint, pairs, block_line in blocks:
            text = linecache.getline(self.filename, block_line).strip()
            if block_line != said and text:
                body.append((f"# {text}", block_line))
                said = block_line
            if adjoint == result:  # its adjoint is 1.0: its parents' are the partials
                for parent, partial in pairs:  # (added to 0.0: an int partial, a float)
                    body.append((f"{parent} += {partial}", block_line))
                continue
            body.append((f"if {adjoint}:", block_line))
            for parent, partial in pairs:
                if partial in ("1.0", "-1.0"):  # exact: 1.0 * g == g
                    update = f"{'+' if partial == '1.0' else '-'}= {adjoint}"
                elif re.fullmatch(r"-?[\w.]+", partial):
                    update = f"+= {partial} * {adjoint}"
                else:
                    update = f"+= ({partial}) * {adjoint}"
                body.append((f"    {parent} {update}", block_line))
        if result in inputs and not blocks:
            assigned.add(result)
            body.append((f"{result} = 1.0", line))
        rest = [a for a in dict.fromkeys(inputs + [b for b, _, _ in blocks] +
                                         [p for _, pairs, _ in blocks for p, _ in pairs])
                if a not in assigned and a != result]
        if rest:
            lines.append((" = ".join(rest) + " = 0.0", first))
        return lines + body


def write_straight_line(root, fn, local_names: set, filename: str, dependencies: list):
    """The value-and-gradient function of ``root`` (a normalized gast.FunctionDef of
    ``fn``, before the transform) without a tape, as ``(ast.FunctionDef, its text)``, or
    None if the body is not straight-line code of this kind."""
    prepared = prepare(root, fn, local_names, "_i")
    if prepared is None:
        return None
    root, local_names, params, body, names, taken = prepared
    if any(isinstance(n, (gast.If, gast.While, gast.For, gast.IfExp)) for n in
           gast.walk(root)):
        return None

    def write(kinds, int_names):
        if any(kind in ("list", "matrix") for kind in kinds.values()):
            raise CannotSpecialise  # list elements: the code with a tape
        found: list = []
        writer = _TapelessWriter(fn, dict(names), set(taken), int_names)
        scope = user_scope(writer, root, fn, params, kinds, local_names, filename, found)
        adjoints = {}
        for p in params:
            if kinds[p] == "plain":
                scope.vars[p] = PlainParam(p)
            elif kinds[p] == "float":
                adjoints[p] = writer.fresh(f"d{p}")
                scope.vars[p] = FloatLocal(p, adjoints[p])
            else:
                scope.vars[p] = Alias(RecordArg(p, p))
        writer.block(body, 1)
        if writer.result is None or writer.result[1] is None:
            raise CannotSpecialise  # no return, or a constant result: the code with a tape
        return writer, adjoints, scope, found

    written = write_attempts(write, params, root)
    if written is None:
        return None
    writer, adjoints, scope, found = written
    dependencies.extend(found)
    first = root.lineno
    checks, reads, inputs, gradients, exact = [], [], [], [], []
    temp = names["temp"]
    kinds = {}
    for p in params:
        local = scope.vars[p]
        if isinstance(local, PlainParam) and p not in writer.flowing:
            kinds[p] = "plain"  # only tested or compared: a float too, its gradient 0.0
            checks.append(f"type({p}) not in ad.quiet_types")
            gradients.append(f"ad.plain_gradient({p})")
            exact.append(gradients[-1])
        elif isinstance(local, PlainParam):
            kinds[p] = "plain"
            checks.append(f"type({p}) not in ad.plain_types")
            gradients.append("None")  # (not differentiated)
            exact.append("None")
        elif p in adjoints:
            kinds[p] = "float"
            inputs.append(adjoints[p])
            gradients.append(adjoints[p])
            exact.append(f"ad.number_gradient({p}, {adjoints[p]})")
        else:
            kinds[p] = "record"
            fields = local.value.fields
            if not fields:
                return None
            values = writer.fresh(f"{temp}fields_{p}")
            reads += [f"{values} = {local.value.values()}",
                      f"if {values} is None:",
                      "    return None  # not a dataclass of floats",
                      f"{', '.join(f.name for f in fields.values())}, = {values}"]
            inputs += [f.handle for f in fields.values()]
            gradients.append(f"ad.record_gradient({p}, {tuple(fields)!r}, "
                             f"{tuple_text([f.handle for f in fields.values()])})")
            exact.append(gradients[-1])
    head = [(f"def {root.name}_floats({', '.join(params)}):", first),
            (f"    # every argument {kinds_said(kinds, params)}: the forward pass, then "
             "its sweep written out (no tape)", first)]
    if checks:
        head += [(f"    if {' or '.join(checks)}:", first),
                 ("        return None  # other arguments: the transformed code runs instead",
                  first)]
    floats = [p for p in params if kinds[p] == "float"]
    if floats:  # floats; an int (a constant: its gradient itself), a numpy.float64
        head += [(f"    {temp}floats = {' and '.join(f'type({p}) is float' for p in floats)}",
                  first),
                 (f"    if not {temp}floats:", first),
                 (f"        if not ({' and '.join(f'type({p}) in ad.numbers' for p in floats)}):",
                  first),
                 ("            return None  # other arguments: the transformed code runs "
                  "instead", first)]
        if "record" not in kinds.values():
            head += [("        if " + " and ".join(f"type({p}) in ad.integers" for p in floats)
                      + ":", first), ("            return None  # no float: the transformed "
                                      "code says so", first)]
    head += [(f"    {text}", first) for text in writer.prologue + reads]
    value, _, line = writer.result
    backward = writer.backward(first, inputs)
    lines = head + writer.lines + [(f"    {text}", at) for text, at in backward]
    if floats:
        lines.append((f"    if not {temp}floats:", line))
        lines.append((f"        return {value}, {tuple_text(exact)}", line))
    lines.append((f"    return {value}, {tuple_text(gradients)}", line))
    return parse_with_user_lines(lines, first, writer.classes, writer.cells)


__all__ = ["write_straight_line", "parse_with_user_lines", "CannotSpecialise", "tidy"]
