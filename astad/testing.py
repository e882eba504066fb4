"""Checking astad's gradients against central finite differences.

    from astad.testing import check_grads

    def test_loss_gradient():
        check_grads(loss, 0.5, [1.0, 2.0], {"scale": 3.0})

:func:`check_grads` raises ``AssertionError`` (so pytest shows it as a failed test)
naming every gradient entry that disagrees, by its path in the arguments
(``args[0].layers[1].bias[3]``), with astad's value, the finite-difference value and
the relative error. It walks the arguments as ``astad.grad`` does (astad/data/tree.py), so it
checks every leaf the gradient has: floats, numpy float scalars and float arrays inside
lists, tuples, named tuples, dicts, dataclasses, the standard containers and containers
registered with ``astad.register_pytree_node``.

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
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .data import tree
from .errors import InputError, api_boundary

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
# The arguments are walked as astad walks them (data/tree.py): every leaf astad.grad
# differentiates (floats, numpy float scalars, float arrays, inside every container astad
# knows and the ones registered with it), each identified by its position k in the walk's
# order, and found again in a gradient by its path.
def _leaf_paths(args) -> list:
    """``(path, leaf)`` of every float and float array of ``args`` (a tuple), in order."""
    return tree.leaf_paths(args)


def _format_path(path, element=None) -> str:
    text = tree.format_path("args", path)
    if element is None:
        return text
    return text + ("[()]" if element == () else f"[{', '.join(str(int(k)) for k in element)}]")


def _get(gradients, path):
    """The entry of ``gradients`` (by argument position) at the argument leaf ``path``."""
    __tracebackhide__ = True
    steps = path.steps()
    value = gradients[steps[0][1]]
    for n, (node, key) in enumerate(steps[1:], 2):
        try:
            value = node.child(value, key)
        except (KeyError, IndexError, AttributeError, TypeError, InputError) as exc:
            where = "args" + "".join(node.step(key) for node, key in steps[:n])
            raise AssertionError(f"the gradient does not have the argument's structure at "
                                 f"{where}: {exc!r}") from None
    return value


# -- copying and perturbing arguments -------------------------------------------------------
def _copy_other(value, memo):
    __tracebackhide__ = True
    try:
        return copy.deepcopy(value, memo)
    except Exception:  # modules, locks, ...: passed as they are
        return value


def _rebuild(value, change=None):
    """A fresh copy of ``value`` in which the k-th leaf ``x`` (in ``_leaf_paths``' order)
    becomes ``change(k, x)`` (or a copy of itself). Containers shared within ``value``
    stay shared (and cycles are kept); anything else is deep-copied, so the function may
    mutate its arguments without disturbing later evaluations."""
    __tracebackhide__ = True
    memo: dict = {}
    position = iter(range(1 << 62))

    def leaf(x):
        new = x if change is None else change(next(position), x)
        return new if new is not x or not isinstance(x, np.ndarray) else x.copy()
    return tree.tree_map(leaf, value, other=lambda x: _copy_other(x, memo))


# -- results: cotangents and inner products -------------------------------------------------
def _is_scalar_result(value) -> bool:
    """A real number (a complex one has no gradient: it is checked as ``vjp`` is)."""
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind == "f"
    return tree.is_float(value)


def _random_cotangent(value, rng):
    """A cotangent shaped like ``value``: standard normal floats at its float leaves (of
    the leaf's own shape and dtype), None (zero) elsewhere."""
    def leaf(x):
        if np.iscomplexobj(x):
            w = rng.standard_normal(np.shape(x)) + 1j * rng.standard_normal(np.shape(x))
            return w.astype(x.dtype) if isinstance(x, np.ndarray) else complex(w)
        if isinstance(x, np.ndarray):
            return rng.standard_normal(x.shape).astype(x.dtype)
        return float(rng.standard_normal())
    return tree.tree_map(leaf, value, other=lambda x: None)


def _inner(w, y) -> float:
    """<w, y> over the float leaves of a result ``y`` and its cotangent ``w`` (shaped like
    an earlier result)."""
    __tracebackhide__ = True
    ours, theirs = tree.leaf_paths(w), tree.leaf_paths(y)
    if [tree.format_path("result", p) for p, _ in ours] != \
            [tree.format_path("result", p) for p, _ in theirs]:
        raise AssertionError("the function's result changed structure between evaluations: "
                             f"{[tree.format_path('result', p) for p, _ in ours]} then "
                             f"{[tree.format_path('result', p) for p, _ in theirs]}")
    total = 0.0
    for (path, a), (_, b) in zip(ours, theirs):
        if np.shape(a) != np.shape(b):
            raise AssertionError(f"the function's result changed shape at "
                                 f"{tree.format_path('result', path)} between evaluations: "
                                 f"{np.shape(a)} then {np.shape(b)}")
        total += float(np.real(np.sum(_wide(a) * _wide(b))))  # (Re: JAX's pairing)
    return total


def _wide(x):
    """``x`` as an array of double precision (complex for a complex value)."""
    return np.asarray(x, dtype=complex if np.iscomplexobj(x) else float)


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
    if dtype is not None and np.dtype(dtype) not in (np.float64, np.complex128):
        eps = max(eps, float(np.finfo(dtype).eps) ** (1.0 / 3.0))
    return eps * max(1.0, abs(complex(x)))


# a complex entry is checked along its real and its imaginary part: the gradient is
# df/dx - i df/dy (JAX's convention), so its real part and minus its imaginary part
_PARTS = ((1.0, "", lambda g: float(np.real(g))),
          (1j, " (imaginary part)", lambda g: -float(np.imag(g))))


# -- check_grads ----------------------------------------------------------------------------
@api_boundary
def check_grads(f: Callable[..., Any], *args: Any, rtol: float = 1e-5, atol: float = 1e-7,
                eps: float = 1e-6, argnums: int | Sequence[int] | None = None,
                kwargs: Mapping[str, Any] | None = None, max_elements: int = 20,
                max_leaves: int = 100, seed: int = 0) -> GradCheck:
    """Check astad's gradient of ``f`` at ``args`` against central finite differences.

    ``f`` is a function decorated with ``astad.reverse_diff`` (its ``argnums`` apply
    unless ``argnums`` is given here) or a plain function (decorated here). ``kwargs``
    are passed to every call and never differentiated. The leaves checked are exactly
    the ones ``astad.grad`` differentiates: every float (numpy float scalars included)
    and float array of the chosen positional arguments, inside every container astad
    walks (lists, tuples, named tuples, dicts, dataclasses, the standard containers,
    containers registered with ``astad.register_pytree_node``). Of a float numpy array
    at most ``max_elements`` elements are checked one by one, and of the float leaves
    outside arrays at most ``max_leaves``, chosen with a fixed ``seed``; one more check
    along a random direction covers every element and every leaf. Finding no leaf at
    all is a failure: there would be nothing to check.

    An entry passes when ``|astad - fd| <= atol + rtol * max(|astad|, |fd|)``; the
    relative error reported is ``|astad - fd| / max(|astad|, |fd|, atol)``. The finite
    difference step for a leaf ``x`` is ``eps * max(1, |x|)`` (at least the cube root of
    the machine epsilon for float32 and float16 values).

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
    base = _rebuild(tuple(args))           # a private snapshot: nothing touches `args`
    base_kwargs = _rebuild(kwargs)
    # the leaves to check, by their position k in the walk's order (over all the
    # arguments, so that a container passed twice is checked where it is met first)
    leaves = [(k, path, leaf) for k, (path, leaf) in enumerate(_leaf_paths(base))
              if path.steps()[0][1] in positions]
    def fresh(change=None):
        __tracebackhide__ = True
        return _rebuild(base, change), _rebuild(base_kwargs)

    # astad: value and pullback (astad's own error first, where it refuses the arguments)
    call_args, call_kwargs = fresh()
    value, pullback = decorated.vjp(*call_args, **call_kwargs)
    if not leaves:  # (and where it does not, a check of nothing is a failure)
        raise AssertionError(
            f"check_grads({name}): the arguments chosen ({_chosen(positions)}) hold no float "
            "and no float array astad differentiates, so there is no gradient to check")

    scalar = _is_scalar_result(value)
    if scalar:
        w = 1.0
    else:
        w = _random_cotangent(value, rng)
        if not tree.leaves(value):
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
    entries = _Entries(gradients)

    def objective(change=None) -> float:
        __tracebackhide__ = True
        a, kw = fresh(change)
        y = original(*a, **kw)
        return float(y) if scalar else _inner(w, y)

    comparisons = []  # (path, astad, fd)

    # 1. the value astad's forward pass computed is the function's own
    primal = objective()
    astad_value = float(value) if scalar else _inner(w, value)
    comparisons.append(("value" if scalar else "<w, value>", astad_value, primal))

    # 2. each leaf (sampled in large arrays, and among many floats) on its own
    floats = [k for k, _, leaf in leaves if not isinstance(leaf, np.ndarray)]
    sampled_out = len(floats) > max_leaves
    chosen = set(floats if not sampled_out else
                 rng.choice(floats, size=max_leaves, replace=False).tolist())
    for k, path, leaf in leaves:
        g_leaf = entries.at(path)
        if isinstance(leaf, np.ndarray):
            if leaf.size > max_elements:
                sampled_out = True
                flat = np.sort(rng.choice(leaf.size, size=max_elements, replace=False))
            else:
                flat = np.arange(leaf.size)
            indices = [tuple(int(i) for i in np.unravel_index(j, leaf.shape)) for j in flat]
            if np.shape(g_leaf) != leaf.shape:
                raise AssertionError(
                    f"check_grads({name}): the gradient at {_format_path(path)} has "
                    f"shape {np.shape(g_leaf)}, the argument {leaf.shape}")
            parts = _PARTS if leaf.dtype.kind == "c" else _PARTS[:1]
            for index in indices:
                x = leaf[index]
                h = _step(x, eps, leaf.dtype)
                for unit, which, part in parts:
                    fd = _central(objective, k, path, index, x, h, unit)
                    comparisons.append((_format_path(path, index) + which,
                                        part(g_leaf[index]), fd))
            continue
        complex_leaf = type(leaf) in tree.COMPLEX_SCALARS
        try:
            g_value = complex(g_leaf) if complex_leaf else float(g_leaf)
        except (TypeError, ValueError):
            raise AssertionError(
                f"check_grads({name}): the gradient at {_format_path(path)} is "
                f"{g_leaf!r}, not a {'complex' if complex_leaf else 'float'}") from None
        if k in chosen:
            h = _step(leaf, eps, _dtype_of(leaf))
            for unit, which, part in _PARTS if complex_leaf else _PARTS[:1]:
                fd = _central(objective, k, path, None, leaf, h, unit)
                comparisons.append((_format_path(path) + which, part(g_value), fd))

    n_entries = len(comparisons) - 1
    if by_vjp is not None:  # and that .vjp's pullback gives the same gradient
        theirs_at = _Entries(by_vjp)
        for _, path, _ in leaves:
            ours = _wide(entries.at(path))
            theirs = _wide(theirs_at.at(path))
            if ours.shape != theirs.shape or not np.allclose(ours, theirs, rtol=rtol,
                                                             atol=atol, equal_nan=True):
                raise AssertionError(
                    f"check_grads({name}): .grad and .vjp(...)[1](1.0) disagree at "
                    f"{_format_path(path)}: {ours!r} and {theirs!r}")

    # 3. a random direction over every float of the chosen arguments
    if sampled_out or not scalar:
        comparisons.append(_along_random_direction(objective, leaves, entries, eps, rng,
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


def _chosen(positions) -> str:
    return ", ".join(f"args[{k}]" for k in positions)


def _dtype_of(leaf):
    """The numpy dtype of a numpy float (or complex) scalar leaf (None for Python's)."""
    return np.dtype(type(leaf)) if isinstance(leaf, (np.floating, np.complexfloating)) \
        else None


class _Entries:
    """The gradients' entries at the arguments' leaf paths, each path's prefix read once
    (a leaf 3,000 cells deep in a linked list costs one step, not 3,000)."""

    def __init__(self, gradients: dict):
        self.gradients = gradients
        self.found: dict = {}  # id(path) -> (path, the gradient's value there)

    def at(self, path):
        __tracebackhide__ = True
        pending = []
        p = path
        while p is not None and id(p) not in self.found:
            pending.append(p)
            p = p.parent
        value = self.found[id(p)][1] if p is not None else None
        for p in reversed(pending):
            if p.parent is None:  # the argument itself
                value = self.gradients[p.key]
            else:
                try:
                    value = p.node.child(value, p.key)
                except (KeyError, IndexError, AttributeError, TypeError, InputError) as exc:
                    raise AssertionError(
                        "the gradient does not have the argument's structure at "
                        f"{_format_path(p)}: {exc!r}") from None
            self.found[id(p)] = (p, value)
        return value


def _along_random_direction(objective, leaves, entries, eps, rng, scalar):
    """(label, astad, fd) for one random direction ``v`` over every float leaf: astad's
    ``<J^T w, v>`` (or ``<gradient, v>``) against the central difference of the
    objective along ``v``. It covers the leaves and elements not checked one by one."""
    __tracebackhide__ = True
    directions = {}
    for k, _, leaf in leaves:
        if isinstance(leaf, np.ndarray):
            directions[k] = rng.standard_normal(leaf.shape)
        else:
            directions[k] = float(rng.standard_normal())
        if np.iscomplexobj(leaf):  # (along the real and the imaginary parts at once)
            directions[k] = directions[k] + 1j * rng.standard_normal(np.shape(leaf))
    scale = max([1.0] + [float(np.max(np.abs(leaf))) if isinstance(leaf, np.ndarray)
                         else abs(complex(leaf)) for _, _, leaf in leaves
                         if not isinstance(leaf, np.ndarray) or leaf.size])
    h = eps * scale
    if any(np.dtype(leaf.dtype if isinstance(leaf, np.ndarray) else _dtype_of(leaf) or float)
           not in (np.float64, np.complex128) for _, _, leaf in leaves):
        h = max(h, float(np.finfo(np.float32).eps) ** (1.0 / 3.0) * scale)
    moved = {}  # sign -> k -> the perturbed leaf as stored (float32 rounds it)

    def along(sign):
        def change(k, x):
            __tracebackhide__ = True
            v = directions.get(k)
            if v is None:
                return x
            if isinstance(x, np.ndarray):
                new = (x + sign * h * v).astype(x.dtype)
                moved.setdefault(sign, {})[k] = _wide(new)
                return new
            new = x + sign * h * v
            if type(x) is not float:  # a float subclass (numpy float64, ...)
                new = type(x)(new)
            moved.setdefault(sign, {})[k] = _wide(new)
            return new
        return change

    plus, minus = objective(along(1.0)), objective(along(-1.0))
    fd = (plus - minus) / (2.0 * h)
    ad_value = 0.0
    for k, path, _ in leaves:
        g_leaf = entries.at(path)
        delta = np.asarray(moved[1.0][k]) - np.asarray(moved[-1.0][k])
        ad_value += float(np.real(np.sum(_wide(g_leaf) * delta))) / (2.0 * h)
    label = "<gradient, v> (random direction v)" if scalar else \
        "<J^T w, v> (random direction v)"
    return label, ad_value, fd


def _central(objective, k, path, index, x, h, unit=1.0) -> float:
    """Central difference of ``objective`` along the k-th leaf (an element if
    ``index``); ``unit`` 1j: along its imaginary part."""
    __tracebackhide__ = True
    stored = {}

    def at(sign):
        def change(position, leaf):
            __tracebackhide__ = True
            if position != k:
                return leaf
            if index is None:
                new = x + sign * h * unit
                if type(leaf) is not float:  # a float subclass (numpy float64, ...)
                    new = type(leaf)(new)
                stored[sign] = _along(new, unit)
                return new
            new = leaf.copy()
            new[index] = x + sign * h * unit
            stored[sign] = _along(new[index], unit)
            return new
        return change

    plus = objective(at(1.0))
    minus = objective(at(-1.0))
    if len(stored) != 2:
        raise AssertionError(f"check_grads: could not perturb {_format_path(path)}")
    delta = stored[1.0] - stored[-1.0]  # the step as stored (float32 rounds it)
    if delta == 0.0:
        return math.nan
    return (plus - minus) / delta


def _along(value, unit) -> float:
    """The part of ``value`` a step along ``unit`` changes (its imaginary part for 1j)."""
    return float(np.imag(value)) if unit == 1j else float(np.real(value))


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
