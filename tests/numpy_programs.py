"""The generator of random numpy programs for tests/test_property_numpy.py.

Hypothesis draws the source text of a function ``f(x, [y | m,] a)``: ``x`` a 1-D float64
array, an optional second array (1-D ``y`` or 2-D ``m``) and a float ``a``. The body writes
into arrays in every way numpy allows and astad claims (item, slice, row and column,
fancy and boolean-mask assignment, in-place operators on whole arrays, slices and views,
``np.add.at``, ``out=``), through views (``y[1:]``, ``m.T``, ``reshape``, rows and columns)
and aliases (``w = y``), into copies, into arrays made inside (``np.zeros``,
``np.zeros_like``, ``np.empty`` filled whole) and into the arguments themselves, inside
``for`` loops (a recurrence ``h[t + 1] = np.tanh(...)``, a stencil, element writes), with
element-wise arithmetic, smooth ufuncs, ``np.sum`` with ``axis``, ``@`` and ``np.dot``.
It returns a float: a sum of smooth functions of the arrays alive at the end (every view,
alias and argument included, so that each write is observed).

Every array name keeps one shape for the whole program (the generator tracks shapes, so
every program runs); values stay bounded by construction (``np.exp`` only of bounded
arguments, divisions by ``1 + e * e``, products in loops by ``tanh``).

A boolean mask is written ``__MASK__(z, ">", 0.3)`` in the generated text and rendered
twice: ``(z > 0.3)`` for the code astad transforms and runs, and ``_mask(z, ">", 0.3)``
in a *probe* copy of the module, which records each mask and its margin (the smallest
``|z - 0.3|``); the test discards examples whose masks lie near a tie or change under a
finite-difference step.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import re
import sys
import tempfile

import numpy as np
from hypothesis import strategies as st

SMOOTH = ["np.sin({})", "np.cos({})", "np.tanh({})", "np.exp(np.sin({}))",
          "({} ** 2)", "np.square({})", "np.sqrt({0} * {0} + 1.0)", "np.exp(-({0} * {0}))"]
BOUNDED = ["np.tanh({})", "np.sin({})", "(0.5 * np.cos({}))"]
FLOAT_CONSTS = ["0.5", "1.5", "-2.0", "0.25", "-0.75", "2.0"]
MASK_THRESHOLDS = ["0.0", "0.3", "-0.4", "0.75"]
MASK_RE = re.compile(r'__MASK__\((\w+), "([<>])", ([-0-9.]+)\)')


def _write(method):
    """Marks a statement that writes into an array (the test needs to know)."""
    def wrapped(self, *args, **kwargs):
        self.used.add("any_write")
        return method(self, *args, **kwargs)
    wrapped.__name__ = method.__name__
    return wrapped


@dataclasses.dataclass
class Scope:
    scalars: list               # names (and the argument a) holding floats
    arrays: dict                # name -> shape, every array visible (views, aliases too)
    loop: tuple = None          # (index name, trip count) inside a for loop

    def copy(self):
        return Scope(list(self.scalars), dict(self.arrays), self.loop)


class Gen:
    def __init__(self, draw, n, r, c, excluded=frozenset()):
        self.draw = draw
        self.excluded = excluded  # constructs left out (known astad bugs, see the test)
        self.n, self.r, self.c = n, r, c
        self.counter = itertools.count()
        self.used: set = set()
        self.loop_depth = 0

    # -- drawing --------------------------------------------------------------------------
    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def chance(self, one_in):
        return self.draw(st.integers(0, one_in - 1)) == 0

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def fresh(self, prefix):
        return f"{prefix}{next(self.counter)}"

    def shapes(self):
        n, r, c = self.n, self.r, self.c
        return [(n,), (n,), (r,), (c,), (r, c), (c, r)]

    # -- array expressions of a known shape -------------------------------------------------
    def views_of_shape(self, scope, shape):
        """Expressions reading arrays of ``scope`` (directly or through a view) that have
        exactly ``shape``."""
        out = [name for name, s in scope.arrays.items() if s == shape]
        for name, s in scope.arrays.items():
            if len(s) == 1 and len(shape) == 1:
                k, length = shape[0], s[0]
                if length > k:
                    start = self.integer(0, length - k)
                    out.append(f"{name}[{start}:{start + k}]")
                if (length + 1) // 2 == k and length > 1:
                    out.append(f"{name}[::2]")
                if length == k:
                    out.append(f"{name}[::-1]")
            if len(s) == 2 and len(shape) == 2 and s == shape[::-1] and s != shape:
                out.append(f"{name}.T")
            if len(s) == 2 and len(shape) == 1:
                if s[1] == shape[0]:
                    out.append(f"{name}[{self.integer(-s[0], s[0] - 1)}]")
                if s[0] == shape[0]:
                    out.append(f"{name}[:, {self.integer(0, s[1] - 1)}]")
            if s != shape and int(np.prod(s)) == int(np.prod(shape)):
                out.append(f"{name}.reshape{shape}")
        return out

    def seed(self, shape):
        """An expression of ``shape`` from the argument ``x`` alone (always possible)."""
        if len(shape) == 1:
            k = shape[0]
            if k == self.n:
                return "x"
            if k < self.n:
                return f"x[{self.integer(0, self.n - k)}:][:{k}]"
            return f"np.outer(x, x).ravel()[:{k}]"  # views make lengths up to n * n
        p, q = shape
        return f"np.outer({self.seed((p,))}, {self.seed((q,))})"

    def aexpr(self, scope, shape, depth):
        kinds = ["leaf", "leaf", "unary", "unary", "binary", "scalar_op", "div"]
        if depth <= 0:
            kinds = ["leaf"]
        else:
            kinds += ["matmul", "reduce"]
        kind = self.pick(kinds)
        self.used.add("expr:" + kind)
        d = depth - 1
        if kind == "leaf":
            options = self.views_of_shape(scope, shape)
            return self.pick(options) if options and not self.chance(8) else self.seed(shape)
        if kind == "unary":
            return self.pick(SMOOTH).format(self.aexpr(scope, shape, d))
        if kind == "binary":
            op = self.pick(["+", "-", "*"])
            return f"({self.aexpr(scope, shape, d)} {op} {self.aexpr(scope, shape, d)})"
        if kind == "scalar_op":
            op = self.pick(["+", "-", "*"])
            s = self.sexpr(scope, d) if self.chance(2) else self.pick(FLOAT_CONSTS)
            if self.chance(2):
                return f"({s} {op} {self.aexpr(scope, shape, d)})"
            return f"({self.aexpr(scope, shape, d)} {op} {s})"
        if kind == "div":
            b = self.aexpr(scope, shape, d) if self.chance(2) else self.sexpr(scope, d)
            return f"({self.aexpr(scope, shape, d)} / (1.0 + {b} * {b}))"
        inner = self.pick([self.n, self.r, self.c])
        if kind == "matmul":
            fn = self.pick(["@", "np.dot"])
            if len(shape) == 1:
                left = self.aexpr(scope, (shape[0], inner), d)
                right = self.aexpr(scope, (inner,), d)
            else:
                left = self.aexpr(scope, (shape[0], inner), d)
                right = self.aexpr(scope, (inner, shape[1]), d)
            return f"({left} @ {right})" if fn == "@" else f"np.dot({left}, {right})"
        # reduce: np.sum over one axis of a 2-D array (1-D results), or of a 3-term stack
        if len(shape) == 1:
            axis = self.integer(0, 1)
            src = (inner, shape[0]) if axis == 0 else (shape[0], inner)
            self.used.add("sum_axis")
            return f"np.sum({self.aexpr(scope, src, d)}, axis={axis})"
        return f"(0.5 * {self.aexpr(scope, shape, d)})"

    def sexpr(self, scope, depth):
        """A float expression."""
        kinds = ["scalar", "item", "sum"]
        if depth > 0:
            kinds += ["sum", "dot", "unary", "binary"]
        kind = self.pick(kinds)
        self.used.add("scalar:" + kind)
        d = depth - 1
        if kind == "scalar" or (kind == "item" and not scope.arrays):
            return self.pick(scope.scalars)
        if kind == "item":
            name = self.pick(scope.arrays)
            return f"{name}[{self.index(scope, scope.arrays[name], full=True)}]"
        if kind == "sum":
            shape = self.pick(self.shapes())
            fn = self.pick(["np.sum({})", "np.sum({0} * {0})", "np.mean({})"])
            return fn.format(self.aexpr(scope, shape, max(d, 0)))
        if kind == "dot":
            k = self.pick([self.n, self.r, self.c])
            return f"np.dot({self.aexpr(scope, (k,), d)}, {self.aexpr(scope, (k,), d)})"
        if kind == "unary":
            return self.pick(["np.sin({})", "np.tanh({})", "({} ** 2)", "np.cos({})"]).format(
                self.sexpr(scope, d))
        op = self.pick(["+", "-", "*"])
        return f"({self.sexpr(scope, d)} {op} {self.sexpr(scope, d)})"

    def bounded(self, scope, shape=None):
        """Bounded, for values written in loops (no growth across iterations)."""
        inner = self.sexpr(scope, 1) if shape is None else self.aexpr(scope, shape, 1)
        return self.pick(BOUNDED).format(inner)

    def index(self, scope, shape, full=False):
        """An integer index (or a full tuple of them) into an array of ``shape``; the loop
        variable where it fits."""
        parts = []
        for dim in (shape if full else shape[:1]):
            if scope.loop and scope.loop[1] <= dim and self.chance(2):
                parts.append(scope.loop[0])
                self.used.add("index_loop_variable")
            else:
                parts.append(str(self.integer(-dim, dim - 1)))
        return ", ".join(parts)

    # -- statements -------------------------------------------------------------------------
    WRITES = ["item_write", "slice_write", "row_col_write", "fancy_write", "mask_write",
              "inplace", "inplace", "add_at", "out", "method", "numpy_write"]

    def block(self, scope, n_stmts, out, pad, depth):
        for _ in range(n_stmts):
            kinds = ["new_array", "new_scalar", "copy", "zeros", "empty", "view", "view",
                     "alias", "rebind"] + self.WRITES * 2
            if depth > 0:
                kinds += ["recurrence", "stencil", "loop", "loop", "scratch"]
            kind = self.pick(kinds)
            self.used.add(kind)
            getattr(self, "stmt_" + kind)(scope, out, pad, depth)
        return scope

    def target(self, scope):
        """An array to write into: arguments, copies, views and aliases alike."""
        name = self.pick(scope.arrays)
        if name in ("x", "y", "m"):
            self.used.add("write_argument")
        return name

    def stmt_new_array(self, scope, out, pad, depth):
        shape = self.pick(self.shapes())
        name = self.fresh("t")
        out.append(f"{pad}{name} = {self.aexpr(scope, shape, self.integer(1, 3))}")
        scope.arrays[name] = shape

    def stmt_new_scalar(self, scope, out, pad, depth):
        name = self.fresh("s")
        out.append(f"{pad}{name} = {self.sexpr(scope, self.integer(1, 2))}")
        scope.scalars.append(name)

    def stmt_copy(self, scope, out, pad, depth):
        src = self.pick(scope.arrays)
        forms = {"{}.copy()": "copy:.copy", "np.copy({})": "copy:np.copy",
                 "np.array({})": "copy:np.array", "{}.astype(np.float64)": "copy:astype"}
        if len(scope.arrays[src]) == 1:
            forms["{}.flatten()"] = "copy:flatten"
        if "np.array" in self.excluded:
            del forms["np.array({})"]
        form = self.pick(forms)
        self.used.add(forms[form])
        name = self.fresh("c")
        out.append(f"{pad}{name} = {form.format(src)}")
        scope.arrays[name] = scope.arrays[src]

    def stmt_zeros(self, scope, out, pad, depth):
        name = self.fresh("z")
        if self.chance(2):
            like = self.pick(scope.arrays)
            shape = scope.arrays[like]
            out.append(f"{pad}{name} = np.{self.pick(['zeros_like', 'ones_like'])}({like})")
            self.used.add("zeros_like")
        else:
            shape = self.pick(self.shapes())
            out.append(f"{pad}{name} = np.{self.pick(['zeros', 'ones'])}({shape})")
        scope.arrays[name] = shape
        # then filled (in part): a write into it
        write = self.pick([w for w in self.WRITES if w != "out"])
        getattr(self, "stmt_" + write)(scope, out, pad, depth, target=name)

    @_write
    def stmt_empty(self, scope, out, pad, depth):
        """np.empty, then filled whole before anything reads it."""
        name = self.fresh("e")
        shape = self.pick(self.shapes())
        out.append(f"{pad}{name} = np.empty({shape})")
        how = self.pick(["whole", "split", "loop"])
        self.used.add("empty_" + how)
        rows = shape[0]
        rest = shape[1:]
        if how == "whole":
            value = self.aexpr(scope, shape, 2) if self.chance(3) else self.sexpr(scope, 1)
            out.append(f"{pad}{name}[:] = {value}")
        elif how == "split":
            k = self.integer(1, rows - 1)
            out.append(f"{pad}{name}[:{k}] = {self.aexpr(scope, (k,) + rest, 2)}")
            out.append(f"{pad}{name}[{k}:] = {self.aexpr(scope, (rows - k,) + rest, 2)}")
        else:
            i = self.fresh("i")
            inner = scope.copy()
            inner.loop = (i, rows)
            value = self.bounded(inner, rest if rest else None)
            out.append(f"{pad}for {i} in range({rows}):")
            out.append(f"{pad}    {name}[{i}] = {value}")
        scope.arrays[name] = shape  # only now: nothing reads it before it is filled

    def _region(self, scope, shape, allow_mask=False):
        """(index text, shape of the region) of a basic region of an array of ``shape``."""
        if len(shape) == 1:
            length = shape[0]
            form = self.pick(["slice", "slice", "step", "all", "neg"])
            self.used.add("region:" + form)
            if form == "slice":
                a = self.integer(0, length - 1)
                b = self.integer(a + 1, length)
                return f"{a}:{b}", (b - a,)
            if form == "step":
                return "::2", ((length + 1) // 2,)
            if form == "neg":
                return "-2:", (2,)
            return ":", (length,)
        p, q = shape
        form = self.pick(["row", "col", "rows", "block", "row_colon"])
        self.used.add("region:" + form)
        if form == "row":
            return self.index(scope, shape), (q,)
        if form == "row_colon":
            return f"{self.index(scope, shape)}, :", (q,)
        if form == "col":
            j = scope.loop[0] if scope.loop and scope.loop[1] <= q and self.chance(2) \
                else str(self.integer(0, q - 1))
            return f":, {j}", (p,)
        if form == "rows":
            a = self.integer(0, p - 1)
            return f"{a}:", (p - a, q)
        a, b = self.integer(0, p - 1), self.integer(0, q - 1)
        return f"{a}:, {b}:", (p - a, q - b)

    def _value(self, scope, shape):
        if scope.loop:
            return self.bounded(scope, shape) if self.chance(2) else self.bounded(scope)
        if self.chance(3):
            return self.sexpr(scope, 2)  # broadcast
        return self.aexpr(scope, shape, self.integer(1, 2))

    @_write
    def stmt_item_write(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        value = self.bounded(scope) if scope.loop else self.sexpr(scope, 2)
        out.append(f"{pad}{name}[{self.index(scope, shape, full=True)}] = {value}")

    @_write
    def stmt_slice_write(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        region, shape = self._region(scope, scope.arrays[name])
        out.append(f"{pad}{name}[{region}] = {self._value(scope, shape)}")

    @_write
    def stmt_row_col_write(self, scope, out, pad, depth, target=None):
        two_d = [k for k, s in scope.arrays.items() if len(s) == 2]
        if target is not None and len(scope.arrays[target]) != 2:
            return self.stmt_slice_write(scope, out, pad, depth, target)
        if not two_d:
            return self.stmt_slice_write(scope, out, pad, depth, target)
        name = target or self.pick(two_d)
        p, q = scope.arrays[name]
        if self.chance(2):
            region, shape = f"{self.index(scope, (p, q))}, :", (q,)
            self.used.add("row_write")
        else:
            j = scope.loop[0] if scope.loop and scope.loop[1] <= q and self.chance(2) \
                else str(self.integer(-q, q - 1))
            region, shape = f":, {j}", (p,)
            self.used.add("column_write")
        out.append(f"{pad}{name}[{region}] = {self._value(scope, shape)}")

    def _fancy(self, length, k):
        idx = [self.integer(0, length - 1) for _ in range(k)]
        if len(set(idx)) < len(idx):
            self.used.add("fancy_repeated")
        return idx

    @_write
    def stmt_fancy_write(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        idx = self._fancy(shape[0], self.integer(1, 3))
        out.append(f"{pad}{name}[{idx}] = {self._value(scope, (len(idx),) + shape[1:])}")

    @_write
    def stmt_mask_write(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        mask = f'__MASK__({name}, "{self.pick("<>")}", {self.pick(MASK_THRESHOLDS)})'
        if self.chance(2):
            k = self.fresh("k")
            out.append(f"{pad}{k} = {mask}")
            mask = k
        form = self.pick(["scalar", "other", "self", "inplace"])
        self.used.add("mask:" + form)
        if form == "scalar":
            out.append(f"{pad}{name}[{mask}] = {self.bounded(scope)}")
        elif form == "other":
            others = [o for o, s in scope.arrays.items() if s == shape]
            out.append(f"{pad}{name}[{mask}] = np.tanh({self.pick(others)}[{mask}])")
        elif form == "self":
            out.append(f"{pad}{name}[{mask}] = 0.5 * {name}[{mask}] ** 2")
        else:
            op = self.pick(["+=", "*="])
            out.append(f"{pad}{name}[{mask}] {op} {self.bounded(scope)}")

    @_write
    def stmt_method(self, scope, out, pad, depth, target=None):
        """An ndarray method writing into the array (fill; sort has ties, which the
        masks do not see: tests/test_memory_model.py has it)."""
        name = target or self.target(scope)
        self.used.add("method:fill")
        out.append(f"{pad}{name}.fill({self.bounded(scope)})")

    @_write
    def stmt_inplace(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        where = self.pick(["whole", "whole", "region", "fancy"])
        self.used.add("inplace_" + where)
        if where == "whole":
            text, region = name, shape
        elif where == "region":
            index, region = self._region(scope, shape)
            text = f"{name}[{index}]"
        else:
            idx = self._fancy(shape[0], self.integer(1, 3))
            text, region = f"{name}[{idx}]", (len(idx),) + shape[1:]
        op = self.pick(["+=", "-=", "*=", "/="])
        self.used.add("inplace" + op)
        if op in ("+=", "-="):
            value = self._value(scope, region)
        elif op == "*=":
            value = self.bounded(scope, region if self.chance(2) else None)
        else:
            b = self.aexpr(scope, region, 1) if self.chance(2) else self.sexpr(scope, 1)
            value = self.pick(["(1.0 + {0} * {0})", "np.exp(np.sin({0}))", "2.0"]).format(b)
        out.append(f"{pad}{text} {op} {value}")

    @_write
    def stmt_add_at(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        k = self.integer(1, 4)
        if len(shape) == 1 or self.chance(2):
            idx = self._fancy(shape[0], k)
            if "add_at_repeated" in self.excluded:
                idx = sorted(set(idx))
            repeated = len(set(idx)) < len(idx)
            where, region = str(idx), (len(idx),) + shape[1:]
        else:
            rows, cols = self._fancy(shape[0], k), self._fancy(shape[1], k)
            if "add_at_repeated" in self.excluded:
                pairs = sorted(set(zip(rows, cols)))
                rows, cols = [p[0] for p in pairs], [p[1] for p in pairs]
            repeated = len(set(zip(rows, cols))) < len(rows)
            where, region = f"({rows}, {cols})", (len(rows),)
        if repeated:
            self.used.add("add_at_repeated")
        out.append(f"{pad}np.add.at({name}, {where}, {self._value(scope, region)})")

    @_write
    def stmt_out(self, scope, out, pad, depth, target=None):
        name = target or self.target(scope)
        shape = scope.arrays[name]
        if self.chance(2):
            fn = self.pick(["np.add", "np.multiply", "np.subtract"])
            args = f"{self.aexpr(scope, shape, 1)}, {self.aexpr(scope, shape, 1)}"
        else:
            fn = self.pick(["np.sin", "np.tanh", "np.cos"])
            args = self.aexpr(scope, shape, 1)
        out.append(f"{pad}{fn}({args}, out={name})")

    @_write
    def stmt_numpy_write(self, scope, out, pad, depth, target=None):
        """numpy functions writing into an argument: np.copyto, np.put (flat indices)."""
        name = target or self.target(scope)
        shape = scope.arrays[name]
        if self.chance(2):
            self.used.add("np.copyto")
            out.append(f"{pad}np.copyto({name}, {self._value(scope, shape)})")
        else:
            self.used.add("np.put")
            size = int(np.prod(shape))
            idx = sorted(set(self._fancy(size, self.integer(1, 3))))
            out.append(f"{pad}np.put({name}, {idx}, {self._value(scope, (len(idx),))})")

    @_write
    def stmt_scratch(self, scope, out, pad, depth):
        """A scratch buffer reused in a loop with out=, each iteration's values read by a
        scalar accumulated across iterations (an entry keeps the buffer by reference)."""
        shape = self.pick(self.shapes())
        buf, acc, k = self.fresh("buf"), self.fresh("s"), self.fresh("k")
        self.used.add("scratch")
        out.append(f"{pad}{buf} = np.empty({shape})")
        out.append(f"{pad}{acc} = 0.0")
        out.append(f"{pad}for {k} in range({self.integer(2, 3)}):")
        if self.chance(2):
            fn = self.pick(["np.multiply", "np.add"])
            first = self.aexpr(scope, shape, 1)
            out.append(f"{pad}    {fn}({first}, {self.bounded(scope, shape)} + {k}, out={buf})")
        else:
            fn = self.pick(["np.sin", "np.tanh"])
            out.append(f"{pad}    {fn}({self.aexpr(scope, shape, 1)} * ({k} + 1.0), "
                       f"out={buf})")
        reader = self.pick(SMOOTH[:4]).format(buf)
        out.append(f"{pad}    {acc} = {acc} + 0.5 * np.sum({reader})")
        scope.arrays[buf] = shape
        scope.scalars.append(acc)

    def stmt_view(self, scope, out, pad, depth):
        """A view that aliases: later writes through it or its base are seen by both."""
        name = self.pick(scope.arrays)
        shape = scope.arrays[name]
        v = self.fresh("v")
        options = []
        if len(shape) == 1:
            length = shape[0]
            options += [(f"{name}[1:]", (length - 1,)), (f"{name}[::-1]", shape),
                        (f"{name}[:-1]", (length - 1,)), (f"np.flip({name})", shape),
                        (f"np.asarray({name})", shape), (f"{name}.view()", shape),
                        (f"np.split({name}, [1])[1]", (length - 1,)),
                        (f"np.atleast_2d({name})[0]", shape), (f"{name}.real", shape),
                        (f"np.real({name})", shape), (f"np.ascontiguousarray({name})", shape),
                        (f"np.require({name})", shape), (f"np.array({name}, copy=None)", shape),
                        (f"np.squeeze(np.expand_dims({name}, 0))", shape)]
            if length % 2 == 0:
                options.append((f"{name}.reshape(2, {length // 2})", (2, length // 2)))
            if length > 2:
                options.append((f"{name}[::2]", ((length + 1) // 2,)))
        else:
            p, q = shape
            options += [(f"{name}.T", (q, p)), (f"{name}[{self.integer(0, p - 1)}]", (q,)),
                        (f"{name}[:, {self.integer(0, q - 1)}]", (p,)),
                        (f"{name}.reshape({p * q})", (p * q,)), (f"{name}[1:]", (p - 1, q)),
                        (f"np.fliplr({name})", shape), (f"np.rot90({name})", (q, p)),
                        (f"np.ravel({name})", (p * q,)), (f"np.flipud({name})[1:]", (p - 1, q)),
                        (f"np.swapaxes({name}, 0, 1)", (q, p)),
                        (f"np.moveaxis({name}, 0, -1)", (q, p)), (f"{name}[::-1, ::2]",
                                                                  (p, (q + 1) // 2))]
        text, vshape = self.pick(options)
        if 0 in vshape:
            return
        self.used.add("view" + ("_2d" if len(shape) == 2 else "_1d"))
        if text.startswith("np.") or text.endswith(".view()"):
            self.used.add("view:function")
        out.append(f"{pad}{v} = {text}")
        scope.arrays[v] = vshape
        # most often a write through the view (or the base) follows at once
        if self.chance(2):
            write = self.pick([w for w in self.WRITES if w != "mask_write"])
            getattr(self, "stmt_" + write)(scope, out, pad, depth,
                                           target=self.pick([v, name]))

    def stmt_alias(self, scope, out, pad, depth):
        name = self.pick(scope.arrays)
        w = self.fresh("w")
        out.append(f"{pad}{w} = {name}")
        scope.arrays[w] = scope.arrays[name]
        if self.chance(2):
            self.stmt_inplace(scope, out, pad, depth, target=self.pick([w, name]))

    def stmt_rebind(self, scope, out, pad, depth):
        """The name gets a new array; its views and aliases keep the old one."""
        names = [k for k in scope.arrays if k not in ("x", "y", "m")]
        if not names or scope.loop:
            return self.stmt_new_array(scope, out, pad, depth)
        name = self.pick(names)
        out.append(f"{pad}{name} = {self.aexpr(scope, scope.arrays[name], 2)}")

    @_write
    def stmt_recurrence(self, scope, out, pad, depth):
        """h[t + 1] = np.tanh(a * h[t] + x[t]), over a vector or a matrix of states."""
        drive = self.pick(scope.arrays)
        dshape = scope.arrays[drive]
        steps = self.integer(1, dshape[0])
        h, t = self.fresh("h"), self.fresh("t")
        coef = self.sexpr(scope, 1) if self.chance(2) else self.pick(FLOAT_CONSTS)
        if len(dshape) == 1:
            self.used.add("recurrence_1d")
            out.append(f"{pad}{h} = np.zeros({steps + 1})")
            out.append(f"{pad}{h}[0] = {self.bounded(scope)}")
            out.append(f"{pad}for {t} in range({steps}):")
            out.append(f"{pad}    {h}[{t} + 1] = np.tanh({coef} * {h}[{t}] + {drive}[{t}])")
            scope.arrays[h] = (steps + 1,)
        else:
            self.used.add("recurrence_2d")
            k = dshape[1]
            wname = self.fresh("W")
            out.append(f"{pad}{wname} = {self.aexpr(scope, (k, k), 1)}")
            out.append(f"{pad}{h} = np.zeros(({steps + 1}, {k}))")
            out.append(f"{pad}for {t} in range({steps}):")
            out.append(f"{pad}    {h}[{t} + 1] = np.tanh({wname} @ {h}[{t}] * 0.5 + "
                       f"{coef} * {drive}[{t}])")
            scope.arrays[wname] = (k, k)
            scope.arrays[h] = (steps + 1, k)

    @_write
    def stmt_stencil(self, scope, out, pad, depth):
        names = [k for k, s in scope.arrays.items() if len(s) == 1 and s[0] >= 3]
        if not names:
            return self.stmt_loop(scope, out, pad, depth)
        u = self.pick(names)
        t = self.fresh("t")
        out.append(f"{pad}for {t} in range({self.integer(1, 3)}):")
        out.append(f"{pad}    {u}[1:-1] += 0.1 * ({u}[2:] - 2.0 * {u}[1:-1] + {u}[:-2])")

    def stmt_loop(self, scope, out, pad, depth):
        """A for loop whose body writes into arrays (indexed by the loop variable)."""
        t = self.fresh("i")
        trips = self.integer(1, 4)
        out.append(f"{pad}for {t} in range({trips}):")
        inner = scope.copy()
        inner.loop = (t, trips)
        self.loop_depth += 1
        for _ in range(self.integer(1, 2)):
            kind = self.pick(self.WRITES)
            self.used.add("loop_" + kind)
            getattr(self, "stmt_" + kind)(inner, out, pad + "    ", depth - 1)
        self.loop_depth -= 1


@dataclasses.dataclass
class Program:
    source: str        # the function's text with __MASK__ markers
    spec: list         # ("array", ndarray) | ("float", value), one per parameter
    used: set
    hvp: bool          # also check a Hessian-vector product on this one

    def rendered(self, probe=False):
        replace = r'_mask(\1, "\2", \3)' if probe else r"(\1 \2 \3)"
        return MASK_RE.sub(replace, self.source)


def _values(draw, shape):
    size = int(np.prod(shape))
    values = draw(st.lists(st.floats(-1.5, 1.5, allow_nan=False), min_size=size,
                           max_size=size))
    return np.array(values, dtype=np.float64).reshape(shape)


@st.composite
def programs(draw, excluded=frozenset()):
    """A random program; ``excluded``: names of constructs not to write ("np.array")."""
    n, r, c = draw(st.integers(3, 5)), draw(st.integers(2, 4)), draw(st.integers(2, 4))
    r, c = min(r, n), min(c, n)
    gen = Gen(draw, n, r, c, frozenset(excluded))
    params, spec = ["x"], [("array", _values(draw, (n,)))]
    scope = Scope(["a"], {"x": (n,)})
    second = draw(st.sampled_from(["none", "y", "m"]))
    if second == "y":
        params.append("y")
        spec.append(("array", _values(draw, (n,))))
        scope.arrays["y"] = (n,)
    elif second == "m":
        params.append("m")
        spec.append(("array", _values(draw, (r, c))))
        scope.arrays["m"] = (r, c)
    params.append("a")
    spec.append(("float", draw(st.floats(-2.0, 2.0, allow_nan=False))))
    body: list = []
    gen.block(scope, draw(st.integers(2, 7)), body, "    ", 1)
    # the result observes every array still visible (views, aliases, arguments)
    terms = []
    for name in scope.arrays:
        if draw(st.integers(0, 2)) == 0:
            continue
        weight = gen.pick(["", "0.5 * ", "-1.5 * ", "0.25 * "])
        terms.append(weight + gen.pick(["np.sum(np.sin({}))", "np.sum({0} * {0})",
                                        "np.sum(np.tanh({}))"]).format(name))
    terms.append(gen.sexpr(scope, 1))
    body.append("    return " + " + ".join(terms))
    source = f"def f({', '.join(params)}):\n" + "\n".join(body) + "\n"
    return Program(source, spec, gen.used, draw(st.integers(0, 3)) == 0)


# -- loading --------------------------------------------------------------------------------
HEADER = "import numpy as np\n\n\n"
_ids = itertools.count()
_TMP = tempfile.TemporaryDirectory(prefix="astad_npfuzz_")


class Probe:
    """What the probe copy of a program saw: every mask it computed and the smallest
    distance of a masked value from its threshold."""

    def __init__(self):
        self.masks: list = []
        self.margin = np.inf

    def mask(self, z, op, c):
        result = z > c if op == ">" else z < c
        self.masks.append(result.tobytes())
        if z.size:
            self.margin = min(self.margin, float(np.min(np.abs(z - c))))
        return result


def load(source: str):
    """Write ``source`` to a new file (astad reads it with inspect) and import it."""
    name = f"astad_npfuzz_{os.getpid()}_{next(_ids)}"
    path = os.path.join(_TMP.name, name + ".py")
    with open(path, "w") as handle:
        handle.write(HEADER + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def run_probe(module, args):
    """Run the probe copy on ``args`` (mutated as the function mutates them)."""
    probe = Probe()
    module._mask = probe.mask
    value = module.f(*args)
    return value, probe
