"""The code written for floats, split and rewritten for numba (compile/numba_backend.py):
its prologue (the checks of the arguments' kinds, a gradient's layout) kept as Python, the
rest a kernel. ``translate`` takes the gradient's code with a flat tape
(specialise/loops.py, and the Hessian-vector code api/hvp.py writes with it),
``translate_forward`` forward mode's code (specialise/forward.py).

The rewrite is a whitelist. Each statement the writers emit has its numba form here, each
expression and call in numba_expressions.py; anything else is refused (``CannotCompile``)
at its line, so that what numba compiles is only what it computes as Python does
(numba_kernels says how):

    _record(s0, p0, s1, p1)       the tape's arrays written (counted past their end)
    [c] * n                       numba_kernels.full (an array)
    a + b, a * b, a ** b, ...     numba_kernels.checked_* (ints checked for overflow)
    a[i], a[i] = v                numba_kernels.checked_get, checked_set (bounds checked)
    math.f(x), f(x)               numba_kernels.MATH (raise where not finite)
    np.f(x) (numpy's of floats)   numba_kernels.NUMPY (raise where not finite)
    max(a, b), min(a, b), int(x)  as Python compares and converts
    sum(terms, start)             numba_kernels.python_sum (CPython's order)
    np.sum(y), np.mean(y)         numba_kernels.numpy_sum (numpy's pairwise order)
    reversed(a)                   a[::-1], or a range reversed
    return ad.tape_gradient_of(..., value, index, ...)
                                  the sweep (numba_kernels.swept), the value checked a float
"""
from __future__ import annotations

import ast
import copy

from .numba_expressions import KernelExpressions


VALUE, NONE, FULL = 0, 1, 2  # what a kernel's call gave: a value, None, a tape too short
ROW_KINDS = ("tuple", "list", "array")  # how a Jacobian's rows code returns its values


class CannotCompile(Exception):
    """What the compiled backend does not take (``reason``, at ``line``)."""

    def __init__(self, reason: str, node=None):
        super().__init__(reason)
        self.reason, self.line = reason, getattr(node, "lineno", None)


def names_of(tree) -> dict:
    """The names the written code uses for its tape (specialise/loops.py: ``tape``,
    ``record``, ``last``, ``sink``, ``layout``, prefixed so that no user name starts like
    them), and the kernel's own names, made with the same prefix: the tape's arrays
    ``ti`` (slots) and ``tp`` (partials), room for the sweep's adjoints ``adj``, the
    count of their items ``pos``, their capacity ``cap``, an empty array ``none``,
    returned values ``ret``."""
    written = getattr(tree, "astad_names", None) or \
        {"tape": "_tape", "record": "_record", "temp": "_v"}
    temp = written["temp"]
    names = {key: temp + key for key in ("last", "sink", "layout", "ti", "tp", "adj", "pos",
                                         "cap", "none", "ret")}
    names.update(tape=written["tape"], record=written["record"])
    return names


class Parts:
    """What ``translate`` makes of one written function."""

    def __init__(self, prologue, kinds, kernel_text, returned, namespace, functions=(),
                 sink_at=None):
        self.prologue, self.kinds, self.kernel_text = prologue, kinds, kernel_text
        self.sink_at = sink_at  # (which of the kernel's arguments is the sink's slot)
        self.functions = functions  # the kernel's own functions (a recursive helper's)
        self.returned, self.namespace = returned, namespace
        self.kernel = None  # (compiled by numba_backend, per argument types)


def translate(tree: ast.FunctionDef) -> Parts:
    """``tree`` (a ``*_floats`` function of specialise/loops.py) as a Python prologue and
    a numba kernel's text; raises CannotCompile."""
    body, n = tree.body, names_of(tree)
    start = next((k for k, s in enumerate(body) if _assigns(s, n["last"])), None)
    if start is None:
        raise CannotCompile("it has no loop: its code for floats keeps no tape, and runs "
                            "as fast as a Python call of it allows", tree)
    checks = [s for s in body[:start + 1]
              if not (_assigns(s, n["tape"]) or _assigns(s, n["record"]))]
    tape_names = {n["tape"], n["record"], n["layout"]}
    carried = sorted(_carried(checks, body[start + 1:]) - tape_names | {n["last"]})
    return _parts(tree, checks, body[start + 1:], carried, [n["ti"], n["tp"], n["adj"]],
                  f"{n['pos']} = 0\n{n['cap']} = {n['ti']}.shape[0]\n"
                  f"{n['none']} = np.zeros(0)", n["layout"])


def translate_forward(tree: ast.FunctionDef) -> Parts:
    """``tree`` (forward mode's ``*_jvp`` function, specialise/forward.py: checks of the
    primals and tangents, then plain float code) as a Python prologue and a kernel."""
    start = getattr(tree, "astad_checks", None)
    if start is None:
        raise CannotCompile("its forward-mode code has no checks apart", tree)
    checks, body = tree.body[:start], tree.body[start:]
    return _parts(tree, checks, body, sorted(_carried(checks, body)), [], "", None,
                  forward=True)


def _carried(checks: list, body: list) -> set:
    """The names the prologue binds that the kernel reads (the slots of the arguments,
    the sink, a dataclass's fields): arguments of the kernel."""
    bound = {name.id for s in checks for name in ast.walk(s)
             if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)}
    return bound & _read(body)


def _read(statements: list) -> set:
    return {n.id for s in statements for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _parts(tree, checks: list, body: list, carried: list, state: list, start: str,
           layout: str | None, forward: bool = False) -> Parts:
    """The prologue (``checks``, then the kernel's arguments as Python holds them and
    the ``layout``, if any), and the kernel: ``start``, then ``body`` rewritten."""
    params = [a.arg for a in tree.args.args]
    kinds = _kinds(checks, params)
    read = _read(body)  # (the kernel takes what it reads: not an int's tangent, None)
    names = [p for p in params if p not in carried and p in read] + carried + \
        [c for c in getattr(tree, "astad_cells", ()) if c in read]
    prologue = copy.deepcopy(tree)
    prologue.name = tree.name + "_prologue"
    returned = ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load())
    if layout is not None:
        returned = ast.Tuple([returned, ast.Name(layout, ast.Load())], ast.Load())
    prologue.body = copy.deepcopy(checks) + [ast.Return(returned)]
    for name in ("astad_cells", "astad_callees"):
        setattr(prologue, name, getattr(tree, name, () if name == "astad_cells" else {}))
    ast.fix_missing_locations(prologue)
    rewriter = _Kernel(set(names), tree, names_of(tree), forward)
    kernel = ast.FunctionDef(
        name="kernel", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(n) for n in names + state], vararg=None,
            kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=ast.parse(start).body + rewriter.block(copy.deepcopy(body)),
        decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:  # Python >= 3.12
        kernel.type_params = []
    text = "\n\n".join(ast.unparse(ast.fix_missing_locations(f))
                       for f in rewriter.nested + [kernel])
    return Parts(prologue, tuple(kinds.get(n, "plain" if n in params else "local")
                                 for n in names),
                 text, rewriter.returned, {**rewriter.namespace, **_always()},
                 tuple(f.name for f in rewriter.nested),
                 names.index(names_of(tree)["sink"]) if names_of(tree)["sink"] in names
                 else None)


def _always() -> dict:
    from . import numba_kernels
    import numpy as np
    return {"np": np, "swept": numba_kernels.swept, "swept_rows": numba_kernels.swept_rows,
            "VALUE": VALUE, "NONE": NONE, "FULL": FULL}


def _assigns(statement, name: str) -> bool:
    return isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
        isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == name


def _kinds(prologue: list, params: list) -> dict:
    """Each parameter's kind, as the prologue's checks say it: "float", "vector" (a list
    of floats), "matrix" (a list of lists), else "plain"."""
    kinds = {}
    for node in ast.walk(ast.Module(body=prologue, type_ignores=[])):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and \
                isinstance(node.ops[0], ast.Is) and ast.unparse(node.comparators[0]) == \
                "float" and isinstance(node.left.args[0], ast.Name):
            kinds[node.left.args[0].id] = "float"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            kind = {"float_lists": "vector", "float_rows": "matrix"}.get(node.func.attr)
            if kind is not None:
                kinds.update({a.id: kind for a in node.args if isinstance(a, ast.Name)})
            elif node.func.attr == "floats":
                kinds.update({a.id: "float" for a in node.args if isinstance(a, ast.Name)})
    # (a dataclass's fields are floats the prologue reads into locals: the kernel takes
    # those; a parameter of another kind the kernel reads is passed if it is a float, an
    # int or a bool, else the call runs the Python code, numba_backend._converted)
    return {p: kinds[p] for p in params if p in kinds}


class _Kernel(KernelExpressions, ast.NodeTransformer):
    """The statements after the prologue, rewritten for numba (the module docstring)."""

    def __init__(self, arguments: set, tree, names: dict, forward: bool = False):
        self.arguments, self.tree, self.forward = arguments, tree, forward
        # (a Jacobian's rows: each return gives values and rows, arrays, and their kind)
        self.rows = any(isinstance(n, ast.Attribute) and n.attr == "tape_rows_of"
                        for n in ast.walk(tree))
        self.n = names
        # the tape's state a function defined inside takes and gives back
        self.state = [names[key] for key in ("ti", "tp", "pos", "cap")]
        self.assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
                         isinstance(n.ctx, ast.Store)} | \
            {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | set(self.state)
        # the functions the writer defines inside (a helper that recurses, or returns in
        # a loop): each a numba function of its own, taking the tape's state
        self.functions = {n.name for n in ast.walk(tree)
                          if isinstance(n, ast.FunctionDef) and n is not tree}
        self.nested: list = []
        self.in_function = False
        self.returned: list = []  # (the kernel's name of each returned value, its source)
        self.width = None
        self.namespace: dict = {}  # the names the kernel's text calls

    def refuse(self, what: str, node):
        raise CannotCompile(f"{what} (line {getattr(node, 'lineno', '?')} of the code "
                            "written for floats)", node)

    def block(self, statements: list) -> list:
        out = []
        for k, s in enumerate(statements):
            if _assigns(s, s.targets[0].id if isinstance(s, ast.Assign) and
                        isinstance(s.targets[0], ast.Name) else "") and \
                    isinstance(s.value, ast.Constant) and type(s.value.value) is int and \
                    s.value.value == 0 and _summed_later(statements[k + 1:], s.targets[0].id):
                s.value = ast.Constant(0.0)  # (a sum's start: sum() replaces it, below)
            made = self.statement(s)
            out.extend(made if isinstance(made, list) else [made])
        return out

    def statement(self, s):
        if isinstance(s, ast.FunctionDef):
            return self.function(s)
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Name) and s.value.func.id in self.functions:
            return self.function_call(s)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Name) and s.value.func.id == self.n["record"]:
            return self.entry(s, s.value)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "append":
            s.value.args = [self.visit(a) for a in s.value.args]
            return s
        if isinstance(s, ast.Return):
            return self.returning(s)
        if isinstance(s, (ast.For, ast.While, ast.If)):
            if isinstance(s, ast.For):
                s.target, s.iter = self.visit(s.target), self.visit(s.iter)
            else:
                s.test = self.visit(s.test)
            s.body, s.orelse = self.block(s.body), self.block(s.orelse)
            return s
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and \
                s.target.id == self.n["last"]:  # (the entries' count: astad's own, small)
            return ast.copy_location(ast.Assign(targets=[s.target], value=ast.BinOp(
                ast.Name(s.target.id, ast.Load()), s.op, self.visit(s.value))), s)
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, (ast.Name, ast.Subscript)):
                self.refuse("an augmented assignment to an attribute", s)
            load = copy.deepcopy(s.target)
            load.ctx = ast.Load()
            s = ast.copy_location(ast.Assign(
                targets=[s.target], value=ast.BinOp(load, s.op, s.value)), s)
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
                isinstance(s.targets[0], ast.Subscript):  # (a write into a list or array)
            target = s.targets[0]
            if isinstance(target.slice, ast.Slice):
                self.refuse("a write into a slice", s)
            return ast.copy_location(ast.Expr(self.call("checked_set", [
                self.visit(target.value), self.visit(target.slice), self.visit(s.value)],
                s)), s)
        if isinstance(s, ast.Assign):
            if any(isinstance(n, ast.Subscript) for t in s.targets for n in ast.walk(t)):
                self.refuse("a write into a list inside an unpacking", s)
            s.value = self.visit(s.value)
            s.targets = [self.visit(t) for t in s.targets]
            return s
        if isinstance(s, (ast.Break, ast.Continue, ast.Pass)):
            return s
        self.refuse(f"the statement {ast.unparse(s).splitlines()[0]!r}", s)

    def entry(self, s, call):
        """``_record(s0, p0, ...)``: the pairs written into the tape's arrays."""
        items = call.args
        if not items or len(items) % 2 or any(isinstance(a, ast.Starred) for a in items):
            self.refuse("a tape entry of another form", s)
        width = len(items) // 2
        if self.width not in (None, width):
            self.refuse("tape entries of two widths", s)
        self.width = width
        # (written only while they fit: the count goes on, and a call whose tape did not
        # fit runs again with arrays of the size it counted; growing the arrays here would
        # make numba count references to them at every entry, 4x slower)
        n = self.n
        out = ast.parse(f"if {n['pos']} + {width} <= {n['cap']}:\n    pass").body
        writes = out[0].body = []
        for k in range(width):
            for array, item in ((n["ti"], items[2 * k]), (n["tp"], items[2 * k + 1])):
                writes.append(ast.Assign(
                    targets=[ast.Subscript(ast.Name(array, ast.Load()),
                                           ast.parse(f"{n['pos']} + {k}").body[0].value,
                                           ast.Store())],
                    value=self.visit(item)))
        out += ast.parse(f"{n['pos']} = {n['pos']} + {width}").body
        return [ast.copy_location(n, s) for n in out]

    def function(self, s):
        """A function the writer defined: ``f(..., _vlast, _record, _vsink)`` returning
        ``(value, index, _vlast)``, as ``f(..., _vlast, <the tape's state>, _vsink)``
        returning ``(value, index, _vlast, _vpos)``."""
        if s.decorator_list or s.args.vararg or s.args.kwarg or s.args.kwonlyargs or \
                s.args.defaults or \
                self.forward == (self.n["record"] in [a.arg for a in s.args.args]):
            self.refuse(f"the function {s.name} defined inside", s)
        s.args.args = [new for a in s.args.args for new in (
            [ast.arg(n) for n in self.state] if a.arg == self.n["record"] else [a])]
        outer, self.in_function = self.in_function, True
        s.body = self.block(s.body)
        self.in_function = outer
        self.nested.append(s)
        return []

    def function_call(self, s):
        call = s.value
        target = s.targets[0]
        if not (isinstance(target, ast.Tuple) and len(target.elts) == (2 if self.forward
                                                                         else 3)):
            self.refuse(f"{ast.unparse(s)!r}", s)
        call.args = [self.visit(new) for a in call.args for new in (
            [ast.Name(n, ast.Load()) for n in self.state]
            if isinstance(a, ast.Name) and a.id == self.n["record"] else [a])]
        target.elts = [self.visit(t) for t in target.elts]
        if not self.forward:  # (and the tape's count)
            target.elts.append(ast.Name(self.n["pos"], ast.Store()))
        return s

    def returning(self, s):
        call = s.value
        if self.forward:  # (value, tangent): as they are, each name's type checked
            if not isinstance(call, ast.Tuple) or len(call.elts) != 2:
                self.refuse(f"{ast.unparse(s)!r}", s)
            if not self.in_function:
                self.returned += [(None, n.id) for n in ast.walk(call)
                                  if isinstance(n, ast.Name)]
            s.value = self.visit(call)
            return s
        if self.in_function:  # (return value, index, _vlast: and the tape's count)
            if not (isinstance(call, ast.Tuple) and len(call.elts) == 3):
                self.refuse(f"{ast.unparse(s)!r}", s)
            call.elts = [self.visit(e) for e in call.elts] + \
                [ast.Name(self.n["pos"], ast.Load())]
            return s
        n = self.n
        empty = f"{n['none']}, {n['none']}.reshape(0, 0)" if self.rows else \
            f"0.0, {n['none']}"
        if isinstance(call, ast.Constant) and call.value is None:
            return ast.copy_location(ast.parse(
                f"return {empty}, {n['pos']}, NONE, 0").body[0], s)
        if self.rows:
            return self.returning_rows(s, call, empty)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                call.func.attr == "tape_gradient_of"):
            self.refuse("a return of another kind than one float (a Jacobian's rows are "
                        "not compiled yet)", s)
        _, width, value, index, sink, _ = call.args
        name = f"{n['ret']}{len(self.returned)}"
        self.returned.append((name, value.id if isinstance(value, ast.Name) else None))
        text = (f"{name} = 0\n"
                f"if {n['pos']} > {n['cap']}:\n"
                f"    return {empty}, {n['pos']}, FULL, 0\n"
                f"return {name}, swept({n['ti']}, {n['tp']}, {n['pos']}, {width.value}, "
                f"INDEX, SINK, {n['adj']}), {n['pos']}, VALUE, 0")
        out = ast.parse(text).body
        out[0].value = self.visit(value)
        out[2].value.elts[1].args[4] = self.visit(index)
        out[2].value.elts[1].args[5] = self.visit(sink)
        return [ast.copy_location(n, s) for n in out]

    def returning_rows(self, s, call, empty):
        """``return ad.tape_rows_of(tape, width, values, indices, sink, layout, kind)``:
        the values as an array, one sweep per output (numba_kernels.swept_rows), and the
        kind of container the values are returned in (ROW_KINDS)."""
        n = self.n
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                call.func.attr == "tape_rows_of" and len(call.args) == 7 and
                isinstance(call.args[6], ast.Constant)):
            self.refuse(f"{ast.unparse(s)!r}", s)
        _, width, values, indices, sink, _, kind = call.args
        if isinstance(values, ast.Tuple) and isinstance(indices, ast.Tuple):
            self.returned += [(None, v.id) for v in values.elts if isinstance(v, ast.Name)]
            values = ast.parse(f"np.array([{', '.join(['0.0'] * len(values.elts))}])",
                               mode="eval").body
            values.args[0].elts = [self.visit(v) for v in call.args[2].elts]
            indices = ast.parse("np.array([0], np.int64)", mode="eval").body
            indices.args[0].elts = [self.visit(i) for i in call.args[3].elts]
        elif all(isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and
                 a.func.id == "tuple" and len(a.args) == 1 for a in (values, indices)):
            # (a list or np.zeros it wrote, or a list it appended to: arrays here)
            values = self.call("float_array_of", [self.visit(values.args[0])], s)
            indices = self.call("int_array_of", [self.visit(indices.args[0])], s)
        else:
            self.refuse(f"{ast.unparse(s)!r}", s)
        name = f"{n['ret']}{len(self.returned)}"
        text = (f"{name} = VALUES\n"
                f"if {n['pos']} > {n['cap']}:\n"
                f"    return {empty}, {n['pos']}, FULL, 0\n"
                f"return {name}, swept_rows({n['ti']}, {n['tp']}, {n['pos']}, "
                f"{width.value}, INDICES, SINK, {n['adj']}), {n['pos']}, VALUE, "
                f"{ROW_KINDS.index(kind.value)}")
        out = ast.parse(text).body
        out[0].value = values
        out[2].value.elts[1].args[4] = indices
        out[2].value.elts[1].args[5] = self.visit(sink)
        return [ast.copy_location(node, s) for node in out]

def _summed_later(statements: list, name: str) -> bool:
    return any(_assigns(s, name) and isinstance(s.value, ast.Call) and
               isinstance(s.value.func, ast.Name) and s.value.func.id == "sum"
               for s in statements)
