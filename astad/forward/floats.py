"""Forward mode specialised for float arguments: the dual-numbers forward transform
written out (paper sections 2-3), each float a local and its tangent a local beside it.

For scalar code (the code reverse/scalarloops.py specialises: float expressions assigned
to names, ``if``, ``while``, ``for ... in range``, lists of floats read in place) and
float or list-of-float arguments, the kind of every operand is known, so forward mode
needs no dual at all: every statement ``z = <expression>`` becomes

    z = <the same operations, in Python's order>
    z_dot = <sum over the expression's leaves of partial * the leaf's tangent>

with the partials of the whole expression derived at transform time from the rule table
(fuse.py's ``differentiate``, as for reverse mode), and ``return z`` becomes ``return z,
z_dot``. This is the textbook forward-mode code, and the code ``astad.jvp`` and ``f.jvp``
run when every primal and tangent is a float or a list of floats (otherwise the
transformed code runs on forward duals). A zero tangent contributes nothing, even
through an infinite partial, as a zero adjoint in reverse mode.

The writer is scalarloops.py's, told what forward mode records: a tangent expression
where reverse mode appends a tape entry.
"""
from __future__ import annotations

import gast

from ..reverse.scalarloops import _read_only_lists, _rule_helpers, _Writer
from ..reverse.straightline import _NotStraight, _tidy, parse_with_user_lines


class _ForwardWriter(_Writer):
    """scalarloops' writer, for forward mode: ``self.index`` maps each active local to
    its tangent's local, ``self.lists``/``self.matrices``/``self.rows`` each list to the
    list of its tangents."""

    @property
    def constant(self) -> str:
        return "0.0"

    def element_derivative(self, kind, container, k, i=None, row=None):
        if kind == "list":
            return f"{self.lists[container]}[{k}]"
        if kind == "row":
            return f"{self.rows[container]}[{k}]"
        return f"{self.matrices[container]}[{i}][{k}]"

    def combine(self, pairs, depth, lineno) -> str:
        terms = []
        for tangent, partial in pairs:
            if partial == "0.0":
                continue
            if partial == "1.0":
                terms.append(tangent)
            elif partial == "-1.0":
                terms.append(f"-{tangent}")
            else:  # (a zero tangent passes nothing on, even through an infinite partial)
                terms.append(f"({partial}) * {tangent} if {tangent} else 0.0")
        if not terms:
            return "0.0"
        var = f"{self.names['temp']}d{self.counter[0]}"
        self.counter[0] += 1
        self.emit(depth, _tidy(f"{var} = " + " + ".join(
            f"({term})" if " if " in term else term for term in terms)), lineno)
        return var

    def row_assignment(self, target, matrix, i, depth, line):
        self.emit(depth, f"{target} = {matrix}[{i}]", line)
        self.emit(depth, f"{self.rows[target]} = {self.matrices[matrix]}[{i}]", line)

    def return_statement(self, value, index, depth, line):
        self.emit(depth, f"return {value}, {index}", line)


def write_forward(root, rule_name, static_callee, activity, local_names: set,
                  filename: str):
    """The forward-mode function of ``root`` (a normalized gast.FunctionDef, before the
    transform) for float and list-of-float arguments, ``f_jvp(*primals, *tangents) ->
    (value, tangent)``, as ``(ast.FunctionDef, text)``; None if its body is not scalar
    code of this kind."""
    args = root.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        return None
    params = [a.id for a in args.posonlyargs + args.args]
    user_names = {n.id for n in gast.walk(root) if isinstance(n, gast.Name)} | set(params)
    if not params or (set(local_names) | set(params)) & _rule_helpers():
        return None  # a user name would hide a function the code uses
    body = [s for s in root.body if not (isinstance(s, gast.Expr) and isinstance(
        s.value, gast.Constant) and isinstance(s.value.value, str))]
    if not body or not isinstance(body[-1], gast.Return):
        return None  # falling off the end returns None, not a float
    names = {"temp": "_v", "suffix": "_dot", "tape": "", "sink": "0.0"}
    while any(n.startswith(names["temp"]) for n in user_names):
        names["temp"] += "_"
    while any(n + names["suffix"] in user_names for n in user_names):
        names["suffix"] += "_"
    suffix = names["suffix"]
    list_params, matrix_params, rows = _read_only_lists(root, params, local_names)
    lists = {p: p + suffix for p in list_params}
    matrices = {p: p + suffix for p in matrix_params}
    writer = _ForwardWriter(rule_name, static_callee, activity, filename, names,
                            set(local_names) | set(params), lists, matrices, rows)
    if any(p not in writer.index and p not in lists and p not in matrices for p in params):
        return None
    try:
        writer.block(body, 1)
    except _NotStraight:
        return None
    tangents = [writer.index.get(p) or lists.get(p) or matrices[p] for p in params]
    first = root.lineno
    checks = []
    for p, t in zip(params, tangents):
        if p in lists:
            checks += [f"type({p}) is not list", f"type({t}) is not list",
                       f"len({t}) != len({p})",
                       f"not set(map(type, {p})) | set(map(type, {t})) <= {{float}}"]
        elif p in matrices:
            checks += [f"type({p}) is not list", f"type({t}) is not list",
                       f"len({t}) != len({p})",
                       f"not all(type(r) is list and type(s) is list and len(r) == len(s) "
                       f"and set(map(type, r)) | set(map(type, s)) <= {{float}} "
                       f"for r, s in zip({p}, {t}))"]
        else:
            checks += [f"type({p}) is not float", f"type({t}) is not float"]
    kinds = "a float" + (" or a list of floats" if lists else "") + (
        " or a list of lists of floats" if matrices else "")
    head = [
        (f"def {root.name}_jvp({', '.join(params + tangents)}):", first),
        (f"    # every argument {kinds}, with its tangent: each float a local and its "
         f"tangent a local *{suffix}", first),
        ("    if " + " or ".join(checks) + ":", first),
        ("        return None  # other arguments: the transformed code runs on forward duals",
         first)]
    return parse_with_user_lines(head + writer.lines, first)
