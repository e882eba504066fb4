"""Phase 5, transform: the dual-numbers reverse AD rules D (paper sections 3, 7, 8.2).

D maps every construct homomorphically except the primitive operations on reals. With
duals as boxed values (see runtime/duals.py), the homomorphic cases need no rewriting at all:
assignment, ``if``, loops, returns, containers and comparisons run as written, on duals
(control flow follows the primal, section 3). What changes:

- ``a op b`` and ``-a`` on possibly-active operands call the operation's rule,
  ``ad.<op>(tape, a, b)``, which appends one tape entry with the local partials
  (section 8.2). Operations on provably inactive operands stay as they are.
- a call ``f(args)`` becomes ``D[f](tape, args)``: statically ``ad.<rule>`` for a
  registered primitive (``math.sin``); a direct call of ``f``'s transformed version when
  ``f`` is a global naming a plain Python function now (the function itself, for a
  recursion); ``f(args)`` unchanged for a dataclass or named tuple (it only stores its
  arguments); and ``ad.rev(f)`` otherwise, which finds the transformed version of ``f``
  at run time (section 9: recursion needs nothing more).
- ``float``, ``isinstance`` and ``type`` are rewritten to see through a dual.
- the function takes the tape as its first parameter; nested functions and lambdas
  reach it through their closure.
A float literal stays a plain float: a constant, with no tape entry (section 7).
"""
from __future__ import annotations

import builtins
import copy
import types

import gast
import numpy as np

from ..front.activity import Activity, bound_names, shadowed_builtins
from ..front.definite import certain_reads
from ..runtime.array_dual import is_numpy_callable
from .bindings import MISSING, global_value
from .preaccumulate import Fuser
from ..front.normalize import INPLACE
from ..rules import scipy_loader
from ..registry import RECORDS, rule_name
from ..rules.scalar import TAPELESS_BUILTINS

_BINOP_RULES = {gast.Add: "add", gast.Sub: "sub", gast.Mult: "mul", gast.Div: "truediv",
                gast.FloorDiv: "floordiv", gast.Mod: "mod", gast.Pow: "pow"}
_UNARY_RULES = {gast.USub: "neg", gast.UAdd: "pos"}
CALL_AS_IS = object()  # resolve_callee's answer for a callable whose D is itself


class Names:
    """The names generated code adds, chosen so they never clash with the user's."""

    def __init__(self, taken: set, function_name: str = ""):
        self.taken = set(taken)
        self.tape = self._fresh("_tape", exact=True)
        self.ad = self._fresh("ad", exact=True)
        self.temp = self._fresh("_tmp", exact=False)  # a prefix: _tmp0, _tmp1, ...
        self.rule = self._fresh("_line", exact=False)  # fused rules: _line12, _line12_1
        # the transformed function's own name in generated code (a recursion calls it)
        self.factory_def = self.fresh(f"D_{function_name}" if function_name.isidentifier()
                                      else "_astad_generated")

    def fresh(self, base: str) -> str:
        """A new name for generated code: ``base``, or ``base`` with underscores added."""
        return self._fresh(base, exact=True)

    def _fresh(self, base: str, exact: bool) -> str:
        def clashes(name):
            return name in self.taken if exact else any(t.startswith(name)
                                                        for t in self.taken)
        name = base
        while clashes(name):
            name += "_"
        self.taken.add(name)
        return name


class ReverseTransform(gast.NodeTransformer):
    def __init__(self, root, fn, names: Names, activity: Activity, local_names: set,
                 preaccumulate: bool, resolve_callee=None):
        self.root = root
        self.globals = fn.__globals__
        self.closure_names = set(fn.__code__.co_freevars)
        self.names = names
        self.activity = activity
        self.local_names = local_names
        # Global bindings this code was specialised on: (globals dict, name, value).
        self.dependencies: list = []
        self.fuser = Fuser(self, names.rule) if preaccumulate else None
        self.property_names = _property_names(fn)
        self.certain_reads = certain_reads(root)  # names a fused rule may read early
        # callees resolved now, checked where they are called: cell name -> callable
        self.guards: dict = {}
        self.guard_names: dict = {}  # id(callable) -> its cell name
        # callee -> (name of D[callee] in generated code or CALL_AS_IS, the bindings that
        # choice depends on), or None: found at run time by ad.rev. codegen decides (it
        # builds D[callee]).
        self.resolve_callee = resolve_callee

    # -- helpers -----------------------------------------------------------------------
    def _tape(self):
        return gast.Name(self.names.tape, gast.Load(), None, None)

    tape_name = _tape

    def static_rule_name(self, func):
        """The name of the registered rule ``func`` resolves to now, or None."""
        callee = self._static_callee(func)
        try:
            rule, found = rule_name(callee) if callee is not MISSING else (None, None)
        except TypeError:
            return None
        if rule is not None:  # a derivative registered for it later (custom_vjp) rebuilds
            self.dependencies.append((RECORDS, callee, found))
        return rule

    def _fused(self, node):
        return self.fuser.try_fuse(node) if self.fuser is not None else None

    def _rule(self, rule: str, like):
        attr = gast.Attribute(gast.Name(self.names.ad, gast.Load(), None, None), rule,
                              gast.Load())
        return gast.copy_location(attr, like)

    def _call(self, func, args, keywords, like):
        return gast.copy_location(gast.Call(func=func, args=args, keywords=keywords), like)

    def _global_value(self, name: str):
        """The value a free name refers to now, recording the dependency."""
        if name in self.local_names or name in self.closure_names:
            return MISSING
        return global_value(self.globals, name, self.dependencies)

    def _static_callee(self, func):
        """The callable ``func`` names, when it is resolvable at transform time. What it
        was resolved from is a dependency: the global name and, for ``module.f``, the
        module's attribute (replacing ``math.sin`` rebuilds the code, as rebinding
        ``sin`` does)."""
        if isinstance(func, gast.Name):
            return self._global_value(func.id)
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name):
            module = self._global_value(func.value.id)
            if isinstance(module, types.ModuleType):
                value = getattr(module, func.attr, MISSING)
                if func.attr in vars(module):
                    self.dependencies.append((vars(module), func.attr, value))
                return value
        return MISSING

    def guarded(self, func, callee, resolved):
        """The callee of a call resolved now, checked where it is called, as Python reads
        it there: ``(resolved if func is _resolved else ad.rev(func))``. A helper that
        rebinds the global (``global act; act = math.sin``, ``globals()[...] = ...``)
        during the call is then seen by the next call, in the same function too."""
        name = self.guard_names.get(id(callee))
        if name is None:
            base = func.id if isinstance(func, gast.Name) else func.attr
            name = self.guard_names[id(callee)] = self.names.fresh(f"_{base}")
            self.guards[name] = callee
        test = gast.Compare(left=copy.deepcopy(func), ops=[gast.Is()],
                            comparators=[gast.Name(name, gast.Load(), None, None)])
        fallback = self._call(self._rule("rev", func), [copy.deepcopy(func)], [], func)
        return gast.copy_location(gast.IfExp(test=test, body=resolved, orelse=fallback), func)

    # -- the rules ---------------------------------------------------------------------
    def visit_BinOp(self, node):
        fused = self._fused(node)
        if fused is not None:
            return fused
        self.generic_visit(node)
        rule = _BINOP_RULES.get(type(node.op))
        if rule is None or not (self.activity.active(node.left)
                                or self.activity.active(node.right)):
            return node
        if getattr(node, INPLACE, False):
            rule = "i" + rule
        return self._call(self._rule(rule, node), [self._tape(), node.left, node.right], [],
                          node)

    def visit_UnaryOp(self, node):
        fused = self._fused(node)
        if fused is not None:
            return fused
        self.generic_visit(node)
        rule = _UNARY_RULES.get(type(node.op))
        if rule is None or not self.activity.active(node.operand):
            return node
        return self._call(self._rule(rule, node), [self._tape(), node.operand], [], node)

    def visit_Call(self, node):
        fused = self._fused(node)
        if fused is not None:
            return fused
        self.generic_visit(node)
        return self._rewrite_call(node)

    def _rewrite_call(self, node):
        """D of a call whose arguments are already transformed."""
        callee = self._static_callee(node.func)
        if callee is not MISSING:
            scipy_loader.load_rules_for(callee)  # scipy.special's rules, on first use
            try:
                tapeless = TAPELESS_BUILTINS.get(callee)
                rule, found = rule_name(callee)
            except TypeError:  # unhashable
                tapeless = rule = None
            if tapeless is not None:  # (float, isinstance, type: see through a dual)
                node.func = self._rule(tapeless, node.func)
                return node
            if rule is not None:
                self.dependencies.append((RECORDS, callee, found))  # (as static_rule_name)
                node.func = self.guarded(node.func, callee, self._rule(rule, node.func))
                node.args.insert(0, self._tape())
                return node
            if is_numpy_callable(callee):
                # numpy dispatches to the array rules itself (array_dual.py); where a dual
                # may reach it, lists holding duals become arrays first (numpy_values.py)
                if any(self.activity.active(a) for a in node.args) or any(
                        self.activity.active(k.value) for k in node.keywords):
                    node.args.insert(0, node.func)
                    node.func = self._rule("numpy", node.func)
                return node
            if getattr(builtins, getattr(callee, "__name__", ""), None) is callee:
                # Other builtins only move, compare or format values; a dual that reaches
                # one that computes on floats raises (runtime.Dual), never passes silently.
                return node
        if isinstance(node.func, gast.Name) and node.func.id in self._local_defs():
            return node  # a nested def of this function: already transformed, shares the tape
        if callee is not MISSING and self.resolve_callee is not None:
            resolved = self.resolve_callee(callee, getattr(node, "lineno", None))
            if resolved is not None:  # D[f] known now (section 9): called directly
                name, dependencies = resolved
                self.dependencies.extend(dependencies)
                if isinstance(node.func, gast.Attribute):  # module.f: rebinding f counts
                    module = self._global_value(node.func.value.id)
                    self.dependencies.append((vars(module), node.func.attr, callee))
                if name is CALL_AS_IS:  # a dataclass or named tuple: it only stores values
                    return node
                node.func = self.guarded(node.func, callee, gast.copy_location(
                    gast.Name(name, gast.Load(), None, None), node.func))
                node.args.insert(0, self._tape())
                return node
        rev = self._call(self._rule("rev", node.func), [node.func], [], node.func)
        node.func = rev
        node.args.insert(0, self._tape())
        return node

    def visit_Subscript(self, node):
        """``np.r_[a, b]`` and ``np.c_[a, b]`` (numpy's index tricks) holding possibly
        differentiated values: ``ad.index_trick(tape, np.r_, (a, b))``, a concatenation."""
        self.generic_visit(node)
        named = getattr(node.value, "attr", None) or getattr(node.value, "id", None)
        if not isinstance(node.ctx, gast.Load) or named not in ("r_", "c_"):
            return node
        trick = self._static_callee(node.value)
        if trick is not np.r_ and trick is not np.c_:
            return node
        items = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
        items = [self._call(self._rule("slice", i), [
            x or gast.Constant(None, None) for x in (i.lower, i.upper, i.step)], [], i)
            if isinstance(i, gast.Slice) else i for i in items]
        return self._call(self._rule("index_trick", node), [
            self._tape(), node.value, gast.Tuple(items, gast.Load())], [], node)

    def visit_Compare(self, node):
        """A comparison gives a bool, which carries no derivative, so arithmetic in its
        operands (``abs(delta) < 1e-12``) runs on primal values and records nothing
        (activity analysis: such a value is never active). Only operators and registered
        rules on names and constants qualify: they are pure, so computing them on primal
        floats changes nothing but the missing tape entries."""
        operands = []
        for operand in [node.left] + node.comparators:
            if isinstance(operand, (gast.BinOp, gast.UnaryOp, gast.Call)) and \
                    self.activity.active(operand) and self._pure_arithmetic(operand):
                operands.append(self._on_primals(operand))
            else:
                operands.append(self.visit(operand))
        node.left, node.comparators = operands[0], operands[1:]
        return node

    def _pure_arithmetic(self, node) -> bool:
        if isinstance(node, (gast.Name, gast.Constant)):
            return True
        if isinstance(node, gast.BinOp):
            return type(node.op) in _BINOP_RULES and self._pure_arithmetic(node.left) \
                and self._pure_arithmetic(node.right)
        if isinstance(node, gast.UnaryOp):
            return type(node.op) in _UNARY_RULES and self._pure_arithmetic(node.operand)
        if isinstance(node, gast.Call):
            return not node.keywords and self.static_rule_name(node.func) is not None and \
                all(not isinstance(a, gast.Starred) and self._pure_arithmetic(a)
                    for a in node.args)
        return False

    def _on_primals(self, node):
        """``node`` with each active name ``n`` read as ``ad.value(n)``."""
        if isinstance(node, gast.Name):
            if not self.activity.active(node):
                return node
            return self._call(self._rule("value", node), [node], [], node)
        if isinstance(node, gast.BinOp):
            node.left, node.right = self._on_primals(node.left), self._on_primals(node.right)
        elif isinstance(node, gast.UnaryOp):
            node.operand = self._on_primals(node.operand)
        elif isinstance(node, gast.Call):
            # the rule itself, on primal arguments: for numbers it is the plain function;
            # a list or an object still holding duals (sum(xs), abs(v) with a user
            # __abs__) then meets the rule's own handling, never untransformed code
            node.args = [self._on_primals(a) for a in node.args]
            return self._rewrite_call(node)
        return node

    def visit_Assign(self, node):
        """``obj[index] = value`` becomes ``ad.setitem(tape, value, obj, index)`` (the
        value first, then the object and the index, as Python evaluates them): a write
        into an array is a new version of it on the tape (rules/array_writes.py); lists
        and dicts are written as Python writes them."""
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], gast.Subscript):
            return node
        target = node.targets[0]
        index = _index_expression(target.slice, lambda like: self._rule("slice", like))
        call = self._call(self._rule("setitem", node),
                          [self._tape(), node.value, target.value, index], [], node)
        return gast.copy_location(gast.Expr(value=call), node)

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, gast.Load) and node.attr in self.property_names \
                and self.activity.active(node.value):
            # a property of a user class: its getter must run transformed (calls.getattr_)
            return self._call(self._rule("getattr", node),
                              [self._tape(), node.value, gast.Constant(node.attr, None)], [],
                              node)
        return node

    def _local_defs(self) -> set:
        if not hasattr(self, "_defs"):
            assigned = {}
            for n in gast.walk(self.root):
                if isinstance(n, gast.FunctionDef) and n is not self.root:
                    assigned[n.name] = assigned.get(n.name, 0) + 1
            other = {n.id for n in gast.walk(self.root) if isinstance(n, gast.Name)
                     and isinstance(n.ctx, (gast.Store, gast.Param, gast.Del))}
            self._defs = {name for name in assigned if name not in other}
        return self._defs


def _index_expression(node, slice_name):
    """A subscript's index as an expression: ``a:b`` as ``ad.slice(a, b)`` (in a tuple
    too); ``slice_name(like)`` gives the expression naming ``slice``."""
    if isinstance(node, gast.Slice):
        parts = [p if p is not None else gast.Constant(None, None)
                 for p in (node.lower, node.upper, node.step)]
        call = gast.Call(func=slice_name(node), args=parts, keywords=[])
        return gast.copy_location(call, node)
    if isinstance(node, gast.Tuple):
        return gast.copy_location(gast.Tuple([_index_expression(e, slice_name)
                                              for e in node.elts], gast.Load()), node)
    return node


def _property_names(fn) -> set:
    """Names of properties with Python getters on the classes ``fn`` can see (its globals
    and closure). Reading one of these attributes from a possibly-active value goes
    through ``ad.getattr``; any other attribute read stays a plain attribute read."""
    values = list(fn.__globals__.values())
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            pass
    names = set()
    for value in values:
        if isinstance(value, type) and value.__module__ != "builtins":
            for klass in value.__mro__:
                for name, attr in vars(klass).items():
                    if type(attr) is property and type(attr.fget) is types.FunctionType:
                        names.add(name)
    return names


def transform(root, fn, local_names: set, names: Names, preaccumulate: bool = True,
              as_method: bool = False, resolve_callee=None, dependencies=None) -> tuple:
    """Apply D to ``root`` (a normalized gast.FunctionDef), in place.

    Return the new tree, the global bindings it was written for (added to
    ``dependencies``, when given), the fused rules written for it (statement-level
    preaccumulation, preaccumulate.py, unless turned off), and the callees resolved now
    that the code checks where it calls them (name in the code -> callable).
    """
    activity = Activity(root, local_names | shadowed_builtins(fn))
    rewriter = ReverseTransform(root, fn, names, activity, local_names, preaccumulate,
                                resolve_callee)
    if dependencies is not None:
        rewriter.dependencies = dependencies
    root.decorator_list = []
    root.args.defaults = []
    root.args.kw_defaults = [None] * len(root.args.kwonlyargs)
    body = []
    for stmt in root.body:
        new = rewriter.visit(stmt)
        body.extend(new if isinstance(new, list) else [new])
    root.body = body
    tape = gast.Name(names.tape, gast.Param(), None, None)
    # The tape comes first; for a method called through a bound method it comes second,
    # after self, so that ``MethodType(rev, obj)(tape, ...)`` needs no extra Python frame.
    position = 1 if as_method else 0
    if len(root.args.posonlyargs) >= position and root.args.posonlyargs:
        root.args.posonlyargs.insert(position, tape)
    else:
        root.args.args.insert(position - len(root.args.posonlyargs), tape)
    gast.fix_missing_locations(root)
    rules = rewriter.fuser.rules if rewriter.fuser is not None else []
    return root, rewriter.dependencies, rules, rewriter.guards


__all__ = ["transform", "Names", "bound_names"]
