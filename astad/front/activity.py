"""Phase 4, activity: which local names can never hold a differentiated value.

A name is inactive when every value ever bound to it is inactive: constants, results of
``len``/``range``/``int``/comparisons, loop counters over ``range``, and arithmetic on
inactive values. Operations on inactive values stay plain Python in the generated code,
so int loop counters, lengths and constants never touch the tape and cost nothing.
The analysis is conservative: anything it cannot see through is active.
"""
from __future__ import annotations

import builtins

import gast

# Builtins whose result never carries a derivative, whatever their arguments.
INACTIVE_RESULT = {"len", "range", "int", "bool", "str", "repr", "isinstance", "issubclass",
                   "hash", "id", "callable", "hasattr", "format", "ord", "chr", "type"}


def shadowed_builtins(fn) -> set:
    """The builtin names this analysis trusts (``len``, ``range``, ``round``...) that
    ``fn`` sees bound to something else, a module global or a closure variable: they
    are analysed like local names, never trusted (a global ``def format(x): return
    3.0 * x`` was taken for the builtin, and its derivative dropped)."""
    trusted = INACTIVE_RESULT | {"round", "enumerate"}
    shadowed = trusted & set(fn.__code__.co_freevars)
    for name in trusted & fn.__globals__.keys():
        if fn.__globals__[name] is not getattr(builtins, name, None):
            shadowed.add(name)
    return shadowed


class Activity:
    def __init__(self, root, local_names: set):
        self.local_names = local_names
        self.inactive = set(local_names)
        self.root = root
        params = set()
        for node in gast.walk(root):
            if isinstance(node, gast.arguments):
                for arg in node.args + node.posonlyargs + node.kwonlyargs + \
                        [node.vararg, node.kwarg]:
                    if arg is not None:
                        params.add(arg.id)
            elif isinstance(node, (gast.FunctionDef, gast.Lambda)) and node is not root:
                if isinstance(node, gast.FunctionDef):
                    params.add(node.name)  # a local function may close over active values
            elif isinstance(node, (gast.Nonlocal, gast.Global)):
                params.update(node.names)
            elif isinstance(node, (gast.With,)):
                for item in node.items:
                    if item.optional_vars is not None:
                        params.update(_names(item.optional_vars))
            elif isinstance(node, gast.ExceptHandler) and node.name is not None:
                params.update(_names(node.name))
            elif isinstance(node, (gast.MatchAs, gast.MatchStar)) and node.name:
                params.add(node.name)
            elif isinstance(node, gast.MatchMapping) and node.rest:
                params.add(node.rest)
        self.inactive -= params
        self._fixpoint()

    def _fixpoint(self):
        changed = True
        while changed:
            changed = False
            for target, value, kind in self._bindings():
                if kind == "range-target":
                    continue
                if kind == "enumerate-target" and isinstance(target, gast.Tuple) \
                        and len(target.elts) == 2:
                    names = _target_names(target.elts[1])
                elif kind == "iter" or not self.scalar_inactive(value):
                    names = _target_names(target)
                else:
                    names = set()
                if names & self.inactive:
                    self.inactive -= names
                    changed = True

    def _bindings(self):
        for node in gast.walk(self.root):
            if isinstance(node, gast.Assign):
                for t in node.targets:
                    yield t, node.value, "assign"
            elif isinstance(node, gast.NamedExpr):
                yield node.target, node.value, "assign"
            elif isinstance(node, (gast.For, gast.comprehension)):
                it = node.iter
                if isinstance(it, gast.Call) and isinstance(it.func, gast.Name) \
                        and it.func.id not in self.local_names:
                    if it.func.id == "range":
                        yield node.target, it, "range-target"
                        continue
                    if it.func.id == "enumerate" and it.args:
                        yield node.target, it.args[0], "enumerate-target"
                        continue
                yield node.target, it, "iter"
            elif isinstance(node, gast.AugAssign):  # (normalize removed these; kept for safety)
                yield node.target, node.value, "assign"

    def scalar_inactive(self, node) -> bool:
        """Is ``node`` certainly an inactive scalar (never a dual, never a container that a
        later mutation could fill with duals)? Names bound only to such values are inactive."""
        if isinstance(node, gast.Constant):
            return True
        if isinstance(node, gast.Name):
            return node.id in self.local_names and node.id in self.inactive
        if isinstance(node, gast.Compare):
            return True
        if isinstance(node, gast.UnaryOp):
            return self.scalar_inactive(node.operand)
        if isinstance(node, gast.BinOp):
            return self.scalar_inactive(node.left) and self.scalar_inactive(node.right)
        if isinstance(node, gast.BoolOp):
            return all(self.scalar_inactive(v) for v in node.values)
        if isinstance(node, gast.IfExp):
            return self.scalar_inactive(node.body) and self.scalar_inactive(node.orelse)
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
                and node.func.id not in self.local_names:
            return node.func.id in INACTIVE_RESULT - {"range", "type"} or (
                node.func.id == "round" and len(node.args) == 1)
        return False

    def active(self, node) -> bool:
        """Can the value of expression ``node`` be (or contain) a differentiated value?"""
        if node is None or isinstance(node, gast.Constant):
            return False
        if isinstance(node, gast.Name):
            return node.id in self.local_names and node.id not in self.inactive
        if isinstance(node, (gast.Compare, gast.JoinedStr)):
            return False
        if isinstance(node, gast.UnaryOp):
            return not isinstance(node.op, gast.Not) and self.active(node.operand)
        if isinstance(node, gast.Call):
            func = node.func
            if isinstance(func, gast.Name) and func.id not in self.local_names:
                if func.id in INACTIVE_RESULT or (func.id == "round" and len(node.args) == 1):
                    return False
            return self.active(func) or any(self.active(a) for a in node.args) or any(
                self.active(k.value) for k in node.keywords)
        if isinstance(node, gast.Attribute):
            return self.active(node.value)
        if isinstance(node, gast.Subscript):
            return self.active(node.value)
        if isinstance(node, gast.BinOp):
            return self.active(node.left) or self.active(node.right)
        if isinstance(node, gast.BoolOp):
            return any(self.active(v) for v in node.values)
        if isinstance(node, gast.IfExp):
            return self.active(node.body) or self.active(node.orelse)
        if isinstance(node, (gast.List, gast.Tuple, gast.Set)):
            return any(self.active(e) for e in node.elts)
        if isinstance(node, gast.Dict):
            return any(self.active(v) for v in node.values) or any(
                self.active(k) for k in node.keys if k is not None)
        if isinstance(node, (gast.Starred, gast.NamedExpr)):
            return self.active(node.value)
        return True  # comprehensions, lambdas, anything else: assume active


def _target_names(target) -> set:
    """Names a binding target rebinds or mutates (``xs`` for ``xs[i] = v``)."""
    if isinstance(target, gast.Name):
        return {target.id}
    if isinstance(target, (gast.Subscript, gast.Attribute, gast.Starred)):
        return _target_names(target.value)
    if isinstance(target, (gast.Tuple, gast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    return set()


def _names(target) -> set:
    return {n.id for n in gast.walk(target) if isinstance(n, gast.Name)}


def bound_names(root) -> set:
    """Every name bound anywhere in ``root`` (conservatively: all scopes inside it)."""
    names = set()
    for node in gast.walk(root):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Param,
                                                                 gast.Del)):
            names.add(node.id)
        elif isinstance(node, gast.FunctionDef) and node is not root:
            names.add(node.name)
        elif isinstance(node, gast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, gast.ExceptHandler) and isinstance(node.name, str):
            names.add(node.name)
        elif isinstance(node, (gast.MatchAs, gast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, gast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, (gast.Global, gast.Nonlocal)):
            names.update(node.names)
    return names
