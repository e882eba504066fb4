"""Checking astad's gradients against central finite differences.

    from astad.testing import check_grads

    def test_loss_gradient():
        check_grads(loss, 0.5, [1.0, 2.0], {"scale": 3.0})

:func:`check_grads` raises ``AssertionError`` (so pytest shows it as a failed test)
naming every gradient entry that disagrees, by its path in the arguments
(``args[0].layers[1].bias[3]``), with astad's value, the finite-difference value and
the relative error. It walks the argument structures astad's gradients mirror: floats,
lists, tuples, named tuples, dicts, dataclasses and float numpy arrays.

For a float result every checked entry of the gradient ``.grad`` returns is compared
with a central difference of the function, and ``.vjp``'s pullback must give the same
gradient (``.grad`` may run code specialised for float arguments, ``.vjp`` never does).
For any other result (a list, a dict, an array, ...) the check uses the adjoint
identity ``<w, J v> == <J^T w, v>``: ``J^T w`` comes from ``f.vjp`` with a random
cotangent ``w`` shaped like the result, and each of its entries is compared with the
central difference of ``<w, f(x)>`` along that entry. In both cases one more comparison
takes a random direction ``v`` over every float of the chosen arguments, so the elements
of large arrays that are not checked one by one (at most ``max_elements`` per array
are) still take part.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .structure import record_attributes

__all__ = ["check_grads", "GradCheck", "Mismatch"]


# -- results ------------------------------------------------------------------------------
@dataclass
class Mismatch:
    """One comparison: astad's value and the finite-difference value at ``path``."""

    path: str
    astad: float
    finite_difference: float
    rel_error: float


@dataclass
class GradCheck:
    """What :func:`check_grads` compared (returned when every comparison passes)."""

    name: str
    checked: int                      # gradient entries compared one by one
    max_rel_error: float              # over every comparison (value and direction too)
    max_abs_error: float
    scalar_result: bool               # False: checked through the adjoint identity
    comparisons: list[Mismatch] = field(default_factory=list, repr=False)  # every one made

    def __str__(self) -> str:
        one = self.checked == 1
        how = ("gradient entry" if one else "gradient entries") if self.scalar_result else \
            ("entry of J^T w" if one else "entries of J^T w")
        return (f"OK: {self.name}: {self.checked} {how} match{'es' if one else ''} central "
                "finite differences "
                f"(max relative error {self.max_rel_error:.2e}, max absolute error "
                f"{self.max_abs_error:.2e})")


# -- paths ----------------------------------------------------------------------------------
# A path is a tuple of steps; a step is (kind, key) with kind one of
#   "i": a list or tuple index, "k": a dict key, "a": an attribute (dataclass field,
#   named tuple field), "e": an element of a numpy array (an index tuple).
def _format_path(root: str, steps) -> str:
    parts = [root]
    for kind, key in steps:
        if kind == "i":
            parts.append(f"[{key}]")
        elif kind == "k":
            parts.append(f"[{key!r}]")
        elif kind == "a":
            parts.append(f".{key}")
        else:  # "e"
            parts.append("[()]" if key == () else f"[{', '.join(str(int(k)) for k in key)}]")
    return "".join(parts)


def _is_float(value) -> bool:
    return isinstance(value, float) and not isinstance(value, bool)


def _is_float_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _is_record(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _children(value):
    """(step, child) pairs of a container astad walks, or None for a leaf."""
    if isinstance(value, dict):
        return [(("k", key), item) for key, item in value.items()]
    if _is_namedtuple(value):
        return [(("a", name), item) for name, item in zip(type(value)._fields, value)]
    if isinstance(value, (list, tuple)):
        return [(("i", k), item) for k, item in enumerate(value)]
    if _is_record(value):
        return [(("a", name), item) for name, item in record_attributes(value)]
    return None


def _leaves(value, steps=(), seen=None):
    """(steps, leaf) for every float and float array in ``value``, depth first.

    A container reached twice (aliasing, cycles) is walked once, at its first path."""
    if seen is None:
        seen = set()
    if _is_float(value) or _is_float_array(value):
        yield steps, value
        return
    children = _children(value)
    if children is None:
        return
    if id(value) in seen:
        return
    seen.add(id(value))
    for step, child in children:
        yield from _leaves(child, steps + (step,), seen)


def _step_into(value, step, where):
    __tracebackhide__ = True
    kind, key = step
    try:
        if kind == "i" or kind == "k":
            return value[key]
        if kind == "a":
            return getattr(value, key)
        return value[key]
    except (KeyError, IndexError, AttributeError, TypeError) as exc:
        raise AssertionError(f"the gradient does not have the argument's structure at "
                             f"{where}: {exc!r}") from None


def _get(value, steps, root):
    __tracebackhide__ = True
    for n, step in enumerate(steps):
        value = _step_into(value, step, _format_path(root, steps[:n + 1]))
    return value


# -- copying and perturbing arguments -------------------------------------------------------
def _copy_other(value, memo):
    __tracebackhide__ = True
    try:
        return copy.deepcopy(value, memo)
    except Exception:  # modules, locks, ...: passed as they are
        return value


def _rebuild(value, change, steps=(), memo=None):
    """A fresh copy of ``value`` in which each float leaf (and float array) ``x`` at
    ``steps`` becomes ``change(steps, x)``. Containers shared within ``value`` stay
    shared (and cycles are kept); anything else is deep-copied, so the function may
    mutate its arguments without disturbing later evaluations."""
    __tracebackhide__ = True
    if memo is None:
        memo = {}
    if _is_float(value) or _is_float_array(value):
        new = change(steps, value)
        return new if new is not value or not isinstance(value, np.ndarray) else value.copy()
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, list):
        new = copy.copy(value) if type(value) is not list else []
        memo[id(value)] = new
        items = [_rebuild(x, change, steps + (("i", k),), memo) for k, x in enumerate(value)]
        new[:] = items
        return new
    if isinstance(value, dict):
        new = copy.copy(value)  # keeps the mapping type (and a defaultdict's factory)
        memo[id(value)] = new
        for key, item in value.items():
            new[key] = _rebuild(item, change, steps + (("k", key),), memo)
        return new
    if _is_namedtuple(value):
        new = type(value)._make(_rebuild(x, change, steps + (("a", name),), memo)
                                for name, x in zip(type(value)._fields, value))
        memo[id(value)] = new
        return new
    if isinstance(value, tuple):
        items = [_rebuild(x, change, steps + (("i", k),), memo) for k, x in enumerate(value)]
        new = tuple(items) if type(value) is tuple else type(value)(items)
        memo[id(value)] = new
        return new
    if _is_record(value):
        new = object.__new__(type(value))  # no user __init__/__post_init__ runs
        memo[id(value)] = new
        for name, item in record_attributes(value):
            object.__setattr__(new, name, _rebuild(item, change, steps + (("a", name),), memo))
        return new
    return _copy_other(value, memo)


def _same(steps, x):
    return x


# -- results: cotangents and inner products -------------------------------------------------
def _is_scalar_result(value) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind == "f"
    return _is_float(value) or isinstance(value, np.floating)


def _random_cotangent(value, rng):
    """A cotangent shaped like ``value``: standard normal floats at its float leaves,
    None (zero) elsewhere."""
    if _is_float(value):
        return float(rng.standard_normal())
    if _is_float_array(value):
        return rng.standard_normal(value.shape).astype(value.dtype)
    if isinstance(value, dict):
        return {key: _random_cotangent(item, rng) for key, item in value.items()}
    if _is_namedtuple(value):
        return type(value)._make(_random_cotangent(x, rng) for x in value)
    if isinstance(value, (list, tuple)):
        return type(value)(_random_cotangent(x, rng) for x in value) \
            if type(value) in (list, tuple) else [_random_cotangent(x, rng) for x in value]
    if _is_record(value):
        new = object.__new__(type(value))
        for name, item in record_attributes(value):
            object.__setattr__(new, name, _random_cotangent(item, rng))
        return new
    return None


def _inner(w, y, path="result") -> float:
    """<w, y> over the float leaves of a result ``y`` and its cotangent ``w``."""
    __tracebackhide__ = True
    if w is None:
        return 0.0
    if _is_float(w) or isinstance(w, np.ndarray):
        if np.shape(w) != np.shape(y):
            raise AssertionError(f"the function's result changed shape at {path} between "
                                 f"evaluations: {np.shape(w)} then {np.shape(y)}")
        return float(np.sum(np.asarray(w, dtype=float) * np.asarray(y, dtype=float)))
    if isinstance(w, dict):
        if not isinstance(y, dict) or w.keys() != y.keys():
            raise AssertionError(f"the function's result changed structure at {path} "
                                 "between evaluations")
        return sum(_inner(w[k], y[k], f"{path}[{k!r}]") for k in w)
    if isinstance(w, (list, tuple)):
        if not isinstance(y, (list, tuple)) or len(w) != len(y):
            raise AssertionError(f"the function's result changed structure at {path} "
                                 "between evaluations")
        return sum(_inner(a, b, f"{path}[{k}]") for k, (a, b) in enumerate(zip(w, y)))
    if _is_record(w):
        if type(y) is not type(w):
            raise AssertionError(f"the function's result changed variant at {path} between "
                                 f"evaluations: {type(w).__qualname__} then "
                                 f"{type(y).__qualname__}")
        return sum(_inner(item, getattr(y, name), f"{path}.{name}")
                   for name, item in record_attributes(w))
    return 0.0


# -- the function under test ----------------------------------------------------------------
def _positions(argnums, n_args, fn):
    """(positions, single) as astad's ``argnums`` convention gives them."""
    if argnums is None:
        params = list(inspect.signature(fn).parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        return tuple(range(n_args)), len(positional) == 1 and not varargs
    single = isinstance(argnums, int)
    positions = (argnums,) if single else tuple(argnums)
    return tuple(k + n_args if k < 0 else k for k in positions), single


def _prepare(f, argnums, n_args):
    """The decorated function to check, the original function, positions and single."""
    __tracebackhide__ = True
    from .api import reverse_diff

    decorated = f if callable(getattr(f, "vjp", None)) and hasattr(f, "grad") and \
        hasattr(f, "__wrapped__") else None
    if decorated is not None:
        original = f.__wrapped__
        owner = getattr(f.grad, "__self__", None)
        own_argnums = getattr(owner, "_argnums", None)
        preaccumulate = getattr(owner, "_preaccumulate", True)
        if argnums is None:
            argnums = own_argnums
        elif argnums != own_argnums:
            decorated = reverse_diff(original, argnums=argnums, preaccumulate=preaccumulate)
    else:
        original = f
        decorated = reverse_diff(original, argnums=argnums)
    positions, single = _positions(argnums, n_args, original)
    return decorated, original, positions, single


def _rel_error(a: float, b: float, atol: float) -> float:
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(a), abs(b), atol)


def _step(x: float, eps: float, dtype) -> float:
    if dtype is not None and np.dtype(dtype) != np.float64:
        eps = max(eps, float(np.finfo(dtype).eps) ** (1.0 / 3.0))
    return eps * max(1.0, abs(float(x)))


# -- check_grads ----------------------------------------------------------------------------
def check_grads(f: Callable[..., Any], *args: Any, rtol: float = 1e-5, atol: float = 1e-7,
                eps: float = 1e-6, argnums: int | Sequence[int] | None = None,
                kwargs: Mapping[str, Any] | None = None, max_elements: int = 20,
                seed: int = 0) -> GradCheck:
    """Check astad's gradient of ``f`` at ``args`` against central finite differences.

    ``f`` is a function decorated with ``astad.reverse_diff`` (its ``argnums`` apply
    unless ``argnums`` is given here) or a plain function (decorated here). ``kwargs``
    are passed to every call and never differentiated. Every float leaf of the chosen
    positional arguments is checked (floats inside lists, tuples, named tuples, dicts
    and dataclasses); of a float numpy array, at most ``max_elements`` elements chosen
    with a fixed ``seed``, plus one random direction over all of them.

    An entry passes when ``|astad - fd| <= atol + rtol * max(|astad|, |fd|)``; the
    relative error reported is ``|astad - fd| / max(|astad|, |fd|, atol)``. The finite
    difference step for a leaf ``x`` is ``eps * max(1, |x|)`` (at least the cube root of
    the machine epsilon for float32 and float16 arrays).

    Returns a :class:`GradCheck` summary when everything agrees; raises
    ``AssertionError`` listing every mismatching entry by its path otherwise. The
    arguments themselves are never modified.
    """
    # pytest and IPython leave out the frames of functions that set __tracebackhide__:
    # a failure shows the test's own call and this message, not astad's code
    __tracebackhide__ = True
    kwargs = dict(kwargs or {})
    n_args = len(args)
    decorated, original, positions, single = _prepare(f, argnums, n_args)
    name = getattr(original, "__name__", "f")
    for k in positions:
        if not 0 <= k < n_args:
            raise ValueError(f"check_grads({name}): argnums refers to positional argument "
                             f"{k}, but {n_args} positional arguments were given")
    rng = np.random.default_rng(seed)
    base = _rebuild(args, _same)           # a private snapshot: nothing touches `args`
    base_kwargs = _rebuild(kwargs, _same)

    def fresh(change=_same):
        __tracebackhide__ = True
        return _rebuild(base, change), _rebuild(base_kwargs, _same)

    # astad: value and pullback
    call_args, call_kwargs = fresh()
    value, pullback = decorated.vjp(*call_args, **call_kwargs)
    scalar = _is_scalar_result(value)
    if scalar:
        w = 1.0
    else:
        w = _random_cotangent(value, rng)
        if not any(True for _ in _leaves(value)):
            raise ValueError(f"check_grads({name}): the result {value!r} holds no float, so "
                             "there is no derivative to check")
    gradient = pullback(w)
    gradients = {positions[0]: gradient} if single else dict(zip(positions, gradient))
    by_vjp = None
    if scalar:  # check what .grad returns: the specialised float code, where it applies
        by_vjp = gradients
        call_args, call_kwargs = fresh()
        gradient = decorated.value_and_grad(*call_args, **call_kwargs)[1]
        gradients = {positions[0]: gradient} if single else dict(zip(positions, gradient))

    def objective(change=_same) -> float:
        __tracebackhide__ = True
        a, kw = fresh(change)
        y = original(*a, **kw)
        return float(y) if scalar else _inner(w, y)

    comparisons = []  # (path, astad, fd)

    # 1. the value astad's forward pass computed is the function's own
    primal = objective()
    astad_value = float(value) if scalar else _inner(w, value)
    comparisons.append(("value" if scalar else "<w, value>", astad_value, primal))

    # 2. each leaf (sampled in large arrays) on its own
    # (walked over all the arguments in the order _rebuild walks them, so that a container
    # passed twice is perturbed at the path where it is met first)
    leaves = [(steps, leaf) for steps, leaf in _leaves(base) if steps[0][1] in positions]
    sampled_out = False
    for steps, leaf in leaves:
        root_steps, inner = steps[:1], steps[1:]
        g_leaf = _get(gradients[steps[0][1]], inner, _format_path("args", root_steps))
        if isinstance(leaf, np.ndarray):
            if leaf.size > max_elements:
                sampled_out = True
                flat = np.sort(rng.choice(leaf.size, size=max_elements, replace=False))
            else:
                flat = np.arange(leaf.size)
            indices = [tuple(int(i) for i in np.unravel_index(j, leaf.shape)) for j in flat]
            if np.shape(g_leaf) != leaf.shape:
                raise AssertionError(
                    f"check_grads({name}): the gradient at {_format_path('args', steps)} has "
                    f"shape {np.shape(g_leaf)}, the argument {leaf.shape}")
            for index in indices:
                x = leaf[index]
                h = _step(x, eps, leaf.dtype)
                fd = _central(objective, steps, index, x, h, leaf.dtype)
                comparisons.append((_format_path("args", steps + (("e", index),)),
                                    float(g_leaf[index]), fd))
        else:
            h = _step(leaf, eps, None)
            fd = _central(objective, steps, None, leaf, h, None)
            try:
                g_value = float(g_leaf)
            except (TypeError, ValueError):
                raise AssertionError(
                    f"check_grads({name}): the gradient at {_format_path('args', steps)} is "
                    f"{g_leaf!r}, not a float") from None
            comparisons.append((_format_path("args", steps), g_value, fd))

    n_entries = len(comparisons) - 1
    if by_vjp is not None:  # and that .vjp's pullback gives the same gradient
        for steps, _ in leaves:
            path = _format_path("args", steps[:1])
            ours = np.asarray(_get(gradients[steps[0][1]], steps[1:], path), dtype=float)
            theirs = np.asarray(_get(by_vjp[steps[0][1]], steps[1:], path), dtype=float)
            if ours.shape != theirs.shape or not np.allclose(ours, theirs, rtol=rtol,
                                                             atol=atol, equal_nan=True):
                raise AssertionError(
                    f"check_grads({name}): .grad and .vjp(...)[1](1.0) disagree at "
                    f"{_format_path('args', steps)}: {ours!r} and {theirs!r}")

    # 3. a random direction over every float of the chosen arguments
    if leaves and (sampled_out or not scalar):
        comparisons.append(_along_random_direction(objective, leaves, gradients, eps, rng,
                                                   scalar))

    # verdict
    records = [Mismatch(path, a, b, _rel_error(a, b, atol)) for path, a, b in comparisons]
    failed = [r for r in records if not _close(r.astad, r.finite_difference, rtol, atol)]
    finite = [r for r in records if math.isfinite(r.astad) and math.isfinite(
        r.finite_difference)]
    max_rel = max((r.rel_error for r in records), default=0.0)
    max_abs = max((abs(r.astad - r.finite_difference) for r in finite), default=0.0)
    if failed:
        raise AssertionError(_report(name, failed, n_entries, scalar, rtol, atol, eps,
                                     sampled_out, seed))
    return GradCheck(name, n_entries, max_rel, max_abs, scalar, records)


def _along_random_direction(objective, leaves, gradients, eps, rng, scalar):
    """(label, astad, fd) for one random direction ``v`` over every float leaf: astad's
    ``<J^T w, v>`` (or ``<gradient, v>``) against the central difference of the
    objective along ``v``. It covers the array elements not checked one by one."""
    __tracebackhide__ = True
    directions = {}
    for steps, leaf in leaves:
        if isinstance(leaf, np.ndarray):
            directions[steps] = rng.standard_normal(leaf.shape)
        else:
            directions[steps] = float(rng.standard_normal())
    scale = max([1.0] + [float(np.max(np.abs(leaf))) if isinstance(leaf, np.ndarray)
                         else abs(float(leaf)) for _, leaf in leaves
                         if not isinstance(leaf, np.ndarray) or leaf.size])
    h = eps * scale
    if any(isinstance(leaf, np.ndarray) and leaf.dtype != np.float64 for _, leaf in leaves):
        h = max(h, float(np.finfo(np.float32).eps) ** (1.0 / 3.0) * scale)
    moved = {}  # sign -> steps -> the perturbed leaf as stored (float32 rounds it)

    def along(sign):
        def change(steps, x):
            __tracebackhide__ = True
            v = directions.get(steps)
            if v is None:
                return x
            if isinstance(x, np.ndarray):
                new = (x + sign * h * v).astype(x.dtype)
                moved.setdefault(sign, {})[steps] = new.astype(float)
                return new
            new = x + sign * h * v
            if type(x) is not float:  # a float subclass (numpy float64, ...)
                new = type(x)(new)
            moved.setdefault(sign, {})[steps] = float(new)
            return new
        return change

    plus, minus = objective(along(1.0)), objective(along(-1.0))
    fd = (plus - minus) / (2.0 * h)
    ad_value = 0.0
    for steps, _ in leaves:
        g_leaf = _get(gradients[steps[0][1]], steps[1:], _format_path("args", steps[:1]))
        delta = np.asarray(moved[1.0][steps]) - np.asarray(moved[-1.0][steps])
        ad_value += float(np.sum(np.asarray(g_leaf, dtype=float) * delta)) / (2.0 * h)
    label = "<gradient, v> (random direction v)" if scalar else \
        "<J^T w, v> (random direction v)"
    return label, ad_value, fd


def _central(objective, steps, index, x, h, dtype) -> float:
    """Central difference of ``objective`` along one leaf (an element if ``index``)."""
    __tracebackhide__ = True
    stored = {}

    def at(sign):
        def change(s, leaf):
            __tracebackhide__ = True
            if s != steps:
                return leaf
            if index is None:
                new = x + sign * h
                if type(leaf) is not float:  # a float subclass (numpy float64, ...)
                    new = type(leaf)(new)
                stored[sign] = float(new)
                return new
            new = leaf.copy()
            new[index] = x + sign * h
            stored[sign] = float(new[index])
            return new
        return change

    plus = objective(at(1.0))
    minus = objective(at(-1.0))
    if len(stored) != 2:
        raise AssertionError(f"check_grads: could not perturb {_format_path('args', steps)}")
    delta = stored[1.0] - stored[-1.0]  # the step as stored (float32 rounds it)
    if delta == 0.0:
        return math.nan
    return (plus - minus) / delta


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def _report(name, failed, total, scalar, rtol, atol, eps, sampled_out, seed) -> str:
    """The failure message: one line that counts exactly the rows of the table below it,
    the table, then how the check was made."""
    entries = [r for r in failed if r.path.startswith("args")]
    what = "gradient entries" if scalar else "entries of J^T w"
    parts = [f"{len(entries)} of {total} {what}"] if entries else []
    parts += ["the check along a random direction" for r in failed if "random" in r.path]
    clauses = []
    if parts:
        verb = "disagrees" if len(parts) == 1 and not entries else "disagree"
        clauses.append(f"{' and '.join(parts)} {verb} with central finite differences")
    if any(r.path in ("value", "<w, value>") for r in failed):
        clauses.append("the value astad computes disagrees with the function's own")
    if total and not entries:
        clauses.append(f"the {total} {what} checked one by one agree" if total > 1 else
                       f"the {what.replace('entries', 'entry')} checked one by one agrees")
    lines = [f"check_grads({name}): {'; '.join(clauses)}"]
    rows = [("path", "astad", "finite difference", "rel. error")]
    rows += [(r.path, _num(r.astad), _num(r.finite_difference), f"{r.rel_error:.2e}")
             for r in failed]
    widths = [max(len(row[c]) for row in rows) for c in range(4)]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(widths[c]) if c == 0 else
                                      cell.rjust(widths[c]) for c, cell in enumerate(row)))
    lines.append(f"  (rtol={rtol:g}, atol={atol:g}, eps={eps:g})")
    if not scalar:
        lines.append("  (J^T w: the gradient of <w, f(x)> for a random cotangent w of the "
                     f"result, seed {seed}; compared with central differences of <w, f(x)>)")
    if sampled_out:
        lines.append("  (large arrays were sampled: at most the chosen elements are listed; "
                     "the random direction covers every element)")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:.10g}"
