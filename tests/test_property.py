"""Property test: astad's gradients of random programs match finite differences.

Hypothesis generates the source text of a function over 2-3 float parameters: straight
line assignments, augmented assignments, if/else statements (nested, sometimes with an
early return), conditional expressions and short ``for`` loops, built from
``+ - * /`` (division only by a quantity bounded away from zero), unary minus, ``** 2``,
int and float constants, and smooth math functions (sin, cos, tanh, atan, exp of a
bounded argument, sqrt(a*a + 1), log(a*a + 1)).

Each program is written to a real module file (astad reads source with ``inspect``),
imported, decorated with ``astad.reverse_diff`` and compared with central finite
differences. The same module holds a *traced* twin of the function that records every
intermediate value, every branch comparison and every divisor; an example is discarded
(``hypothesis.assume``) when a value is large or not finite, when a divisor is small,
or when a branch condition is close to flipping (the finite-difference steps must take
exactly the branches the primal took).

Budget: ``ASTAD_FUZZ_EXAMPLES`` examples (default 40), derandomized, no deadline.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import math
import os
import sys

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import astad
from oracles import assert_grad_close, central_fd

HAS_PREACCUMULATE = "preaccumulate" in inspect.signature(astad.reverse_diff).parameters

MAX_EXAMPLES = int(os.environ.get("ASTAD_FUZZ_EXAMPLES", "40"))

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

VALUE_LIMIT = 1e3          # every intermediate value must stay below this in magnitude
DIVISOR_MIN = 0.25         # every divisor of a raw division must be at least this large
BRANCH_MARGIN = 1e-3       # relative margin of every branch comparison
FD_EPS = 1e-6

# ---------------------------------------------------------------------------------------
# Program representation: expressions are nested tuples, rendered to two source texts
# (plain, for astad; traced, for the oracle's bookkeeping).
#   ("var", name) | ("const", text) | ("bin", op, a, b) | ("div", a, b) | ("safediv", a, b)
#   ("neg", a) | ("square", a) | ("fn", template, a) | ("ifexp", cmp, a, b, then, else)
# Statements:
#   ("assign", name, expr) | ("aug", name, op, expr) | ("if", cmp, a, b, then, else)
#   ("return", expr) | ("for", count, name, expr)     (body: name = expr, count times)

UNARY_TEMPLATES = [
    "math.sin({})",
    "math.cos({})",
    "math.tanh({})",
    "math.atan({})",
    "math.exp(math.sin({}))",
    "math.exp(math.tanh({}))",
    "math.sqrt({0} * {0} + 1.0)",
    "math.log({0} * {0} + 1.0)",
    "math.exp(-({0} * {0}))",
]
FLOAT_CONSTS = ["0.5", "1.5", "-2.0", "0.25", "3.0", "-0.75"]
INT_CONSTS = ["2", "3", "-1"]
CMP_OPS = [">", "<", ">=", "<="]


def render(expr, traced):
    kind = expr[0]
    if kind == "var":
        return expr[1]
    if kind == "const":
        return expr[1]
    if kind == "bin":
        return f"({render(expr[2], traced)} {expr[1]} {render(expr[3], traced)})"
    if kind == "div":
        den = render(expr[2], traced)
        if traced:
            den = f"_den({den})"
        return f"({render(expr[1], traced)} / {den})"
    if kind == "safediv":
        b = render(expr[2], traced)
        return f"({render(expr[1], traced)} / ({b} * {b} + 1.0))"
    if kind == "neg":
        return f"(-{render(expr[1], traced)})"
    if kind == "square":
        return f"({render(expr[1], traced)} ** 2)"
    if kind == "fn":
        inner = render(expr[2], traced)
        if traced:
            inner = f"_val({inner})"
        return expr[1].format(inner)
    if kind == "ifexp":
        _, op, a, b, then, other = expr
        cond = _render_cond(op, a, b, traced)
        return f"({render(then, traced)} if {cond} else {render(other, traced)})"
    raise AssertionError(kind)


def _render_cond(op, a, b, traced):
    ra, rb = render(a, traced), render(b, traced)
    if traced:
        return f"_cmp({ra}, {op!r}, {rb})"
    return f"{ra} {op} {rb}"


def render_block(stmts, indent, traced, lines):
    pad = "    " * indent
    for stmt in stmts:
        kind = stmt[0]
        if kind == "assign":
            value = render(stmt[2], traced)
            if traced:
                value = f"_val({value})"
            lines.append(f"{pad}{stmt[1]} = {value}")
        elif kind == "aug":
            _, name, op, expr = stmt
            if traced:
                lines.append(f"{pad}{name} = _val({name} {op} ({render(expr, traced)}))")
            else:
                lines.append(f"{pad}{name} {op}= {render(expr, traced)}")
        elif kind == "if":
            _, op, a, b, then, other = stmt
            lines.append(f"{pad}if {_render_cond(op, a, b, traced)}:")
            render_block(then, indent + 1, traced, lines)
            lines.append(f"{pad}else:")
            render_block(other, indent + 1, traced, lines)
        elif kind == "return":
            value = render(stmt[1], traced)
            if traced:
                value = f"_val({value})"
            lines.append(f"{pad}return {value}")
        elif kind == "for":
            _, count, name, expr = stmt
            lines.append(f"{pad}for _i in range({count}):")
            value = render(expr, traced)
            if traced:
                value = f"_val({value})"
            lines.append(f"{pad}    {name} = {value}")
        else:
            raise AssertionError(kind)


def render_function(name, params, body, traced):
    lines = [f"def {name}({', '.join(params)}):"]
    render_block(body, 1, traced, lines)
    return "\n".join(lines) + "\n"


MODULE_HEADER = '''\
import math

_TRACE = {"values": [], "divisors": [], "branches": []}


def _val(v):
    _TRACE["values"].append(v)
    return v


def _den(v):
    _TRACE["divisors"].append(v)
    return v


def _cmp(a, op, b):
    result = {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]
    _TRACE["branches"].append((a, b, result))
    return result


'''


# ---------------------------------------------------------------------------------------
# Hypothesis strategy


class _Gen:
    def __init__(self, draw, params):
        self.draw = draw
        self.params = params
        self.counter = itertools.count()

    def fresh(self):
        return f"v{next(self.counter)}"

    def leaf(self, scope):
        return ("var", self.draw(st.sampled_from(scope)))

    def const(self):
        return ("const", self.draw(st.sampled_from(FLOAT_CONSTS + INT_CONSTS)))

    def expr(self, scope, depth):
        """An expression that always mentions at least one variable of ``scope``."""
        if depth <= 0:
            return self.leaf(scope)
        kind = self.draw(st.sampled_from(
            ["leaf", "bin", "bin", "bin_const", "div", "safediv", "neg", "square",
             "fn", "fn", "ifexp"]))
        d = depth - 1
        if kind == "leaf":
            return self.leaf(scope)
        if kind == "bin":
            op = self.draw(st.sampled_from(["+", "-", "*"]))
            return ("bin", op, self.expr(scope, d), self.expr(scope, d))
        if kind == "bin_const":
            op = self.draw(st.sampled_from(["+", "-", "*", "/"]))
            if self.draw(st.booleans()) or op == "/":
                return ("bin", op, self.expr(scope, d), self.const())
            return ("bin", op, self.const(), self.expr(scope, d))
        if kind == "div":
            return ("div", self.expr(scope, d), self.expr(scope, d))
        if kind == "safediv":
            return ("safediv", self.expr(scope, d), self.expr(scope, d))
        if kind == "neg":
            return ("neg", self.expr(scope, d))
        if kind == "square":
            return ("square", self.expr(scope, d))
        if kind == "fn":
            return ("fn", self.draw(st.sampled_from(UNARY_TEMPLATES)), self.expr(scope, d))
        if kind == "ifexp":
            op = self.draw(st.sampled_from(CMP_OPS))
            return ("ifexp", op, self.leaf(scope), self.cmp_rhs(scope),
                    self.expr(scope, d), self.expr(scope, d))
        raise AssertionError(kind)

    def cmp_rhs(self, scope):
        if self.draw(st.booleans()):
            return self.leaf(scope)
        return ("const", self.draw(st.sampled_from(["0.0", "0.5", "-0.5", "1.0"])))

    def block(self, scope, n_stmts, depth, allow_return):
        """Statements; returns (stmts, names defined for sure after them, returned)."""
        stmts = []
        scope = list(scope)
        for _ in range(n_stmts):
            kind = self.draw(st.sampled_from(
                ["assign", "assign", "assign", "aug", "if", "for"] if depth > 0
                else ["assign", "assign", "aug", "for"]))
            if kind == "assign":
                name = self.fresh()
                stmts.append(("assign", name, self.expr(scope, self.draw(st.integers(1, 3)))))
                scope.append(name)
            elif kind == "aug":
                name = self.draw(st.sampled_from(scope))
                op = self.draw(st.sampled_from(["+", "-", "*"]))
                stmts.append(("aug", name, op, self.expr(scope, self.draw(st.integers(0, 2)))))
            elif kind == "for":
                name = self.draw(st.sampled_from(scope))
                count = self.draw(st.integers(1, 3))
                template = self.draw(st.sampled_from(UNARY_TEMPLATES))
                # name = f(name) + <expr>: bounded growth per iteration
                body = ("bin", "+", ("fn", template, ("var", name)),
                        ("bin", "*", ("const", "0.5"), self.expr(scope, 1)))
                stmts.append(("for", count, name, body))
            else:  # if/else that defines the same new names in both branches
                op = self.draw(st.sampled_from(CMP_OPS))
                a, b = self.leaf(scope), self.cmp_rhs(scope)
                new_names = [self.fresh() for _ in range(self.draw(st.integers(1, 2)))]
                branches = []
                returns = []
                for _branch in range(2):
                    returning = allow_return and not any(returns) and self.draw(
                        st.integers(0, 4)) == 0
                    if returning:
                        body = [("return", self.expr(scope, 2))]
                    else:
                        body = []
                        local = list(scope)
                        for name in new_names:
                            if depth > 1 and self.draw(st.integers(0, 3)) == 0:
                                inner, _, _ = self.nested_if_assigning(local, name, depth - 1)
                                body.append(inner)
                            else:
                                body.append(("assign", name, self.expr(local, 2)))
                            local.append(name)
                    branches.append(body)
                    returns.append(returning)
                stmts.append(("if", op, a, b, branches[0], branches[1]))
                scope.extend(new_names)
        return stmts, scope

    def nested_if_assigning(self, scope, name, depth):
        op = self.draw(st.sampled_from(CMP_OPS))
        a, b = self.leaf(scope), self.cmp_rhs(scope)
        then = [("assign", name, self.expr(scope, 2))]
        other = [("assign", name, self.expr(scope, 2))]
        return ("if", op, a, b, then, other), scope, False


@st.composite
def programs(draw):
    n_params = draw(st.integers(2, 3))
    params = [f"p{k}" for k in range(n_params)]
    gen = _Gen(draw, params)
    body, scope = gen.block(params, draw(st.integers(2, 6)), depth=2, allow_return=True)
    # the result combines the last defined value with a random earlier one
    last = ("var", scope[-1])
    other = gen.leaf(scope)
    result = ("bin", draw(st.sampled_from(["+", "-", "*"])), last, other)
    body.append(("return", result))
    args = tuple(draw(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False))
                 for _ in params)
    # avoid exact zeros and tiny values so that no argument sits at a special point
    args = tuple(a if abs(a) > 1e-3 else a + 0.1 for a in args)
    return params, body, args


_module_ids = itertools.count()


def load_program(tmp_path, params, body):
    """Write the program (plain and traced twins) to a fresh module; return the module."""
    plain = render_function("f", params, body, traced=False)
    traced = render_function("f_traced", params, body, traced=True)
    name = f"astad_fuzz_{os.getpid()}_{next(_module_ids)}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE_HEADER + plain + "\n\n" + traced)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module, plain


def run_traced(module, args):
    trace = module._TRACE
    for key in trace:
        trace[key].clear()
    try:
        value = module.f_traced(*args)
    except (OverflowError, ZeroDivisionError, ValueError):
        return None, None
    return value, {k: list(v) for k, v in trace.items()}


def well_conditioned(value, trace):
    if value is None or not math.isfinite(value) or abs(value) > VALUE_LIMIT:
        return False
    if any(not math.isfinite(v) or abs(v) > VALUE_LIMIT for v in trace["values"]):
        return False
    if any(abs(d) < DIVISOR_MIN for d in trace["divisors"]):
        return False
    for a, b, _ in trace["branches"]:
        if abs(a - b) <= BRANCH_MARGIN * (1.0 + abs(a) + abs(b)):
            return False
    return True


def branch_pattern(trace):
    return [r for _, _, r in trace["branches"]]


@FUZZ_SETTINGS
@given(program=programs())
def test_random_programs_match_finite_differences(tmp_path, program):
    params, body, args = program
    module, source = load_program(tmp_path, params, body)
    try:
        note(source)
        note(f"args = {args!r}")
        value, trace = run_traced(module, args)
        assume(well_conditioned(value, trace))
        # every finite-difference point must take exactly the same branches
        pattern = branch_pattern(trace)
        for k in range(len(args)):
            h = FD_EPS * max(1.0, abs(args[k]))
            for sign in (1.0, -1.0):
                shifted = list(args)
                shifted[k] = args[k] + sign * h
                v2, t2 = run_traced(module, shifted)
                assume(v2 is not None and math.isfinite(v2))
                assume(branch_pattern(t2) == pattern)

        assert module.f(*args) == value  # the traced twin computes the same function
        f = astad.reverse_diff(module.f)
        ad_value, grad = f.value_and_grad(*args)
        assert ad_value == value
        assert type(grad) is tuple and len(grad) == len(args)

        expected = central_fd(module.f, args, tuple(range(len(args))), eps=FD_EPS)
        scale = 1.0 + max(abs(v) for v in [value, *trace["values"]])
        note(f"astad grad = {grad!r}\nfinite differences = {expected!r}")
        assert_grad_close(grad, expected, rtol=1e-5, atol=1e-7 * scale + 1e-6)

        # the pullback is linear in the cotangent (up to rounding in the sweep's sums)
        _, pullback = f.vjp(*args)
        assert_grad_close(pullback(-2.5), tuple(-2.5 * g for g in grad),
                          rtol=1e-12, atol=1e-12 * scale)

        # one tape entry per primitive operation (when astad can preaccumulate, its
        # default) gives the same value and gradient, on a tape at least as long
        if HAS_PREACCUMULATE:
            g = astad.reverse_diff(module.f, preaccumulate=False)
            p_value, p_pullback = g.vjp(*args)
            assert p_value == value
            assert_grad_close(p_pullback(1.0), grad, rtol=1e-10, atol=1e-12 * scale)
            assert p_pullback.tape_length >= pullback.tape_length
    finally:
        sys.modules.pop(module.__name__, None)


# ---------------------------------------------------------------------------------------
# The generator itself: it must produce the constructs it claims to (so the property
# above is not vacuous), and rendered programs must be valid Python.


def _kinds(stmts, out):
    for s in stmts:
        out.add(s[0])
        if s[0] == "if":
            _kinds(s[4], out)
            _kinds(s[5], out)
        for part in s[1:]:
            if isinstance(part, tuple):
                _expr_kinds(part, out)


def _expr_kinds(e, out):
    if isinstance(e, tuple) and e and isinstance(e[0], str):
        out.add("expr:" + e[0])
        for part in e[1:]:
            if isinstance(part, tuple):
                _expr_kinds(part, out)


def test_generator_covers_constructs():
    seen: set = set()
    given_fn = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                        suppress_health_check=[HealthCheck.too_slow,
                                               HealthCheck.data_too_large])(
        given(program=programs())(lambda program: _kinds_checked(program, seen)))
    given_fn()
    for kind in ["assign", "aug", "if", "for", "return", "expr:bin", "expr:div",
                 "expr:safediv", "expr:neg", "expr:square", "expr:fn", "expr:ifexp",
                 "expr:const", "expr:var"]:
        assert kind in seen, f"the program generator never produced {kind}"


def _kinds_checked(program, seen):
    params, body, args = program
    compile(render_function("f", params, body, traced=False), "<generated>", "exec")
    compile(render_function("f_traced", params, body, traced=True), "<generated>", "exec")
    _kinds(body, seen)


@pytest.mark.parametrize("body, args, expected_source_line", [
    ([("if", ">", ("var", "p0"), ("const", "0.5"),
       [("assign", "v0", ("fn", "math.sin({})", ("var", "p1")))],
       [("return", ("bin", "*", ("var", "p0"), ("var", "p1")))]),
      ("return", ("bin", "+", ("var", "v0"), ("var", "p0")))],
     (1.0, 0.3), "    if p0 > 0.5:"),
])
def test_rendered_program_example(tmp_path, body, args, expected_source_line):
    """A fixed program through the whole pipeline, with a hand-derived gradient."""
    module, source = load_program(tmp_path, ["p0", "p1"], body)
    try:
        assert expected_source_line in source.splitlines()
        f = astad.reverse_diff(module.f)
        # p0 > 0.5: f = sin(p1) + p0
        assert_grad_close(f.grad(*args), (1.0, math.cos(0.3)), rtol=1e-12, atol=1e-15)
        # p0 <= 0.5: f = p0 * p1 (early return)
        assert_grad_close(f.grad(0.25, 0.3), (0.3, 0.25), rtol=1e-12, atol=1e-15)
        value, trace = run_traced(module, (0.25, 0.3))
        assert value == 0.25 * 0.3 and branch_pattern(trace) == [False]
    finally:
        sys.modules.pop(module.__name__, None)
