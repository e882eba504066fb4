"""Property test: astad's gradients of random programs match two independent oracles.

Hypothesis writes the source text of a small module: dataclasses ``Pt`` (a record) and
``Circle | Rect`` (a tagged union), a few helper functions (plain, self-recursive, and one
that takes the union apart with ``match``, ``isinstance`` or a tag field) and a function
``f`` over two floats and, sometimes, a list of floats, a ``Pt`` and a union value. Bodies
hold assignments, augmented assignments, ``if``/``else`` (nested, with early returns),
conditional expressions, ``for`` loops over ``range`` and over lists (``enumerate``,
``zip``) with ``break``, ``continue`` and ``else``, ``while`` loops with ``break``,
early returns inside loops, list comprehensions, ``append``, indexing, item and field
assignment (mutating the caller's arguments), ``sum``/``max``/``min``, dataclass
construction, ``dataclasses.replace``, a method, a property and a dunder operator of
``Pt``, lambdas and nested ``def``s closing over local floats, swaps, ``** 2``/``** 3``,
division and smooth math functions, and calls between the generated functions (self
and mutual recursion included).

Every program is written to a real file (astad reads source with ``inspect``) and
loaded twice: once with the real ``math`` (for astad and for finite differences) and
once with ``forward_mode.fmath`` (the forward-mode oracle). For each float leaf of the
arguments:

* forward mode, seeded on that leaf, gives the partial derivative exactly up to
  rounding; astad must agree to ~1e-9 relative to the size of the intermediate
  tangents;
* central finite differences (step h and 2h, on the same branches) must agree within a
  tolerance set by the function's conditioning: the two steps' disagreement estimates
  the truncation error, and the largest intermediate value the rounding error.

An example is discarded (``hypothesis.assume``) when a value is large or not finite, or
when a decision on a float (a comparison, ``max``, ...) or a singularity lies within
100 finite-difference steps (``forward_mode.Trace``). When the original function raises
(a domain error), ``.grad`` must raise the same exception. astad's value must equal the
original's exactly, its pullback must be linear, ``preaccumulate=False`` must give the
same gradient, the caller's arguments must end as the original leaves them (holding no
dual), and a gradient with respect to a random subset of the arguments (``argnums``)
must be the matching part of the full one.

Budget: ``ASTAD_FUZZ_EXAMPLES`` programs (default 60, a few seconds), derandomized so
that CI checks the same programs every time; ``ASTAD_FUZZ_SEED=n`` draws other programs.
A long run: ``ASTAD_FUZZ_EXAMPLES=3000 pytest tests/test_property.py -s`` (prints the
count of programs checked). Every failure found so far is a plain regression test at
the end of this file.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import importlib.util
import itertools
import math
import os
import signal
import sys
import tempfile
import threading
import types

import numpy as np

import pytest
import hypothesis
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import astad
from astad.runtime.duals import DUAL_TYPES
from forward_mode import Fwd, Trace, builtin_sum, fmath, ftype, primal, refusing, tangent
from oracles import assert_grad_close

MAX_EXAMPLES = int(os.environ.get("ASTAD_FUZZ_EXAMPLES", "60"))
SEED = os.environ.get("ASTAD_FUZZ_SEED")  # unset: the same programs on every run (CI)

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=SEED is None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)

VALUE_LIMIT = 1e4      # every intermediate value (and tangent) must stay below this
FD_EPS = 1e-6

# ---------------------------------------------------------------------------------------
# The program generator: writes source text directly. ``Scope`` says what is visible.

UNARY_TEMPLATES = [
    "math.sin({})", "math.cos({})", "math.tanh({})", "math.atan({})",
    "math.exp(math.sin({}))", "math.sqrt({0} * {0} + 1.0)", "math.log({0} * {0} + 1.0)",
    "math.exp(-({0} * {0}))", "math.hypot({}, 1.0)", "abs({})",
]
FLOAT_CONSTS = ["0.5", "1.5", "-2.0", "0.25", "3.0", "-0.75"]
INT_CONSTS = ["2", "3", "-1"]
CMP_OPS = [">", "<", ">=", "<="]

MODULE_HEADER = '''\
import collections
import dataclasses
import functools
import numbers
import struct
import types
from dataclasses import dataclass

import numpy as np

BIG = 2 ** 60
LOG = []
SEEN = {}
act = math.tanh


def reset_act():  # (a helper with a global statement: astad runs it as it is)
    global act
    act = math.tanh


def use_sin():
    global act
    act = math.sin


def opaque(x):  # no derivative (a C round trip): astad refuses a differentiated value
    return struct.unpack("d", struct.pack("d", x))[0]


class FList(list):
    pass


class FDict(dict):
    def weighted(self, c):
        return self["a"] * c + self["b"]


@functools.singledispatch
def sd(v):
    return 0.0 * v


@sd.register(float)
def _sd_float(v):
    return v * v + 1.0


@dataclass
class Pt:
    x: float
    y: float

    def scaled(self, c):
        return self.x * c + math.sin(self.y)

    @property
    def norm2(self):
        return self.x * self.x + self.y * self.y

    def __add__(self, other):
        return Pt(self.x + other.x, self.y * other.y)


@dataclass
class Circle:
    r: float
    kind: str = "circle"


@dataclass
class Rect:
    w: float
    h: float
    kind: str = "rect"

'''


@dataclasses.dataclass
class Scope:
    floats: list           # expressions without side effects that hold a float
    lists: list            # (name, minimum length) of lists of floats
    unions: list           # names holding a Circle or a Rect
    mutable: list          # float targets that may be assigned (names, fields, items)
    records: list = dataclasses.field(default_factory=list)    # names holding a Pt
    closures: list = dataclasses.field(default_factory=list)   # lambdas and nested defs
    dicts: list = dataclasses.field(default_factory=list)      # names holding an FDict

    def copy(self):
        return Scope(list(self.floats), list(self.lists), list(self.unions),
                     list(self.mutable), list(self.records), list(self.closures),
                     list(self.dicts))


class Gen:
    def __init__(self, draw):
        self.draw = draw
        self.counter = itertools.count()
        self.used: set = set()        # constructs produced (the generator's own test)
        self.helpers: list = []       # names of helpers h(a, b) visible to later code
        self.recursive: list = []     # names of helpers r(a, n), self-recursive
        self.union_fns: list = []     # names of helpers u(s, c) over the union
        self.loop_depth = 0
        self.iterating: list = []     # lists a loop is walking: never appended to
        self.act = False              # does f reset the global ``act`` first (rebinding)?
        self.extreme = False          # huge or tiny intermediate values (the trace's limits)

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, one_in: int) -> bool:
        return self.draw(st.integers(0, one_in - 1)) == 0

    def fresh(self, prefix="v"):
        return f"{prefix}{next(self.counter)}"

    # -- expressions --------------------------------------------------------------------
    def leaf(self, scope):
        return self.pick(scope.floats)

    def const(self):
        return self.pick(FLOAT_CONSTS + INT_CONSTS)

    def cond(self, scope):
        self.used.add("compare")
        rhs = self.leaf(scope) if self.chance(2) else self.pick(["0.0", "0.5", "-0.5", "1.0"])
        return f"{self.leaf(scope)} {self.pick(CMP_OPS)} {rhs}"

    def expr(self, scope, depth):
        """An expression that mentions at least one float of ``scope``."""
        if depth <= 0:
            return self.leaf(scope)
        kinds = ["leaf", "bin", "bin", "bin_const", "div", "safediv", "neg", "power",
                 "fn", "fn", "ifexp"]
        if self.helpers:
            kinds += ["call"]
        if self.recursive:
            kinds += ["rec"]
        if self.union_fns and scope.unions:
            kinds += ["union"]
        if scope.lists:
            kinds += ["list_item", "list_reduce"]
        if scope.records:
            kinds += ["method", "property"]
        if scope.closures:
            kinds += ["closure_call", "closure_call"]
        # issue 12's classes: type tests, numpy on lists, ints through sum, extreme
        # magnitudes, a global rebound during the call, a dict subclass's method
        # (two of them at a time: the older kinds keep most of their weight)
        kinds += [self.pick(["type_test", "dispatch", "numpy_list", "numpy_list", "int_sum",
                             "extreme"]) for _ in range(2)]
        if self.act:
            kinds += ["act"]
        if scope.dicts:
            kinds += ["dict_method", "dict_method"]
        kind = self.pick(kinds)
        self.used.add(kind)
        d = depth - 1
        if kind in NEW_EXPRESSIONS:
            return getattr(self, "expr_" + kind)(scope, d)
        if kind == "method":
            return f"{self.pick(scope.records)}.scaled({self.expr(scope, d)})"
        if kind == "property":
            return f"{self.pick(scope.records)}.norm2"
        if kind == "closure_call":
            return f"{self.pick(scope.closures)}({self.expr(scope, d)})"
        if kind == "leaf":
            return self.leaf(scope)
        if kind == "bin":
            op = self.pick(["+", "-", "*"])
            return f"({self.expr(scope, d)} {op} {self.expr(scope, d)})"
        if kind == "bin_const":
            op = self.pick(["+", "-", "*", "/"])
            if op == "/" or self.chance(2):
                return f"({self.expr(scope, d)} {op} {self.const()})"
            return f"({self.const()} {op} {self.expr(scope, d)})"
        if kind == "div":  # the trace rejects divisors near zero
            return f"({self.expr(scope, d)} / {self.expr(scope, d)})"
        if kind == "safediv":
            b = self.expr(scope, d)
            return f"({self.expr(scope, d)} / ({b} * {b} + 1.0))"
        if kind == "neg":
            return f"(-{self.expr(scope, d)})"
        if kind == "power":
            return f"({self.expr(scope, d)} ** {self.pick(['2', '3'])})"
        if kind == "fn":
            return self.pick(UNARY_TEMPLATES).format(self.expr(scope, d))
        if kind == "ifexp":
            return f"({self.expr(scope, d)} if {self.cond(scope)} else {self.expr(scope, d)})"
        if kind == "call":
            return f"{self.pick(self.helpers)}({self.expr(scope, d)}, {self.expr(scope, d)})"
        if kind == "rec":
            return f"{self.pick(self.recursive)}({self.expr(scope, d)}, " \
                   f"{self.draw(st.integers(0, 4))})"
        if kind == "union":
            return f"{self.pick(self.union_fns)}({self.pick(scope.unions)}, " \
                   f"{self.expr(scope, d)})"
        if kind == "list_item":
            name, length = self.pick(scope.lists)
            index = self.draw(st.integers(-length, length - 1))
            return f"{name}[{index}]"
        if kind == "list_reduce":
            name, _ = self.pick(scope.lists)
            reducer = self.pick(["sum", "max", "min", "sum_sq"])
            self.used.add("reduce:" + reducer)
            if reducer == "sum_sq":
                return f"sum([t * t for t in {name}])"
            return f"{reducer}({name})"
        raise AssertionError(kind)

    # -- issue 12's classes -----------------------------------------------------------------
    def expr_type_test(self, scope, d):
        """A branch on a type test that holds for the original value (a float, or numpy's
        float64, which numpy functions give): the other branch is wrong."""
        leaf = self.leaf(scope)
        test = self.pick([f"isinstance({leaf}, float)", f"isinstance({leaf}, numbers.Real)",
                          f"not isinstance({leaf}, int)",
                          f"isinstance({leaf}, (int, float))"])
        return f"({self.expr(scope, d)} if {test} else {self.expr(scope, d)})"

    def expr_dispatch(self, scope, d):
        return f"sd({self.expr(scope, d)})"  # functools.singledispatch on the value's class

    def expr_numpy_list(self, scope, d):
        a, b = self.expr(scope, d), self.expr(scope, d)
        form = self.pick(["sum", "dot", "max", "cumsum", "sort", "concatenate", "diff", "exp"])
        self.used.add("numpy:" + form)
        return {"sum": f"np.sum([{a}, {b}])", "dot": f"np.dot([{a}, {b}], [0.5, {b}])",
                "max": f"np.max([{a}, {b}])",
                "cumsum": f"np.cumsum([{a}, {b}])[1]", "sort": f"np.sort([{a}, {b}])[0]",
                "concatenate": f"np.concatenate([[{a}], [{b}, 0.5]])[1]",
                "diff": f"np.diff([{a}, {b}])[0]",
                "exp": f"np.sum(np.exp([math.sin({a}), math.cos({b})]))"}[form]

    def expr_int_sum(self, scope, d):
        e = self.expr(scope, d)
        form = self.pick(["big", "index", "prod", "empty"])
        self.used.add("ints:" + form)
        if form == "big":  # exact ints: 1 (floats would give 0)
            return f"({e} * (sum([BIG, 1]) - BIG))"
        if form == "prod":
            return f"({e} * (math.prod([BIG, 2]) - 2 * BIG + 1))"
        if form == "empty":
            return f"({e} * (2 if type(sum([])) is int and sum([]) == 0 else 3))"
        return f"({e} * [0.5, 1.5, 2.5][sum([1, 1]) % 3])"

    def expr_extreme(self, scope, d):
        """Intermediate values near the ends of the float range, a moderate result: the
        rules' partials must neither overflow nor underflow there."""
        self.extreme = True
        e = f"math.tanh({self.expr(scope, d)})"  # (bounded: the scales stay in range)
        form = self.pick(["square", "cube", "atan2", "hypot"])
        self.used.add("extreme:" + form)
        return {"square": f"((({e}) * 1e153) ** 2 * 1e-306)",
                "cube": f"((({e}) * 1e-100) ** 3 * 1e300)",
                "atan2": f"math.atan2(({e}) * 1e-200, 3e-200)",
                "hypot": f"(math.hypot(({e}) * 1e200, 1e200) * 1e-200)"}[form]

    def expr_act(self, scope, d):
        return f"act({self.expr(scope, d)})"

    def expr_dict_method(self, scope, d):
        name = self.pick(scope.dicts)
        return f"{name}.weighted({self.expr(scope, d)})" if self.chance(2) else f'{name}["a"]'

    def stmt_match_type(self, scope, depth, out, pad):
        name = self.fresh()
        out += [f"{pad}match {self.expr(scope, 2)}:",
                f"{pad}    case int():", f"{pad}        {name} = 0.0",
                f"{pad}    case float(z):", f"{pad}        {name} = z * 0.5",
                f"{pad}    case _:", f"{pad}        {name} = 1.0"]
        scope.floats.append(name)

    def stmt_user_except(self, scope, depth, out, pad):
        """A refused call inside the user's try: astad must end the call with the refusal,
        not let the fallback run (the oracle records that a dual reached it)."""
        name = self.fresh()
        out += [f"{pad}try:", f"{pad}    {name} = opaque({self.expr(scope, 1)})",
                f"{pad}except Exception:", f"{pad}    {name} = {self.expr(scope, 1)}"]
        scope.floats.append(name)

    def stmt_order(self, scope, depth, out, pad):
        """Python raises the square root's ValueError first; a name read early would raise
        NameError first and take the other branch."""
        name = self.fresh()
        out += [f"{pad}try:", f"{pad}    {name} = math.sqrt(-1.0 - abs({self.expr(scope, 1)}))"
                f" + {self.fresh('missing')}",
                f"{pad}except ValueError:", f"{pad}    {name} = {self.expr(scope, 1)}",
                f"{pad}except NameError:", f"{pad}    {name} = {self.expr(scope, 1)} * 7.0"]
        scope.floats.append(name)

    def stmt_leftover(self, scope, depth, out, pad):
        """Values stored where they outlive the call: they must end plain."""
        if self.chance(2):
            out.append(f"{pad}LOG.append({self.expr(scope, 1)})")
        else:
            out.append(f"{pad}SEEN[{self.expr(scope, 1)}] = ({self.leaf(scope)}, 'seen')")

    def stmt_rebind(self, scope, depth, out, pad):
        if not self.act:
            return self.stmt_assign(scope, depth, out, pad)
        out.append(f"{pad}use_sin()")  # act is math.sin from here: astad must see it

    def bounded(self, scope):
        """A bounded expression, for loop bodies (no growth across iterations)."""
        return self.pick(["math.tanh({})", "math.sin({})", "math.atan({})"]).format(
            self.expr(scope, self.draw(st.integers(1, 2))))

    # -- statements ---------------------------------------------------------------------
    def block(self, scope, n_stmts, depth, out, pad, loop=False):
        """Append statements to ``out``; return the scope after them (names defined on
        every path). ``loop``: inside a loop body (break and continue allowed)."""
        scope = scope.copy()
        for _ in range(n_stmts):
            kinds = ["assign", "assign", "aug"]
            if depth > 0:
                kinds += ["if", "for", "while", "return_if"]
                if scope.lists:
                    kinds += ["for_list", "for_list"]
            if scope.lists:
                kinds += ["comprehension", "append", "set_item"]
            kinds += ["record", "union"] if self.union_fns else ["record"]
            kinds += ["closure", "swap"]
            kinds.append(self.pick(["match_type", "order", "leftover", "rebind"]))
            if self.chance(6):
                kinds.append("user_except")
            if loop:
                kinds += ["break", "continue"]
            kind = self.pick(kinds)
            self.used.add(kind)
            getattr(self, "stmt_" + kind)(scope, depth, out, pad)
            if kind in ("break", "continue"):
                break
        return scope

    def stmt_assign(self, scope, depth, out, pad):
        name = self.fresh()
        out.append(f"{pad}{name} = {self.expr(scope, self.draw(st.integers(1, 3)))}")
        scope.floats.append(name)
        scope.mutable.append(name)

    def stmt_aug(self, scope, depth, out, pad):
        target = self.pick(scope.mutable)
        op = self.pick(["+", "-", "*"])
        value = self.expr(scope, self.draw(st.integers(0, 2)))
        if op == "*" and self.loop_depth:
            value = self.bounded(scope)
        out.append(f"{pad}{target} {op}= {value}")

    def stmt_if(self, scope, depth, out, pad):
        new_names = [self.fresh() for _ in range(self.draw(st.integers(1, 2)))]
        out.append(f"{pad}if {self.cond(scope)}:")
        returned = False
        for branch in range(2):
            if branch:
                out.append(f"{pad}else:")
            if not returned and not self.loop_depth and self.chance(5):
                self.used.add("early_return")
                out.append(f"{pad}    return {self.expr(scope, 2)}")
                returned = True
                continue
            local = scope.copy()
            if self.chance(3):  # some other statements first
                local = self.block(local, 1, depth - 1, out, pad + "    ")
            for name in new_names:
                out.append(f"{pad}    {name} = {self.expr(local, 2)}")
                local.floats.append(name)
        scope.floats.extend(new_names)
        scope.mutable.extend(new_names)

    def stmt_return_if(self, scope, depth, out, pad):
        out.append(f"{pad}if {self.cond(scope)}:")
        out.append(f"{pad}    return {self.expr(scope, 2)}")
        if self.loop_depth:
            self.used.add("return_in_loop")

    def stmt_break(self, scope, depth, out, pad):
        out.append(f"{pad}if {self.cond(scope)}:")
        out.append(f"{pad}    break")

    def stmt_continue(self, scope, depth, out, pad):
        out.append(f"{pad}if {self.cond(scope)}:")
        out.append(f"{pad}    continue")

    def _loop_body(self, scope, depth, out, pad, accumulators):
        self.loop_depth += 1
        body = scope.copy()
        body.mutable = list(accumulators)  # only accumulators outlive an iteration
        for acc in accumulators:
            if self.chance(2):
                out.append(f"{pad}{acc} = 0.5 * {self.bounded(body)} + 0.5 * {acc}")
            else:
                out.append(f"{pad}{acc} += {self.bounded(body)}")
        self.block(body, self.draw(st.integers(0, 2)), depth - 1, out, pad, loop=True)
        self.loop_depth -= 1

    def _accumulators(self, scope, out, pad):
        acc = self.fresh("acc")
        out.append(f"{pad}{acc} = {self.expr(scope, 1)}")
        scope.floats.append(acc)
        scope.mutable.append(acc)
        return [acc]

    def stmt_for(self, scope, depth, out, pad):
        accs = self._accumulators(scope, out, pad)
        i = self.fresh("i")
        out.append(f"{pad}for {i} in range({self.draw(st.integers(0, 4))}):")
        self._loop_body(scope, depth, out, pad + "    ", accs)
        if self.chance(3):
            self.used.add("for_else")
            out.append(f"{pad}else:")
            out.append(f"{pad}    {accs[0]} = {accs[0]} + {self.expr(scope, 1)}")

    def stmt_for_list(self, scope, depth, out, pad):
        accs = self._accumulators(scope, out, pad)
        name, _ = self.pick(scope.lists)
        x = self.fresh("x")
        form = self.pick(["plain", "enumerate", "zip"])
        self.used.add("for_" + form)
        inner = scope.copy()
        inner.floats.append(x)
        if form == "plain":
            out.append(f"{pad}for {x} in {name}:")
        elif form == "enumerate":
            k = self.fresh("k")
            out.append(f"{pad}for {k}, {x} in enumerate({name}):")
            inner.floats.append(f"({x} * {k})")
        else:
            y = self.fresh("x")
            other, _ = self.pick(scope.lists)
            out.append(f"{pad}for {x}, {y} in zip({name}, {other}):")
            inner.floats.append(y)
        walked = [name] if form != "zip" else [name, other]
        self.iterating += walked
        self._loop_body(inner, depth, out, pad + "    ", accs)
        del self.iterating[-len(walked):]

    def stmt_while(self, scope, depth, out, pad):
        accs = self._accumulators(scope, out, pad)
        k = self.fresh("k")
        out.append(f"{pad}{k} = 0")
        limit = self.draw(st.integers(0, 4))
        condition = f"{k} < {limit}"
        if self.chance(2):
            self.used.add("while_float_condition")
            condition += f" and {accs[0]} < {self.pick(['2.0', '5.0', '0.5'])}"
        out.append(f"{pad}while {condition}:")
        out.append(f"{pad}    {k} += 1")  # first, so that continue cannot loop forever
        self._loop_body(scope, depth, out, pad + "    ", accs)

    def stmt_comprehension(self, scope, depth, out, pad):
        name, length = self.pick(scope.lists)
        x = self.fresh("x")
        inner = scope.copy()
        inner.floats.append(x)
        new = self.fresh("ys")
        out.append(f"{pad}{new} = [{self.expr(inner, 2)} for {x} in {name}]")
        scope.lists.append((new, length))

    def stmt_append(self, scope, depth, out, pad):
        growable = [entry for entry in scope.lists if entry[0] not in self.iterating]
        if not growable:
            return self.stmt_assign(scope, depth, out, pad)
        name, length = self.pick(growable)
        out.append(f"{pad}{name}.append({self.expr(scope, 2)})")
        scope.lists[scope.lists.index((name, length))] = (name, length + 1)

    def stmt_set_item(self, scope, depth, out, pad):
        name, length = self.pick(scope.lists)
        out.append(f"{pad}{name}[{self.draw(st.integers(0, length - 1))}] = "
                   f"{self.expr(scope, 2)}")

    def stmt_record(self, scope, depth, out, pad):
        q = self.fresh("q")
        form = self.pick(["construct", "replace", "operator"] if scope.records
                         else ["construct"])
        self.used.add(form)
        if form == "replace":
            out.append(f"{pad}{q} = dataclasses.replace({self.pick(scope.records)}, "
                       f"y={self.expr(scope, 2)})")
        elif form == "operator":  # Pt.__add__, a user dunder operator
            out.append(f"{pad}{q} = {self.pick(scope.records)} + Pt({self.expr(scope, 1)}, "
                       f"{self.bounded(scope)})")
        else:
            out.append(f"{pad}{q} = Pt({self.expr(scope, 2)}, {self.expr(scope, 1)})")
        scope.floats += [f"{q}.x", f"{q}.y"]
        scope.mutable.append(f"{q}.x")
        scope.records.append(q)

    def stmt_closure(self, scope, depth, out, pad):
        """A lambda or a nested def over one parameter, closing over the scope's floats."""
        g = self.fresh("g")
        inner = scope.copy()
        inner.floats.append("t")
        if self.chance(2):
            self.used.add("lambda")
            out.append(f"{pad}{g} = lambda t: {self.expr(inner, 2)}")
        else:
            self.used.add("nested_def")
            out.append(f"{pad}def {g}(t):")
            out.append(f"{pad}    return {self.expr(inner, 2)}")
        scope.closures.append(g)

    def stmt_swap(self, scope, depth, out, pad):
        names = [m for m in scope.mutable if m.isidentifier()]
        if len(names) < 2:
            return self.stmt_assign(scope, depth, out, pad)
        a, b = self.draw(st.permutations(names))[:2]
        out.append(f"{pad}{a}, {b} = {b}, {a}")

    def stmt_union(self, scope, depth, out, pad):
        u = self.fresh("u")
        out.append(f"{pad}{u} = Circle({self.expr(scope, 1)}) if {self.cond(scope)} "
                   f"else Rect({self.expr(scope, 1)}, {self.expr(scope, 1)})")
        scope.unions.append(u)

    # -- functions ----------------------------------------------------------------------
    def helper(self, out):
        name = self.fresh("h")
        scope = Scope(["a", "b"], [], [], ["a", "b"])
        out.append(f"def {name}(a, b):")
        body = []
        scope = self.block(scope, self.draw(st.integers(0, 3)), 1, body, "    ")
        out.extend(body)
        out.append(f"    return {self.expr(scope, 2)}")
        out.append("")
        self.helpers.append(name)

    def recursive_helper(self, out):
        """r(a, n): n levels deep, each level a bounded function of the one below; either
        self-recursive or one of a mutually recursive pair."""
        name = self.fresh("r")
        mutual = self.chance(3)
        names = [name, name + "_other"] if mutual else [name]
        if mutual:
            self.used.add("mutual_recursion")
        for k, this in enumerate(names):
            callee = names[(k + 1) % len(names)]
            a_only = Scope(["a"], [], [], [])
            out.append(f"def {this}(a, n):")
            out.append("    if n <= 0:")
            out.append(f"        return {self.expr(a_only, 2)}")
            out.append(f"    below = {callee}({self.expr(a_only, 1)}, n - 1)")
            scope = Scope(["a", "below"], [], [], [])
            out.append(f"    return {self.bounded(scope)} + {self.expr(a_only, 1)}")
            out.append("")
        self.recursive.append(name)

    def union_helper(self, out):
        """u(s, c): takes the union apart with match, isinstance or its tag field."""
        name = self.fresh("u")
        style = self.pick(["match", "isinstance", "tag"])
        self.used.add("union_" + style)
        circle = self.expr(Scope(["s.r", "c"], [], [], []), 2)
        rect = self.expr(Scope(["s.w", "s.h", "c"], [], [], []), 2)
        out.append(f"def {name}(s, c):")
        if style == "match":
            out += ["    match s:", "        case Circle(r=r):",
                    f"            return {circle.replace('s.r', 'r')}",
                    "        case Rect(w=w, h=h):",
                    f"            return {rect.replace('s.w', 'w').replace('s.h', 'h')}",
                    "    raise TypeError(s)"]
        elif style == "isinstance":
            out += ["    if isinstance(s, Circle):", f"        return {circle}",
                    f"    return {rect}"]
        else:
            out += ['    if s.kind == "circle":', f"        return {circle}",
                    f"    return {rect}"]
        out.append("")
        self.union_fns.append(name)


NEW_EXPRESSIONS = {"type_test", "dispatch", "numpy_list", "int_sum", "extreme", "act",
                   "dict_method"}


@dataclasses.dataclass
class Program:
    source: str       # the module text after MODULE_HEADER
    spec: list        # the arguments: ("float", v) | ("list", [v..]) | ("pt", x, y) | ...
    used: set
    argnums: object   # an int or a tuple: a second gradient, of some arguments only
    extreme: bool = False  # intermediate values near the ends of the float range


@st.composite
def programs(draw):
    gen = Gen(draw)
    gen.act = draw(st.booleans())  # f resets the global act first, helpers may rebind it
    out: list = []
    for _ in range(draw(st.integers(0, 2))):
        gen.helper(out)
    if draw(st.booleans()):
        gen.recursive_helper(out)
    if draw(st.booleans()):
        gen.union_helper(out)

    def real():
        a = draw(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False))
        return a if abs(a) > 1e-3 else a + 0.1

    params, spec = ["p0", "p1"], [("float", real()), ("float", real())]
    scope = Scope(["p0", "p1"], [], [], ["p0", "p1"])
    if draw(st.booleans()):
        values = [real() for _ in range(draw(st.integers(1, 4)))]
        # a list, a list subclass, a deque, or a list of numpy.float64 (issue 12, class 4)
        kind = draw(st.sampled_from(["list", "list", "flist", "deque", "np64list"]))
        gen.used.add("argument:" + kind)
        params.append("xs")
        spec.append((kind, values))
        scope.lists.append(("xs", len(values)))
    if draw(st.integers(0, 2)) == 0:
        kind = draw(st.sampled_from(["fdict", "ns", "np64"]))
        gen.used.add("argument:" + kind)
        if kind == "fdict":  # a dict subclass with a method
            params.append("d")
            spec.append(("fdict", real(), real()))
            scope.floats += ['d["a"]', 'd["b"]']
            scope.mutable.append('d["a"]')
            scope.dicts.append("d")
        elif kind == "ns":
            params.append("ns")
            spec.append(("ns", real(), real()))
            scope.floats += ["ns.p", "ns.q"]
            scope.mutable.append("ns.p")
        else:
            params.append("pn")
            spec.append(("np64", real()))
            scope.floats.append("pn")
    if draw(st.booleans()):
        params.append("pt")
        spec.append(("pt", real(), real()))
        scope.floats += ["pt.x", "pt.y"]
        scope.mutable.append("pt.x")
        scope.records.append("pt")
    if draw(st.booleans()):
        params.append("sh")
        spec.append(("circle", abs(real())) if draw(st.booleans())
                    else ("rect", real(), real()))
        scope.unions.append("sh")
    body: list = ["    reset_act()"] if gen.act else []
    scope = gen.block(scope, draw(st.integers(2, 6)), 2, body, "    ")
    body.append(f"    return ({gen.leaf(scope)}) {gen.pick(['+', '-', '*'])} "
                f"({gen.expr(scope, 2)})")
    out.append(f"def f({', '.join(params)}):")
    out += body
    n = len(params)
    argnums = draw(st.one_of(st.integers(0, n - 1), st.lists(
        st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(tuple)))
    return Program("\n".join(out) + "\n", spec, gen.used, argnums, gen.extreme)


# ---------------------------------------------------------------------------------------
# Loading and running a program

_module_ids = itertools.count()
_TMP = tempfile.TemporaryDirectory(prefix="astad_fuzz_")  # removed at exit


def load(source: str, math_module):
    """Write the module to a new file and load it with ``math`` bound as given (with
    ``fmath``: forward mode, whose refusing function records a dual reaching it)."""
    name = f"astad_fuzz_{os.getpid()}_{next(_module_ids)}"
    path = os.path.join(_TMP.name, f"{name}.py")
    with open(path, "w") as handle:
        handle.write(MODULE_HEADER + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.math = math_module
    if math_module is fmath:  # (Python's sum of floats is not a left fold from 3.12)
        module.sum = builtin_sum
    sys.modules[name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    if math_module is fmath:
        module.opaque = refusing(module.opaque)
        module.type = ftype
    return module


LIST_KINDS = ("list", "flist", "deque", "np64list")


def flat_values(spec) -> list:
    values = []
    for s in spec:
        values += s[1] if s[0] in LIST_KINDS else list(s[1:])
    return values


def _np64(leaf):
    """A numpy.float64 for a plain leaf (the forward oracle's leaves stay Fwd)."""
    return np.float64(leaf) if type(leaf) is float else leaf


def build_args(module, spec, leaves):
    """The arguments of ``f`` from the module's classes, with these float leaves."""
    leaves = iter(leaves)
    args = []
    for s in spec:
        kind = s[0]
        if kind == "float":
            args.append(next(leaves))
        elif kind == "list":
            args.append([next(leaves) for _ in s[1]])
        elif kind == "flist":
            args.append(module.FList([next(leaves) for _ in s[1]]))
        elif kind == "deque":
            args.append(collections.deque([next(leaves) for _ in s[1]]))
        elif kind == "np64list":
            args.append([_np64(next(leaves)) for _ in s[1]])
        elif kind == "fdict":
            args.append(module.FDict(a=next(leaves), b=next(leaves)))
        elif kind == "ns":
            args.append(types.SimpleNamespace(p=next(leaves), q=next(leaves)))
        elif kind == "np64":
            args.append(_np64(next(leaves)))
        elif kind == "pt":
            args.append(module.Pt(next(leaves), next(leaves)))
        elif kind == "circle":
            args.append(module.Circle(next(leaves)))
        else:
            args.append(module.Rect(next(leaves), next(leaves)))
    return tuple(args)


def forward_run(module, spec, values, seed=None, h=0.0):
    """Run ``f`` on forward-mode duals (tangent 1 on leaf ``seed``) under a Trace."""
    leaves = [Fwd(v, 1.0 if k == seed else 0.0) for k, v in enumerate(values)]
    with Trace(h) as trace:
        result = module.f(*build_args(module, spec, leaves))
    return primal(result), tangent(result), trace


def fd_partial(fwd_module, spec, values, k, events, step):
    """Central difference along leaf ``k`` (None if a branch differs from ``events``)."""
    h = step * max(1.0, abs(values[k]))
    sides = []
    for sign in (1.0, -1.0):
        shifted = list(values)
        shifted[k] = values[k] + sign * h
        try:
            value, _, trace = forward_run(fwd_module, spec, shifted)
        except (ArithmeticError, ValueError):
            return None
        if trace.events != events or not isinstance(value, float):
            return None
        sides.append((shifted[k], value))
    (xp, vp), (xm, vm) = sides
    return (vp - vm) / (xp - xm)


def check_program(program: Program, stats: collections.Counter) -> None:
    note(MODULE_HEADER + program.source)
    note(f"spec = {program.spec!r}")
    plain = load(program.source, math)
    forward = load(program.source, fmath)
    try:
        _check(program, plain, forward, stats)
    finally:  # the files are read when the program is transformed, not later
        os.remove(plain.__file__)
        os.remove(forward.__file__)


def _check(program, plain, forward, stats):
    values = flat_values(program.spec)
    args = build_args(plain, program.spec, values)

    # The original function; its domain errors must reach the caller of .grad unchanged.
    after_plain = copy.deepcopy(args)
    reset_globals(plain)
    try:
        value = plain.f(*after_plain)
    except (ArithmeticError, ValueError) as exc:
        with pytest.raises(type(exc)) as info:
            astad.reverse_diff(plain.f).grad(*copy.deepcopy(args))
        assert str(info.value) == str(exc)
        stats["raised"] += 1
        return
    left_plain = globals_left(plain)
    assume(isinstance(value, float) and math.isfinite(value) and abs(value) < VALUE_LIMIT)

    # Forward mode, one run per leaf: the oracle, and the conditioning of the example.
    tangents, scales, events = [], [], None
    for k, v in enumerate(values):
        h = FD_EPS * max(1.0, abs(v))
        try:
            fv, ft, trace = forward_run(forward, program.spec, values, seed=k, h=h)
        except ZeroDivisionError:  # (the oracle's numbers divide as floats; the original
            assume(False)  # divided a numpy.float64 by zero: inf, not an exception)
        if trace.refused:  # a dual reached a function with no derivative
            check_refusal(plain, args, stats)
            return
        assert fv == value, "the forward-mode run disagrees with the original function"
        assume(trace.finite and not trace.near)
        if program.extreme:  # (scaled by powers of ten: rounding is relative there)
            assume(abs(ft) < VALUE_LIMIT)
        else:
            assume(trace.max_value < VALUE_LIMIT and trace.max_tangent < VALUE_LIMIT)
        events = trace.events
        tangents.append(ft)
        scales.append(1.0 + (abs(ft) if program.extreme else trace.max_tangent))

    fd = []
    for k in range(len(values)):
        g1 = fd_partial(forward, program.spec, values, k, events, FD_EPS)
        g2 = fd_partial(forward, program.spec, values, k, events, 2 * FD_EPS)
        assume(g1 is not None and g2 is not None)
        fd.append((g1, abs(g1 - g2)))

    f = astad.reverse_diff(plain.f)
    after_astad = copy.deepcopy(args)
    reset_globals(plain)
    ad_value, grad = f.value_and_grad(*after_astad)
    assert ad_value == value
    assert after_astad == after_plain, "the caller's arguments differ from the original's"
    assert not holds_dual(after_astad)
    left = globals_left(plain)  # what the call stored in module globals: plain values
    assert left == left_plain and not holds_dual(left)
    for arg, g in zip(args, grad):  # each gradient of its argument's own class
        assert type(g) is type(arg) or (type(arg) is float and type(g) is float), (arg, g)

    # forward mode: exact up to rounding (summation order, fused partials)
    expected = build_args(plain, program.spec, tangents)
    note(f"astad grad = {grad!r}\nforward mode = {expected!r}")
    flat_grad = flat_values(_spec_like(program.spec, grad))
    assert_grad_close(flat_grad, flat_values(_spec_like(program.spec, expected)), rtol=1e-8,
                      atol=1e-9 * max(scales))
    # finite differences: truncation error estimated from steps h and 2h
    for k, (g, spread) in enumerate(fd):
        tol = 1e-6 * (1.0 + abs(g)) + 1e-10 * VALUE_LIMIT + 4.0 * spread
        assert abs(flat_grad[k] - g) <= tol, (
            f"leaf {k}: astad {flat_grad[k]!r}, finite differences {g!r} (tol {tol:.3g})")

    # the pullback is linear; one entry per primitive operation gives the same gradient
    _, pullback = f.vjp(*copy.deepcopy(args))
    scaled = flat_values(_spec_like(program.spec, pullback(-2.5)))
    for a, b, s in zip(scaled, flat_grad, scales):
        assert abs(a + 2.5 * b) <= 1e-12 * s * 2.5 + 1e-12 * abs(b)
    unfused = astad.reverse_diff(plain.f, preaccumulate=False)
    u_value, u_grad = unfused.value_and_grad(*copy.deepcopy(args))
    assert u_value == value
    assert_grad_close(flat_values(_spec_like(program.spec, u_grad)), flat_grad, rtol=1e-9,
                      atol=1e-10 * max(scales))

    # some arguments only: the others are constants, run on copies; what the function
    # stores into them reaches the caller as plain floats
    some = astad.reverse_diff(plain.f, argnums=program.argnums)
    after_some = copy.deepcopy(args)
    some_value, some_grad = some.value_and_grad(*after_some)
    assert some_value == value
    assert after_some == after_plain and not holds_dual(after_some)
    chosen = program.argnums
    positions = (chosen,) if isinstance(chosen, int) else chosen
    subset = [program.spec[k] for k in positions]
    want = flat_values(_spec_like(subset, tuple(expected[k] for k in positions), True))
    got = flat_values(_spec_like(subset, some_grad, not isinstance(chosen, int)))
    assert_grad_close(got, want, rtol=1e-8, atol=1e-9 * max(scales))
    stats["checked"] += 1


def check_refusal(plain, args, stats):
    """A differentiated value reached a function with no derivative (the oracle saw it): on
    every path the call ends with astad's refusal, though the program catches it."""
    zero = tuple(None for _ in args)
    for run in (lambda a: astad.reverse_diff(plain.f).value_and_grad(*a),
                lambda a: astad.reverse_diff(plain.f).vjp(*a),
                lambda a: astad.reverse_diff(plain.f, preaccumulate=False).grad(*a),
                lambda a: astad.jvp(plain.f, a, zero)):
        with pytest.raises(astad.NotDifferentiableError):
            run(copy.deepcopy(args))
    stats["refused"] += 1


def reset_globals(module) -> None:
    module.LOG.clear()
    module.SEEN.clear()


def globals_left(module):
    return list(module.LOG), dict(module.SEEN)


def holds_dual(value) -> bool:
    """Whether a dual of astad's is anywhere in these values (after the call)."""
    if type(value) in DUAL_TYPES:
        return True
    if isinstance(value, (list, tuple, collections.deque)):
        return any(holds_dual(v) for v in value)
    if isinstance(value, dict):
        return any(holds_dual(k) or holds_dual(v) for k, v in value.items())
    if dataclasses.is_dataclass(value):
        return any(holds_dual(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, types.SimpleNamespace):
        return any(holds_dual(v) for v in vars(value).values())
    return False


def _spec_like(spec, grad, many=None) -> list:
    """The gradient as a spec (kind, leaf values...) in the order of ``flat_values``;
    ``many``: ``grad`` is a tuple, one per argument (by default: for several arguments)."""
    grads = grad if (len(spec) > 1 if many is None else many) else (grad,)
    out = []
    for s, g in zip(spec, grads):
        if s[0] in ("float", "np64"):
            out.append(("float", g))
        elif s[0] in LIST_KINDS:
            out.append(("list", list(g)))
        elif s[0] == "fdict":
            out.append(("fdict", g["a"], g["b"]))
        elif s[0] == "ns":
            out.append(("ns", g.p, g.q))
        elif s[0] == "pt":
            out.append(("pt", g.x, g.y))
        elif s[0] == "circle":
            out.append(("circle", g.r))
        else:
            out.append(("rect", g.w, g.h))
    return out


EXAMPLE_SECONDS = 30   # a generated program that runs longer is a bug (of the generator)


@contextlib.contextmanager
def time_limit(seconds):
    """Fail, rather than hang, when one example runs too long (main thread, Unix)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"one generated program ran for more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
@pytest.mark.search
def test_random_programs_match_forward_mode_and_finite_differences():
    stats: collections.Counter = collections.Counter()

    @FUZZ_SETTINGS
    @given(program=programs())
    def run(program):
        stats["tried"] += 1
        with time_limit(EXAMPLE_SECONDS):
            check_program(program, stats)

    if SEED is not None:
        run = hypothesis.seed(int(SEED))(run)
    run()
    print(f"\nfuzz: {stats['checked']} programs checked against forward mode and finite "
          f"differences, {stats['raised']} raising the original's exception, "
          f"{stats['refused']} refused (a dual reached a function with no derivative), "
          f"{stats['tried']} generated")
    # the property must not be vacuous: most generated programs are really checked
    assert stats["checked"] + stats["raised"] + stats["refused"] >= MAX_EXAMPLES // 2


# ---------------------------------------------------------------------------------------
# The generator itself: it must produce the constructs it claims to (so the property
# above is not vacuous), and rendered programs must be valid Python.

CLAIMED = ["assign", "aug", "if", "early_return", "for", "for_else", "for_plain",
           "for_enumerate", "for_zip", "while", "while_float_condition", "break",
           "continue", "return_in_loop", "comprehension", "append", "set_item", "record",
           "replace", "union", "union_match", "union_isinstance", "union_tag", "call",
           "rec", "mutual_recursion", "list_item", "reduce:sum", "reduce:max", "reduce:min",
           "div", "safediv", "power", "fn", "ifexp", "neg", "compare", "construct",
           "operator", "method", "property", "lambda", "nested_def", "closure_call",
           "swap",
           # issue 12's classes
           "type_test", "dispatch", "match_type", "numpy:sum", "numpy:dot", "numpy:max",
           "numpy:cumsum", "numpy:sort", "numpy:concatenate", "numpy:diff",
           "numpy:exp", "ints:big", "ints:index", "ints:prod", "ints:empty",
           "extreme:square", "extreme:cube", "extreme:atan2", "extreme:hypot", "act", "rebind",
           "user_except", "order", "leftover", "dict_method", "argument:flist",
           "argument:deque", "argument:np64list", "argument:fdict", "argument:ns",
           "argument:np64"]


@pytest.mark.slow
def test_generator_covers_constructs():
    seen: set = set()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(program=programs())
    def run(program):
        compile(MODULE_HEADER + program.source, "<generated>", "exec")
        seen.update(program.used)

    run()
    missing = [kind for kind in CLAIMED if kind not in seen]
    assert not missing, f"the program generator never produced {missing}"


# ---------------------------------------------------------------------------------------
# Regressions: every failure the fuzzer found, as a plain test.

def aliased_twice(p0, p1):
    v0 = p0
    v1 = p0  # noqa: F841
    return (p0) + (v0)


def recursive_tanh(a, n):
    if n <= 0:
        return a
    below = recursive_tanh((a + a), n - 1)  # noqa: F841
    return math.tanh(a / (a / (a * a + 1.0))) + a


def calls_recursive_tanh(p0, p1):
    p0 += (p1 + 0.5)
    return (p0) + (recursive_tanh(p0, 4) / 0.5)


@pytest.mark.parametrize("preaccumulate", [True, False])
def test_regression_a_name_and_its_alias_in_one_expression(preaccumulate):
    """Found by the fuzzer in straight-line code under development: ``p0 + v0`` with
    ``v0 = p0`` set the adjoint of p0 twice instead of adding (gave 1.0, not 2.0)."""
    f = astad.reverse_diff(aliased_twice, preaccumulate=preaccumulate)
    assert f.value_and_grad(0.1, 0.1) == (0.2, (2.0, 0.0))


def test_regression_forward_mode_oracle_tanh_at_a_large_argument():
    """Found by the fuzzer in the oracle: the derivative of tanh overflowed (cosh(433)**2)
    where astad correctly gives 0."""
    tanh = fmath.tanh(Fwd(433.64, 1.0))
    assert tanh.v == 1.0 and tanh.t == 0.0
    grad = astad.reverse_diff(calls_recursive_tanh).grad(0.1, 2.0)
    # with x = p0 + p1 + 0.5: f = x + 2 (tanh(x^2 + 1) + x) (the recursion's result is
    # unused), f' = 3 + 4 x sech^2(x^2 + 1)
    x = 0.1 + (2.0 + 0.5)
    derivative = 3.0 + 4.0 * x * (1.0 - math.tanh(x * x + 1.0) ** 2)
    assert grad == pytest.approx((derivative, derivative), rel=1e-9)
