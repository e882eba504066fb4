"""One record per transformed function, its artifacts named by role, and the cache of
them.

An ``Entry`` is what astad wrote for one Python function (and one choice of
``preaccumulate`` and method binding):

- ``taped``: the paper's transform, ``taped(tape, *args, **kwargs)``: runs on any
  arguments, recording on a tape (or a forward level);
- ``tapeless``: value and gradient of float arguments written out, ``tapeless(*args) ->
  (value, gradients)`` or None when an argument is not of the kinds it was written for
  (specialise/: straight-line code without a tape, or loops on a flat tape: ``tapes``);
- ``forward``: forward mode on float arguments, ``forward(*args, *tangents) -> (value,
  tangent)``; ``forward_unchecked``, the same without its argument checks;
- ``compiled``: ``tapeless`` and ``forward`` compiled by a backend
  (compile/numba_backend.py), from their trees ``tapeless_tree`` and ``forward_tree``,
  made when first asked for;
- ``hvp``: Hessian-vector code (api/hvp.py), written when first asked for;
- ``rows``: for a function returning a tuple of floats, its values and every output's
  gradient (api/jacobians.py: a Jacobian's rows), written when first asked for;
- the texts ``.source`` shows, and ``helpers``: the plain Python functions whose
  transformed versions this code calls (compile/helpers.py shows their code after its own).

``is_current(fn)`` is the one check every caller makes (in C too: runtime/_native.h):
the function's ``__code__`` is the one the entry was written from, and every binding it
was written for still holds (transform/bindings.py).
"""
from __future__ import annotations

import math
import threading
import types
import weakref

from ..transform.bindings import MISSING, unchanged

UNBUILT = object()  # (an artifact written only when first asked for)


class Entry:
    """What astad wrote for one function (see the module docstring)."""

    __slots__ = ("function", "code", "dependencies", "taped", "tapeless", "tapes", "arity",
                 "forward", "forward_unchecked", "hvp", "rows", "transformed_source",
                 "specialised_source", "forward_source", "source", "helpers", "recipe",
                 "cell_recipes", "reads_defaults", "tapeless_tree", "forward_tree", "compiled",
                 "__weakref__")

    def __init__(self, fn, taped, dependencies: list, source: str, tapeless=None,
                 specialised: str = ""):
        self.function = weakref.ref(fn)
        self.code = fn.__code__  # (IPython's autoreload replaces it: then rebuilt)
        self.dependencies = dependencies
        self.taped = taped
        self.tapeless = tapeless
        self.tapes = False  # does ``tapeless`` build a tape (specialise/loops.py)?
        self.tapeless_tree = self.forward_tree = None  # (their trees: compiled backends)
        self.compiled: dict = {}  # backend -> tapeless compiled (numba_backend), or False
        self.arity = fn.__code__.co_argcount
        self.forward = self.forward_unchecked = None
        self.hvp = UNBUILT
        self.rows = UNBUILT
        self.transformed_source = source
        self.specialised_source = specialised
        self.forward_source = None
        self.source = source + ("\n\n" + specialised if specialised else "")
        self.helpers: tuple = ()  # (weakref to callee, its preaccumulate, line of the call)
        # how ``taped`` is made again for another function of the same code (rebound):
        # (its code, each free variable's cell: ("cell", cell), ("user", k) the function's
        # k-th closure cell, or ("itself", None))
        self.recipe = None
        # the artifacts that read the function's closure cells, by role -> how each is
        # bound to a function's cells (with_cells)
        self.cell_recipes: dict = {}
        # does code written here read the function's own defaults as constants (a
        # recursive call leaving them out)? Then no other function of its code takes it.
        self.reads_defaults = False

    def is_current(self, fn) -> bool:
        """Was this written from ``fn``'s code, and does every binding it was written for
        still hold?"""
        return self.code is fn.__code__ and (not self.dependencies or
                                             unchanged(self.dependencies, MISSING))


def own_defaults(fn) -> list:
    """The bindings an entry of ``fn`` depends on as its taped code copies ``fn``'s
    defaults when made: a new ``__defaults__`` tuple makes it again."""
    return [(weakref.ref(fn), name, getattr(fn, name))
            for name in ("__defaults__", "__kwdefaults__") if getattr(fn, name) is not None]


def is_own_default(binding, fn) -> bool:
    return type(binding[0]) is weakref.ref and binding[0]() is fn and \
        binding[1] in ("__defaults__", "__kwdefaults__")


class Template:
    """What an entry shares with every function of its code: the taped code and how its
    free variables are filled (``recipe``), the artifacts written for argument kinds, the
    bindings it depends on. Nothing of the function's own: no closure cell, no default
    (each function's are its own: the taped code is made with them, the specialised code
    takes them as arguments), so a function made at run time over a large array is not
    kept alive by it."""

    __slots__ = ("recipe", "globals", "dependencies", "artifacts", "doc", "cell_recipes",
                 "classes", "last_run")
    SHARED = ("tapeless", "tapeless_tree", "tapes", "forward", "forward_tree",
              "forward_unchecked",
              "specialised_source",
              "forward_source", "source", "helpers", "transformed_source")

    def __init__(self, entry: Entry, fn, classes: tuple = ()):
        taped = entry.taped
        self.classes = classes  # (position, class) of each class in the closure
        self.recipe, self.globals, self.doc = entry.recipe, taped.__globals__, taped.__doc__
        self.dependencies = [binding for binding in entry.dependencies  # (none on ``fn``)
                             if not is_own_default(binding, fn)]
        self.artifacts = {slot: getattr(entry, slot) for slot in self.SHARED
                          if slot not in entry.cell_recipes}  # (no cell either)
        self.cell_recipes = entry.cell_recipes
        self.last_run = None  # (a weak reference to the last function api/inline ran)

    def fits(self, fn) -> bool:
        """May ``fn`` (a function of this code) take this code?"""
        return self.bindings_for(fn) is not None

    def bindings_for(self, fn) -> list | None:
        """The bindings the code depends on as ``fn`` reads them, or None where ``fn``
        may not take this code. ``fn`` must have the same classes in its closure (their
        properties shape the code), and every binding the code was written for must hold:
        in the same globals, the same objects; in other globals (a function sent to this
        process by value: cloudpickle gives each task globals of its own), ``fn``'s hold
        equal values (``same_value``), and the bindings are read there from then on."""
        if closure_classes(fn) != self.classes or not unchanged(self.dependencies, MISSING):
            return None
        if fn.__globals__ is self.globals:
            return self.dependencies
        old, new, out = self.globals, fn.__globals__, []
        for namespace, name, value in self.dependencies:
            if namespace is old:
                found = new.get(name, MISSING)
                if not same_value(value, found, old, new):
                    return None
                namespace, value = new, found
            out.append((namespace, name, value))
        return out


def same_value(a, b, old: dict, new: dict, depth: int = 0) -> bool:
    """Does ``b``, read in globals ``new``, compute what ``a``, read in ``old``, does? The
    same object; an equal number, string or tuple of them (a float's sign and nan
    included); a function of equal code, defaults and closure whose globals are ``old``
    and ``new`` (its own reads are bindings of the same code, checked as these are).
    Anything else (an array, a list, an object) only as the same object."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b) or depth > 8:
        return False
    if t is float:
        return (a == b or a != a and b != b) and math.copysign(1.0, a) == \
            math.copysign(1.0, b)
    if t in (int, bool, str, bytes, complex):
        return a == b
    if t is tuple:
        return len(a) == len(b) and all(same_value(x, y, old, new, depth + 1)
                                        for x, y in zip(a, b))
    if t is types.FunctionType:
        if a.__code__ != b.__code__ or a.__globals__ is not old or b.__globals__ is not new \
                or a.__kwdefaults__ is not None or b.__kwdefaults__ is not None:
            return False
        cells = (tuple(map(_contents, a.__closure__ or ())),
                 tuple(map(_contents, b.__closure__ or ())))
        return same_value((a.__defaults__, cells[0]), (b.__defaults__, cells[1]), old, new,
                          depth + 1)
    return False


def template_of(entry: Entry, fn) -> Template | None:
    if entry.recipe is None or entry.reads_defaults:
        return None
    return Template(entry, fn, closure_classes(fn))


def closure_classes(fn) -> tuple:
    """``(position, class)`` of each class in ``fn``'s closure: the code is written for
    them (the properties they define, transform/reverse.py), so a function made again
    takes the code only if its closure holds the same classes at the same places."""
    closure = fn.__closure__
    if closure is None:
        return ()
    return tuple([(k, value) for k, value in enumerate(map(_contents, closure))
                  if isinstance(value, type)])


def rebound(template: Template, fn) -> Entry | None:
    """The code of ``template``, written for another function of ``fn``'s code (a lambda
    or nested ``def`` made again: a new function object, the same code), bound to ``fn``'s
    closure cells and defaults; None where it does not apply to ``fn`` (other globals,
    another class in its closure, or a binding the code was written for has changed)."""
    bindings = template.bindings_for(fn)
    if bindings is None:
        return None
    code, cells = template.recipe
    closure, itself = [], None
    for kind, cell in cells:
        if kind == "itself":
            itself = types.CellType()
            closure.append(itself)
        else:
            closure.append(cell if kind == "cell" else fn.__closure__[cell])
    taped = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                               tuple(closure) or None)
    taped.__kwdefaults__ = fn.__kwdefaults__
    taped.__qualname__, taped.__doc__ = fn.__qualname__, template.doc
    taped._astad_origin = weakref.ref(fn)  # (core/escape.py)
    if itself is not None:
        itself.cell_contents = taped
    entry = Entry(fn, taped, list(bindings) + own_defaults(fn),
                  template.artifacts["transformed_source"])
    for slot, value in template.artifacts.items():
        setattr(entry, slot, value)  # (written for kinds of values, not for the function)
    for slot, recipe in template.cell_recipes.items():
        setattr(entry, slot, with_cells(recipe, fn))
    entry.recipe, entry.cell_recipes = template.recipe, template.cell_recipes
    return entry


def with_cells(recipe: tuple, fn):
    """The specialised code ``recipe`` describes (its code, globals, and the positions in
    ``fn``'s closure of the cells it reads), as a function over ``fn``'s cells."""
    code, namespace, positions = recipe
    closure = fn.__closure__
    return types.FunctionType(code, namespace, code.co_name, None,
                              tuple([closure[k] for k in positions]))


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # (an empty cell)
        return None


# (code, preaccumulate, as_method) -> the Template of the entry last written for a
# function of that code, which later functions of the same code are bound from
# (rebound). Code objects compare by value: a lambda made again has an equal one.
BY_CODE: dict = {}


# Code objects astad generated: their functions already take part in the transform.
GENERATED_CODE: set = set()


def remember(code: types.CodeType) -> None:
    """Note ``code`` (and the code nested in it) as astad's own."""
    GENERATED_CODE.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            remember(const)


# (id(fn), preaccumulate, as_method) -> Entry, dropped when fn is: a function made at run
# time (a closure over a large array, say) must not be kept alive by astad
CACHE: dict = {}
LOCK = threading.RLock()


def cached(fn, preaccumulate: bool = True, as_method: bool = False):
    """The entry of ``fn`` if it is cached and current, else None."""
    entry = CACHE.get((id(fn), preaccumulate, as_method))
    # (an entry under fn's id is fn's own unless fn's id is a dead function's whose
    # finaliser did not run, as one run deep in a recursion can fail: asked, not assumed)
    if entry is not None and entry.function() is fn and entry.is_current(fn):
        return entry
    return None


def store(fn, entry: Entry, preaccumulate: bool, as_method: bool) -> None:
    key = (id(fn), preaccumulate, as_method)
    held = CACHE.get(key)
    if held is None or held.function() is not fn:  # (fn's own finaliser, once)
        weakref.finalize(fn, _drop, key)
    CACHE[key] = entry


def _drop(key) -> None:
    """A dead function's entry leaves the cache (unless its id names a live one now)."""
    entry = CACHE.get(key)
    if entry is not None and entry.function() is None:
        del CACHE[key]
