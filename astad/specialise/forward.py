"""Forward mode specialised for its arguments' kinds: the dual-numbers forward transform
written out (paper sections 2-3), each float a local and its tangent a local beside it.

For the code specialise/loops.py specialises (float expressions assigned to names,
``if``, ``while``, ``for`` over ranges, lists, ``zip``, ``enumerate``, ``reversed`` and
rows, tuples and dataclasses kept as their fields, helpers inlined) and arguments whose
kinds it knows (floats, lists of floats, lists of lists, dataclasses of floats, ints and
other values never differentiated), forward mode needs no dual at all: every statement
``z = <expression>`` becomes

    z = <the same operations, in Python's order>
    z_dot = <sum over the expression's leaves of partial * the leaf's tangent>

with the partials of the whole expression derived at transform time from the rule table
(transform/preaccumulate.py's ``differentiate``, as for reverse mode), and ``return z``
becomes ``return z, z_dot``. This is the textbook forward-mode code, and the code
``astad.jvp`` and ``f.jvp`` run when the entry's checks accept every primal and tangent
(otherwise the transformed code runs on forward duals). The code is plain arithmetic,
with no test of each tangent: where a zero tangent meets an infinite partial it gives
NaN, which reaches the result (tangents only flow through products and sums, never into
a test), so a result whose tangent is not finite is not returned: the call runs again on
forward duals, whose rules drop a zero tangent even through an infinite partial, as a zero
adjoint in reverse
mode. (Without the tests the loop of a dot product runs about a third faster.)

The writer is specialise/loops.py's, told what forward mode records: a tangent expression
where reverse mode appends a tape entry.
"""
from __future__ import annotations

import collections
import re

from .value_kinds import (Alias, Float, FloatLocal, ListArg, MatrixArg, Plain, RecordArg,
                          TupleVal)
from .loops import PlainParam, Writer, tuple_text, prepare, user_scope, \
    write_attempts
from .expressions import CannotSpecialise, Retry, tidy, parse_with_user_lines
from .folding import inline_single_uses


class ForwardWriter(Writer):
    """scalarloops' writer, for forward mode: each float local's handle is its tangent's
    local; a list argument's ``start`` (a matrix's ``starts``) is the list of its
    tangents, a row's handle the row of its tangents."""

    volatile = None  # (every tangent is a local of its own)
    zero_guards = False  # (see above: a tangent that is not finite runs the duals)
    returns_tuples = True  # (a tuple of floats and its tuple of tangents: jvp's answer)

    def returned_tuple(self, value):
        """A returned tuple (of floats, plain values and such tuples) as one Float: the
        tuple of the values and the tuple of their tangents."""
        values, tangents = [], []
        for item in value.items:
            if isinstance(item, TupleVal):
                item = self.returned_tuple(item)
            elif isinstance(item, Plain):
                if item.param is not None:
                    raise Retry(item.param, "float")  # the result depends on it
                item = Float(item.value, f"ad.plain_tangent({item.value})")
            if not isinstance(item, Float):
                raise CannotSpecialise  # a list, a record...: the duals
            values.append(item.value)
            # (a float argument given an int, returned: the int as it is, as the duals
            # give a leaf with no derivative)
            tangents.append(f"({item.value} if type({item.value}) in ad.integers else "
                            f"{item.handle})" if item.value.isidentifier() else item.handle)
        return Float(tuple_text(values), tuple_text(tangents))

    @property
    def constant(self) -> str:
        return "0.0"

    def element_derivative(self, container, k, nonnegative) -> str:
        if isinstance(container, ListArg):
            return f"{container.start}[{k}]"
        return f"{container.handle}[{k}]"

    def row_derivative(self, matrix, i, nonnegative) -> str:
        return f"{matrix.starts}[{i}]"

    def handles(self, value) -> str:
        if isinstance(value, ListArg):
            return value.start
        if isinstance(value, MatrixArg):
            return value.starts
        return value.handle

    def combine(self, pairs, depth, lineno) -> str:
        terms = []
        for tangent, partial in pairs:
            if partial == "0.0" or tangent == "0.0":
                continue
            if partial == "1.0":
                terms.append(tangent)
            elif partial == "-1.0":
                terms.append(f"-{tangent}")
            else:
                terms.append(f"({partial}) * {tangent}")
        if not terms:
            return "0.0"
        var = self.temp("d")
        self.emit(depth, tidy(f"{var} = " + " + ".join(terms)), lineno)
        return var

    def return_statement(self, value, index, depth, line):
        self.emit(depth, f"return {value}, {index}", line)

    def function_header(self, name, formal):
        return f"def {name}({', '.join(formal)}):"

    def call_text(self, name, args, result, handle):
        return f"{result}, {handle} = {name}({', '.join(args)})"


def write_forward(root, fn, local_names: set, filename: str, dependencies: list):
    """The forward-mode function of ``root`` (a normalized gast.FunctionDef of ``fn``,
    before the transform), ``f_jvp(*primals, *tangents) -> (value, tangent)``, as
    ``(ast.FunctionDef, text, unchecked)``, ``unchecked`` the function without its checks
    of its arguments when they are all floats (runtime/_jvp.c calls it having checked
    that every primal and tangent is a float), else None; None if its body is not code of
    this kind."""
    written = write_tangents(root, fn, local_names, filename, ForwardWriter, head=True)
    if written is None:
        return None
    writer, head, found = written
    dependencies.extend(found)
    body = writer.functions_text + inline_single_uses(writer.lines, writer.names["temp"])
    # (a closure's cells read and checked: in the unchecked form too, whose caller checks
    # only the arguments, and takes the ordinary code where it returns None)
    prologue = [(f"    {text}", root.lineno) for text in writer.prologue]
    function, text = parse_with_user_lines(head + prologue + body, root.lineno,
                                           writer.classes, writer.cells)
    # (where the checks end: a compiled backend keeps them Python, compile/numba_translate)
    function.astad_checks = len(function.body) - len(
        parse_with_user_lines(head[:1] + body, root.lineno)[0].body)
    unchecked = None  # the same without the checks, for callers that made them (all floats)
    if all(writer.kinds[p] == "float" for p in writer.params):
        unchecked = parse_with_user_lines(head[:2] + prologue + body, root.lineno,
                                          writer.classes, writer.cells)[0]
    return function, text, unchecked


def write_tangents(root, fn, local_names: set, filename: str, writer_class, head: bool):
    """Write ``root``'s body with ``writer_class`` (forward mode's writer or one of its
    kind), each float parameter's tangent a parameter ``*_dot`` beside it: ``(writer,
    head, found)`` (``head``: the entry's checks, when asked for; ``found``: the global
    bindings it was specialised on; the parameters' kinds are ``writer.kinds``), or
    None if its body is not code of this kind."""
    prepared = prepare(root, fn, local_names, "_dot")
    if prepared is None:
        return None
    root, local_names, params, body, names, taken = prepared
    names["sink"] = "0.0"

    def write(kinds, int_names):
        found: list = []
        writer = writer_class(fn, dict(names), set(taken), int_names)
        scope = user_scope(writer, root, fn, params, kinds, local_names, filename, found)
        tangents = {}
        for p in params:
            kind = kinds[p]
            tangents[p] = writer.fresh(p + names["suffix"])
            if kind == "plain":
                scope.vars[p] = PlainParam(p)
            elif kind == "float":
                scope.vars[p] = FloatLocal(p, tangents[p])
            elif kind == "list":
                scope.vars[p] = Alias(ListArg(p, tangents[p], None, p))
            elif kind == "matrix":
                scope.vars[p] = Alias(MatrixArg(p, tangents[p], None, p))
            else:
                scope.vars[p] = Alias(RecordArg(p, p))
        writer.block(body, 1)
        writer.lines = _without_copies(writer.lines, names["temp"])
        writer.functions_text = _without_copies(writer.functions_text, names["temp"])
        writer.params, writer.kinds, writer.tangents = params, dict(kinds), tangents
        lines = _forward_head(writer, root, params, kinds, tangents, scope) if head else []
        return writer, lines, found

    return write_attempts(write, params, root)


def _without_copies(lines: list, temp: str) -> list:
    """The lines with ``t = <expression>`` ... ``name = t`` written ``name =
    <expression>`` where ``t`` is a temporary read nowhere else and ``name`` is not read
    or written in between, in the same block. (The writer computes a statement's value
    and its tangent before binding either, as the tangent may read the old value; where
    it does not, the copy is only a cost.)"""
    texts = [text for text, _ in lines]
    uses = collections.Counter(word for text in texts
                               for word in re.findall(rf"\b{temp}\w*", text))
    defined: dict = {}  # temporary -> the index of the line assigning it
    out, dropped = list(lines), set()
    for k, text in enumerate(texts):
        copy = re.fullmatch(r"( *)(\w+) = (\w+)", text)
        if copy and copy.group(3) in defined and uses[copy.group(3)] == 2:
            indent, name, t = copy.groups()
            j = defined[t]
            between = [out[u][0] for u in range(j + 1, k) if u not in dropped and
                       not out[u][0].lstrip().startswith("#")]
            if out[j][0].startswith(f"{indent}{t} = ") and all(
                    line.startswith(indent) and not line.startswith(indent + " ") and
                    not re.search(rf"\b{name}\b", line) for line in between):
                out[j] = (f"{indent}{name}{out[j][0][len(indent) + len(t):]}", lines[j][1])
                dropped.add(k)
                if re.fullmatch(rf"{temp}\w*", name):
                    defined[name] = j  # (a chain of copies folds into the first line)
                continue
        assigned = re.match(rf" *({temp}\w*) = ", text)
        if assigned:
            defined[assigned.group(1)] = k
    return [line for k, line in enumerate(out) if k not in dropped]


def _forward_head(writer, root, params, kinds, tangents, scope) -> list:
    checks, lines = [], []
    float_checks, float_lines, float_names = [], [], []  # (the common case: one call)
    temp = writer.names["temp"]
    for p in params:
        t, kind = tangents[p], kinds[p]
        if kind == "plain":  # (its tangent is ignored, as for an int on forward duals)
            types = "quiet_types" if p not in writer.flowing else "plain_types"
            checks.append(f"type({p}) not in ad.{types}")
        elif kind == "float":  # (an int primal is a constant: its tangent is ignored)
            float_checks += [f"type({p}) is not float and type({p}) not in ad.integers",
                             f"type({p}) is float and type({t}) is not float"]
            float_lines.append(f"    if type({p}) is not float:")
            float_lines.append(f"        {t} = 0.0")
            float_names += [p, t]
        elif kind == "list":  # (lists of floats, exactly those types, of one length; else
            # tuples, numpy.float64 elements or 1-d float arrays, read the same way)
            checks += [f"not (ad.float_lists({p}, {t}) or "
                       f"ad.float_sequences(({p}, {t}), ()))", f"len({t}) != len({p})"]
        elif kind == "matrix":  # (and the same row lengths)
            checks.append(f"not ad.float_rows({p}, {t})")
        else:
            fields = scope.vars[p].value.fields
            if not fields:
                raise CannotSpecialise
            values, dots = writer.fresh(f"{temp}fields_{p}"), writer.fresh(f"{temp}dots_{p}")
            lines += [f"{values} = {scope.vars[p].value.values()}",
                      f"{dots} = ad.record_tangents({t}, {tuple(fields)!r})",
                      f"if {values} is None or {dots} is None:",
                      "    return None  # not a dataclass of floats with float tangents",
                      f"{', '.join(f.name for f in fields.values())}, = {values}",
                      f"{', '.join(f.handle for f in fields.values())}, = {dots}"]
    said = ", ".join(f"{p} {_KINDS[kinds[p]]}" for p in params)
    head = [
        (f"def {root.name}_jvp({', '.join(params + [tangents[p] for p in params])}):",
         root.lineno),
        (f"    # {said}, with its tangent: each float a local and its tangent a local "
         f"*{writer.names['suffix']}", root.lineno)]
    if float_names:  # every float argument and tangent a float: nothing more to check
        head += [(f"    if not ad.floats({', '.join(float_names)}):", root.lineno),
                 ("        if " + " or ".join(float_checks) + ":", root.lineno),
                 ("            return None  # other arguments: the transformed code runs on "
                  "forward duals", root.lineno)]
        head += [(f"    {line}", root.lineno) for line in float_lines]
    if checks:
        head += [("    if " + " or ".join(checks) + ":", root.lineno),
                 ("        return None  # other arguments: the transformed code runs on "
                  "forward duals", root.lineno)]
    if not any(kinds[p] != "plain" for p in params):
        raise CannotSpecialise
    head += [(f"    {line}", root.lineno) for line in lines]
    return head


_KINDS = {"plain": "not differentiated", "float": "a float", "list": "a list of floats",
          "matrix": "a list of lists of floats", "record": "a dataclass of floats"}

__all__ = ["write_forward", "write_tangents", "tuple_text"]
