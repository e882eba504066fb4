"""Statement-level preaccumulation: one tape entry for a whole float expression.

A tree of primitive float operations (``s + xs[i] * ys[i]``, ``math.tanh(w * x + b)``)
is differentiated symbolically when the function is transformed: reverse mode over the
expression tree, reusing each rule's partials from the primitive table. The generated
rule computes the primal exactly as Python would (same operations, same order), then the
partial derivative of the result with respect to each leaf, and appends ONE tape entry
with a parent per leaf, instead of one entry and one dual per operation. This is the
paper's linear factoring (section 5) applied at compile time; it is also what classical
taping tools call statement-level preaccumulation.

A fused rule has a fast path for the common case (every leaf that can be active is a
dual, every other leaf an int or float) and otherwise falls back to composing the
ordinary rules, so it is never less general than the unfused code.

Leaves are evaluated before any operation of the group. So that this changes nothing
observable, a group is not fused when an operation that can raise (``/``, ``**``,
``log``...) would, in Python's own order, run before a leaf that can raise or has side
effects (a call, an index, an attribute, or a name that may be unbound:
front/definite.py), so exceptions come in Python's order.
"""
from __future__ import annotations

import ast
import re

import gast

from ..registry import formula, total

_BINOPS = {gast.Add: ("add", "+"), gast.Sub: ("sub", "-"), gast.Mult: ("mul", "*"),
           gast.Div: ("truediv", "/")}
_UNARYOPS = {gast.USub: ("neg", "-"), gast.UAdd: ("pos", "+")}
_WORD = re.compile(r"\b([xyr])\b")


class Op:
    """An internal node of a fused group."""

    def __init__(self, rule: str, operands: list, node, exponent=None, callee=None):
        self.rule = rule          # name of the rule in ``ad`` ("mul", "sin", "pow")
        self.operands = operands  # Op, Leaf or Const
        self.node = node
        self.exponent = exponent  # for x ** c with a numeric constant c
        self.callee = callee      # for a call (math.sin(x)): its Callee


class Callee:
    """The callee of a call in a fused group (``math.sin``, ``act``): passed to the rule
    as Python reads it at that point, and checked there against the callable the rule was
    written for, so that a global rebound during the call is seen (transform.guarded)."""

    def __init__(self, node, index: int, expected):
        self.node = node
        self.index = index
        self.expected = expected


class Leaf:
    def __init__(self, node, index: int):
        self.node = node
        self.index = index


class Const:
    def __init__(self, value):
        self.value = value


def _literal(node) -> bool:
    """A number written in the source (``2.0``, ``-0.5``): never a dual."""
    if isinstance(node, gast.UnaryOp):
        node = node.operand
    return isinstance(node, gast.Constant)


def _subst(expression: str, names: dict) -> str:
    return _WORD.sub(lambda m: names[m.group(1)], expression)


# ``x ** y`` of two values (the specialised writers' "power"; the rule's partials in
# rules/scalar.py): d/dx is y x^(y-1) for y >= 1, y (r / x) below (whose x == 0 raises
# ZeroDivisionError, leaving the infinite derivative to the ordinary code), 0 for y == 0;
# d/dy is r log x, 0 where r or x is 0, NaN for a negative base (its log is complex). A
# complex r is refused after the primal (expressions.check_real). A plain exponent's
# partial is never written: the code for floats drops a constant's.
_POWER_PARTIALS = ("(0.0 if y == 0 else y * x ** (y - 1) if y >= 1 else y * (r / x))",
                   "(0.0 if r == 0.0 or x == 0.0 else r * log(x) if x > 0.0 else nan)")


def differentiate(tree, values: dict, counter: list, prefix: str = "",
                  zero_guards: bool = True) -> tuple:
    """Reverse mode over one expression tree, at transform time.

    ``values`` maps each leaf's index to the variable holding its value; ``counter`` numbers
    the temporaries (``t0``, ``g1``...), shared when several trees go into one function.
    Return the lines computing the primal (the same operations in Python's order), the
    variable holding the result, and for each leaf index the expressions whose sum is the
    partial derivative of the result with respect to that leaf. Temporaries are named
    ``{prefix}t0``, ``{prefix}g1``... Without ``zero_guards`` a zero adjoint times an
    infinite partial is NaN, as plain arithmetic has it (code that is differentiated
    again: a guard's own derivative would be wrong where the adjoint crosses zero).
    """
    lines: list = []
    computed: dict = {}  # the text of a value the primal computes -> its variable

    def primal(n) -> str:
        """Emit the primal computation of ``n``; return the variable holding it."""
        if isinstance(n, Const):
            return repr(n.value)
        if isinstance(n, Leaf):
            return values[n.index]
        operands = [primal(o) for o in n.operands]
        var = f"{prefix}t{counter[0]}"
        counter[0] += 1
        n.var, n.inputs = var, operands
        if n.rule == "pow":
            expression = f"{operands[0]} ** {n.exponent!r}"
        elif n.rule == "power":
            expression = f"{operands[0]} ** {operands[1]}"
        elif formula(n.rule, 2) is not None:
            expression = _subst(formula(n.rule, 2)[0],
                                {"x": operands[0], "y": operands[1], "r": var})
        else:
            expression = _subst(formula(n.rule, 1)[0], {"x": operands[0], "r": var})
        lines.append(f"{var} = {expression}")
        computed.setdefault(expression, var)
        return var

    def known(partial: str) -> str:
        """A partial the primal computed already (sin's cos(x) beside a cos(x) of the
        same statement): its variable, the same value, not computed twice."""
        if partial in computed:
            return computed[partial]
        if partial[:1] == "-" and partial[1:] in computed:
            return "-" + computed[partial[1:]]
        return partial

    result = primal(tree)
    partials: dict = {}  # leaf index -> list of expressions to add

    def local_partials(n) -> list:
        if n.rule == "pow":
            c = n.exponent
            if c == 0:
                return ["0.0"]
            if c == 1:
                return ["1.0"]
            if c == 2:
                return [f"2.0 * {n.inputs[0]}"]
            if c < 0:  # (x ** (c - 1) raises OverflowError where r / x is just inf)
                return [f"{c!r} * ({n.var} / {n.inputs[0]})"]
            return [f"{c!r} * {n.inputs[0]} ** {c - 1!r}"]
        if n.rule == "power":
            return [_subst(text, {"x": n.inputs[0], "y": n.inputs[1], "r": n.var})
                    for text in _POWER_PARTIALS]
        text = formula(n.rule, 2)
        if text is not None:
            names = {"x": n.inputs[0], "y": n.inputs[1], "r": n.var}
            return [known(_subst(e, names)) for e in text[1]]
        return [known(_subst(formula(n.rule, 1)[1][0], {"x": n.inputs[0], "r": n.var}))]

    def adjoint(n, g: str) -> None:
        """Push adjoint expression ``g`` of ``n`` down to the leaves (a tree: no sums
        except where a leaf is used more than once)."""
        if isinstance(n, Const):
            return
        if isinstance(n, Leaf):
            partials.setdefault(n.index, []).append(g)
            return
        for operand, local in zip(n.operands, local_partials(n)):
            if isinstance(operand, Const):
                continue
            if local == "1.0":
                child = g
            elif local == "-1.0":
                child = "-1.0" if g == "1.0" else f"-{g}"
            elif g == "1.0":
                child = f"({local})"
            elif g == "-1.0" or re.fullmatch(r"-?[\d.]+", local):
                child = f"{g} * ({local})"
            elif zero_guards:  # a zero adjoint is dropped, even before an infinite or
                # NaN partial, exactly as the sweep skips a zero adjoint (runtime.sweep)
                child = f"({g} * ({local}) if {g} else 0.0)"
            else:
                child = f"{g} * ({local})"
            if isinstance(operand, Op) and child not in ("1.0", "-1.0") \
                    and not re.fullmatch(r"-?[A-Za-z_]\w*", child):
                var = f"{prefix}g{counter[0]}"
                counter[0] += 1
                lines.append(f"{var} = {child}")
                child = var
            adjoint(operand, child)

    adjoint(tree, "1.0")
    return lines, result, partials


class Fuser:
    """Finds fusible groups for one function and writes their rules."""

    def __init__(self, transformer, prefix: str):
        self.t = transformer
        self.prefix = prefix
        self.rules: list = []  # (name, ast.FunctionDef)
        self._names: dict = {}

    # -- recognising a group ------------------------------------------------------------
    def _unary_rule(self, node):
        """The unary math rule a call resolves to, if it is one we can fuse."""
        if node.keywords or len(node.args) != 1 or isinstance(node.args[0], gast.Starred):
            return None
        name = self.t.static_rule_name(node.func)
        if name == "log":
            name = "log1"
        return name if formula(name, 1) is not None else None

    def _build(self, node, leaves: list):
        active = self.t.activity.active
        if isinstance(node, gast.Constant) and type(node.value) in (int, float):
            return Const(node.value)
        if isinstance(node, gast.BinOp) and active(node):
            if type(node.op) in _BINOPS:
                return Op(_BINOPS[type(node.op)][0],
                          [self._build(node.left, leaves), self._build(node.right, leaves)],
                          node)
            if isinstance(node.op, gast.Pow) and isinstance(node.right, gast.Constant) \
                    and type(node.right.value) is int:  # a float power of a negative is complex
                return Op("pow", [self._build(node.left, leaves)], node, node.right.value)
        if isinstance(node, gast.UnaryOp) and type(node.op) in _UNARYOPS and active(node):
            return Op(_UNARYOPS[type(node.op)][0], [self._build(node.operand, leaves)], node)
        if isinstance(node, gast.Call) and active(node):
            rule = self._unary_rule(node)
            if rule is not None:  # (the callee is read before the argument, as in Python)
                callee = Callee(node.func, len(leaves), self.t._static_callee(node.func))
                leaves.append(callee)
                return Op(rule, [self._build(node.args[0], leaves)], node, callee=callee)
        # a leaf: reuse the parameter of an identical name (names have no side effects)
        if isinstance(node, gast.Name):
            for leaf in leaves:
                if isinstance(leaf, Leaf) and isinstance(leaf.node, gast.Name) and \
                        leaf.node.id == node.id:
                    return leaf
        leaf = Leaf(node, len(leaves))
        leaves.append(leaf)
        return leaf

    @staticmethod
    def _count(tree) -> int:
        if isinstance(tree, Op):
            return 1 + sum(Fuser._count(o) for o in tree.operands)
        return 0

    @staticmethod
    def _order_is_safe(tree, certain=None) -> bool:
        """No raising operation runs, in Python's order, before a leaf that may raise.
        ``certain``: the ids of the name reads that cannot raise (None: every name)."""
        risky_seen = False
        safe = True

        def walk(n):
            nonlocal risky_seen, safe
            if isinstance(n, Op):
                for o in n.operands:
                    walk(o)
                if not total(n.rule) and not (n.rule == "pow" and
                                                      n.exponent in (1, 2, 3)):
                    risky_seen = True
            elif isinstance(n, Leaf) and risky_seen and not isinstance(n.node, gast.Constant) \
                    and not (isinstance(n.node, gast.Name) and (
                        certain is None or id(n.node) in certain)):
                safe = False
        walk(tree)
        return safe

    def try_fuse(self, node):
        """A call of a fused rule replacing ``node``, or None if not worth fusing."""
        leaves: list = []
        tree = self._build(node, leaves)
        if not isinstance(tree, Op) or self._count(tree) < 2 or \
                not self._order_is_safe(tree, self.t.certain_reads):
            return None
        if len(leaves) > 12:  # keep generated rules small; long sums still fuse in parts
            return None
        name = self._rule_name(node)
        self.rules.append((name, self._write_rule(name, tree, leaves, node)))
        args = [self.t.visit(leaf.node) for leaf in leaves]
        call = gast.Call(func=gast.Name(name, gast.Load(), None, None),
                         args=[self.t.tape_name()] + args, keywords=[])
        return gast.copy_location(call, node)

    def _rule_name(self, node) -> str:
        base = f"{self.prefix}{node.lineno}"
        count = self._names.get(base, 0)
        self._names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    # -- writing the rule -------------------------------------------------------------
    def _write_rule(self, name: str, tree: Op, leaves: list, node) -> ast.FunctionDef:
        active = self.t.activity.active
        params = [f"a{leaf.index}" for leaf in leaves]
        callees = [leaf for leaf in leaves if isinstance(leaf, Callee)]
        leaves = [leaf for leaf in leaves if isinstance(leaf, Leaf)]
        values = {leaf.index: f"x{leaf.index}" for leaf in leaves}
        maybe_active = [leaf for leaf in leaves if active(leaf.node)]
        lines, result, partials = differentiate(tree, values, [0])
        # each callee is the one the rule was written for (else: the composition of the
        # rules of what it is now, ad.rev)
        expected = {f"{name}_c{c.index}": c.expected for c in callees}
        same_callees = [f"a{c.index} is {name}_c{c.index}" for c in callees]
        checks = same_callees + [f"type(a{leaf.index}) is Dual" for leaf in maybe_active] + [
            f"type(a{leaf.index}) in NUMBER" for leaf in leaves if leaf not in maybe_active]
        if maybe_active:  # every dual of this level (one chained comparison)
            checks.append(" is ".join([f"a{leaf.index}.t" for leaf in maybe_active] + ["tape"]))
        unpack = [f"x{leaf.index} = a{leaf.index}.v" if leaf in maybe_active
                  else f"x{leaf.index} = a{leaf.index}" for leaf in leaves]
        entry = []
        for leaf in maybe_active:
            entry += [f"a{leaf.index}.i", " + ".join(partials.get(leaf.index, ["0.0"]))]
        fast = unpack + lines + [
            "d = new(Dual)", f"d.v = {result}", "d.i = len(tape)", "d.t = tape",
            f"tape.append(({', '.join(entry)}{',' if len(entry) == 1 else ''}))", "return d"]
        # Mixed path: each leaf a float dual of this level (reverse or forward mode) or a
        # plain number (say an accumulator that starts at 0.0); the entry lists only the
        # duals. Anything else (another level, a nested dual): the ordinary rules.
        pairs = []
        for leaf in maybe_active:
            pairs += [f"a{leaf.index}", " + ".join(partials.get(leaf.index, ["0.0"]))]
        # A dual where the activity analysis saw only constants would be dropped from the
        # entry: the ordinary rules take it instead (never a silent lost derivative).
        unexpected = "".join(f" or type(a{leaf.index}) in SCALAR_DUALS" for leaf in leaves
                             if leaf not in maybe_active and not _literal(leaf.node))
        unexpected += "".join(f" or not {check}" for check in same_callees)
        value_params = [f"a{leaf.index}" for leaf in leaves]
        mixed = [f"x = ad.primals(tape, {', '.join(value_params)})",
                 f"if x is None{unexpected}:",
                 f"    return {self._fallback(tree, node)}",
                 f"{', '.join(values[leaf.index] for leaf in leaves)}, = x"] + lines + [
                 f"return ad.record(tape, {result}, {', '.join(pairs)})"]
        text = (f"def {name}(tape, {', '.join(params)}):\n"
                f"    if {' and '.join(checks) or 'True'}:\n"
                + "".join(f"        {line}\n" for line in fast)
                + "".join(f"    {line}\n" for line in mixed))
        rule = ast.parse(text).body[0]
        for n in ast.walk(rule):  # tracebacks inside the rule show the user's line
            if "lineno" in n._attributes:
                n.lineno = n.end_lineno = node.lineno
                n.col_offset, n.end_col_offset = node.col_offset, node.end_col_offset
        rule.astad_callees = expected  # (names the rule's globals give them: compile/pipeline.py)
        return rule

    def _fallback(self, tree, node) -> str:
        """The group written with the ordinary rules: correct for any operand types."""
        from ..front.normalize import INPLACE

        def write(n, top: bool) -> str:
            if isinstance(n, Const):
                return repr(n.value)
            if isinstance(n, Leaf):
                return f"a{n.index}"
            operands = [write(o, False) for o in n.operands]
            rule = n.rule
            if n.callee is not None:  # what the callee is now: its rule, or its D (ad.rev)
                return f"ad.rev(a{n.callee.index})(tape, {', '.join(operands)})"
            if rule == "pow":
                return f"ad.pow(tape, {operands[0]}, {n.exponent!r})"
            if top and getattr(node, INPLACE, False) and rule in ("add", "sub", "mul",
                                                                  "truediv"):
                rule = "i" + rule
            return f"ad.{rule}(tape, {', '.join(operands)})"
        return write(tree, True)
