"""What the specialised writers share: a ``Scope`` (one function body being written), the
activity analysis seeded with what the writer knows of the parameters, and the names no
local of the written code may take."""
from __future__ import annotations

import re

from ..front.activity import Activity
from ..registry import float_rules, formulas
from .value_kinds import nonnegative_names


def rule_helpers() -> set:
    """The names the rules' primal and partial expressions use (sin, _inv, LN2...), and
    those the generated code calls: no local of the generated code may hide them."""
    words = set()
    for _, primal, partials in formulas() + float_rules():
        for expression in (primal, *partials):
            words.update(re.findall(r"(?<![\w.])[A-Za-z_]\w*", expression))
    return (words - {"x", "y", "r", "if", "else", "or", "and", "not"}) | {
        "ad", "len", "type", "float", "list", "tuple", "set", "map", "all", "id", "zip",
        "range", "reversed", "enumerate", "int", "abs", "min", "max", "round", "bool",
        "math", "accumulate", "object"}


class Scope:
    """One function body being written: the user's function, or one inlined call of a
    helper. ``vars``: each user name bound so far -> its local (specialise/value_kinds.py)."""

    def __init__(self, fn, root, resolver, activity, local_names, filename, prefix="",
                 call_line=None, same_file=True):
        self.fn, self.root, self.resolver = fn, root, resolver
        self.activity, self.local_names = activity, set(local_names)
        self.filename, self.prefix = filename, prefix
        self.call_line, self.same_file = call_line, same_file
        self.vars: dict = {}
        self.nonnegative = nonnegative_names(root, activity.inactive & self.local_names)
        self.writer = None
        self.parent = None  # the body a local function is defined in: its free names'

    def owner(self, name: str):
        """The scope whose local ``name`` is (this one or one it is defined in), or None
        for a global."""
        scope = self
        while scope is not None:
            if name in scope.vars or name in scope.local_names:
                return scope
            scope = scope.parent
        return None

    def user_line(self, lineno: int) -> int:
        """The line of the user's function a statement of this body is attributed to."""
        return lineno if self.call_line is None or self.same_file else self.call_line

    def local(self, name: str, like, active: bool | None = None):
        """The local for user name ``name``, made on its first binding: its kind from
        the value bound (``like``) and, unless ``active`` says, the analysis."""
        local = self.vars.get(name)
        if local is None:
            if active is None:
                active = name not in self.activity.inactive
            local = self.vars[name] = self.writer.new_local(
                self.prefix + name if self.prefix else name, like, active,
                own=not self.prefix)
        return local


def seeded_activity(root, local_names: set, params: list, plain: set):
    """The activity analysis with the parameters in ``plain`` known to hold no
    derivative (the writer refuses every construct that binds names other than
    assignments, ``for`` targets and parameters, the analysis's other sources)."""
    activity = Activity.__new__(Activity)
    activity.local_names, activity.root = local_names, root
    activity.inactive = set(local_names) - (set(params) - set(plain))
    activity._fixpoint()
    return activity
