"""Shared test oracles: central finite differences and structural gradient comparison.

Both helpers understand the argument structures astad's gradients mirror:

* a ``float`` leaf (not ``bool``) is differentiated and holds a cotangent;
* a ``list``, ``tuple`` (named tuples included) or ``dict`` is walked element-wise and the
  result keeps the container type;
* every other leaf (``int``, ``bool``, ``str``, ``None``, ...) is not differentiated and
  appears in the gradient as the argument's own value.

Usage::

    from oracles import central_fd, assert_grad_close

    expected = central_fd(f, (x, [a, b], n), argnums=(0, 1))
    assert_grad_close(f_ad.grad(x, [a, b], n), expected, rtol=1e-6, atol=1e-8)

``central_fd`` calls ``f`` as an ordinary Python function; pass either the plain
function or the astad-decorated one (calling a decorated function runs the original).
"""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

__all__ = [
    "is_float_leaf",
    "float_paths",
    "get_path",
    "replace_at",
    "central_fd",
    "array_differences",
    "assert_grad_close",
    "grad_close",
    "random_direction",
    "pairing",
]


def is_float_leaf(value) -> bool:
    """True for a differentiable leaf: a float (or float subclass), never a bool."""
    return isinstance(value, float) and not isinstance(value, bool)


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


class Attr:
    """A path step into a dataclass field (other steps are indices and keys)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f".{self.name}"


def _is_record(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _record_items(value):
    return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]


def _record_like(original, items):
    """A copy of dataclass ``original`` with these field values, no user code run."""
    obj = copy.copy(original)
    for name, item in items:
        object.__setattr__(obj, name, item)
    return obj


def _rebuild_like(original, items):
    """A container of ``original``'s type holding ``items`` (a list, or dict for dicts)."""
    if isinstance(original, list):
        return type(original)(items) if type(original) is not list else list(items)
    if _is_namedtuple(original):
        return type(original)._make(items)
    if isinstance(original, tuple):
        return tuple(items) if type(original) is tuple else type(original)(items)
    if isinstance(original, dict):
        return type(original)(items)
    raise TypeError(f"not a container: {type(original).__name__}")


def float_paths(value, prefix=()):
    """Yield the path (a tuple of indices/keys) of every float leaf in ``value``."""
    if is_float_leaf(value):
        yield prefix
    elif isinstance(value, (list, tuple)):
        for k, item in enumerate(value):
            yield from float_paths(item, prefix + (k,))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from float_paths(item, prefix + (key,))
    elif _is_record(value):
        for name, item in _record_items(value):
            yield from float_paths(item, prefix + (Attr(name),))


def get_path(value, path):
    for key in path:
        value = getattr(value, key.name) if isinstance(key, Attr) else value[key]
    return value


def replace_at(value, path, new):
    """A copy of ``value`` (container types kept) with the leaf at ``path`` set to ``new``.

    Containers along the path are copied; everything else is shared.
    """
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(key, Attr):
        return _record_like(value, [(key.name, replace_at(getattr(value, key.name), rest, new))])
    if isinstance(value, dict):
        items = dict(value)
        items[key] = replace_at(value[key], rest, new)
        return _rebuild_like(value, items)
    items = list(value)
    items[key] = replace_at(items[key], rest, new)
    return _rebuild_like(value, items)


def _map_leaves(value, fn, prefix=()):
    """``value`` with every float leaf replaced by ``fn(path)``; other leaves kept."""
    if is_float_leaf(value):
        return fn(prefix)
    if isinstance(value, (list, tuple)):
        return _rebuild_like(value, [_map_leaves(v, fn, prefix + (k,))
                                     for k, v in enumerate(value)])
    if isinstance(value, dict):
        return _rebuild_like(value, {k: _map_leaves(v, fn, prefix + (k,))
                                     for k, v in value.items()})
    if _is_record(value):
        return _record_like(value, [(name, _map_leaves(v, fn, prefix + (Attr(name),)))
                                    for name, v in _record_items(value)])
    return value


def _has_float(value) -> bool:
    found = []
    _map_leaves(value, found.append)
    return bool(found)


def central_fd(f, args, argnums=None, eps=1e-6, kwargs=None):
    """Central finite-difference gradient of the scalar function ``f`` at ``args``.

    ``argnums``: an int gives the gradient of that one argument; a tuple (or list) gives
    a tuple with one gradient per listed argument; ``None`` means every positional
    argument in ``args`` (the gradient alone when there is just one, else a tuple),
    which matches astad's default for a function called with all its parameters.

    Each float leaf ``v`` is perturbed by ``h = eps * max(1, |v|)`` (rounded so that
    ``v + h`` and ``v - h`` differ from ``v`` by exactly representable steps), and its
    partial derivative is ``(f(.., v + h, ..) - f(.., v - h, ..)) / (2 h)``; the error is
    about ``h**2 |f'''| / 6 + ulp(f) / h``. Non-float leaves are returned unchanged.
    ``kwargs`` are passed through to every call and never differentiated.
    """
    args = tuple(args)
    kwargs = dict(kwargs or {})
    if argnums is None:
        single = len(args) == 1
        nums = tuple(range(len(args)))
    elif isinstance(argnums, int) and not isinstance(argnums, bool):
        single = True
        nums = (argnums,)
    else:
        single = False
        nums = tuple(argnums)
    for n in nums:
        if not -len(args) <= n < len(args):
            raise IndexError(f"argnums entry {n} out of range for {len(args)} arguments")

    def call(new_args):
        result = f(*new_args, **kwargs)
        if not isinstance(result, (int, float)) or isinstance(result, bool):
            raise TypeError(f"central_fd needs a real scalar result, got {result!r}")
        return float(result)

    grads = []
    for n in nums:
        arg = args[n]

        def partial(path, n=n, arg=arg):
            v = get_path(arg, path)
            h = eps * max(1.0, abs(v))
            vp, vm = v + h, v - h
            h2 = vp - vm          # the exactly representable total step
            plus = list(args)
            plus[n] = replace_at(arg, path, type(v)(vp) if type(v) is not float else vp)
            minus = list(args)
            minus[n] = replace_at(arg, path, type(v)(vm) if type(v) is not float else vm)
            return (call(plus) - call(minus)) / h2

        # (an argument that is not a float and holds none, an int, a string: None, as
        # astad gives; a non-float leaf inside a structure: itself)
        grads.append(_map_leaves(arg, partial) if is_float_leaf(arg) or _has_float(arg)
                     else None)
    return grads[0] if single else tuple(grads)


def _kind(value) -> str:
    if is_float_leaf(value):
        return "float"
    return type(value).__name__


def _fmt_path(path) -> str:
    return "".join(repr(k) if isinstance(k, Attr) else f"[{k!r}]" for k in path) or "<root>"


def _compare(actual, expected, rtol, atol, path, problems):
    if is_float_leaf(expected):
        if not is_float_leaf(actual):
            problems.append(f"{_fmt_path(path)}: expected a float, got "
                            f"{type(actual).__name__} {actual!r}")
            return
        if math.isnan(expected):
            if not math.isnan(actual):
                problems.append(f"{_fmt_path(path)}: expected nan, got {actual!r}")
            return
        if math.isinf(expected) or math.isinf(actual):
            if actual != expected:
                problems.append(f"{_fmt_path(path)}: expected {expected!r}, got {actual!r}")
            return
        if math.isnan(actual) or abs(actual - expected) > atol + rtol * abs(expected):
            problems.append(
                f"{_fmt_path(path)}: expected {expected!r}, got {actual!r} "
                f"(|diff| = {abs(actual - expected):.3g}, allowed "
                f"{atol + rtol * abs(expected):.3g})")
        return
    if isinstance(expected, (list, tuple, dict)):
        if type(actual) is not type(expected):
            problems.append(f"{_fmt_path(path)}: expected container {type(expected).__name__}, "
                            f"got {type(actual).__name__} {actual!r}")
            return
        if isinstance(expected, dict):
            if set(actual) != set(expected):
                problems.append(f"{_fmt_path(path)}: dict keys differ: expected "
                                f"{sorted(map(repr, expected))}, got {sorted(map(repr, actual))}")
                return
            for key in expected:
                _compare(actual[key], expected[key], rtol, atol, path + (key,), problems)
            return
        if len(actual) != len(expected):
            problems.append(f"{_fmt_path(path)}: expected length {len(expected)}, "
                            f"got {len(actual)}: {actual!r}")
            return
        for k, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, path + (k,), problems)
        return
    if _is_record(expected):
        if type(actual) is not type(expected):
            problems.append(f"{_fmt_path(path)}: expected a {type(expected).__name__}, "
                            f"got {type(actual).__name__} {actual!r}")
            return
        for name, e in _record_items(expected):
            _compare(getattr(actual, name), e, rtol, atol, path + (Attr(name),), problems)
        return
    # A non-differentiated leaf: the argument's own value, same type (None for an argument
    # that holds no float at all: central_fd).
    if type(actual) is not type(expected) or actual != expected:
        problems.append(f"{_fmt_path(path)}: expected the non-float leaf "
                        f"{_kind(expected)} {expected!r}, got {_kind(actual)} {actual!r}")


def grad_close(actual, expected, rtol=1e-6, atol=1e-8):
    """(ok, problems): whether ``actual`` matches ``expected`` (see assert_grad_close)."""
    problems: list[str] = []
    _compare(actual, expected, rtol, atol, (), problems)
    return not problems, problems


def assert_grad_close(actual, expected, rtol=1e-6, atol=1e-8):
    """Assert two gradients have the same structure and close float leaves.

    Containers must be of the same type (a list is not a tuple) and length (dicts: the
    same keys); float leaves must satisfy ``|a - e| <= atol + rtol * |e|`` (nan matches
    nan, infinities must be equal); every other leaf must be equal and of the same type.
    The message lists every mismatching leaf by path.
    """
    ok, problems = grad_close(actual, expected, rtol, atol)
    if not ok:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AssertionError(
            f"gradients differ (rtol={rtol}, atol={atol}):\n  {shown}{more}\n"
            f"actual:   {actual!r}\nexpected: {expected!r}")


def random_direction(value, rng):
    """A tangent for ``value``: a random float in [-1, 1] at each float leaf, the other
    leaves as they are (a tangent mirrors its primal's structure)."""
    return _map_leaves(value, lambda path: rng.uniform(-1.0, 1.0))


def pairing(gradient, tangent) -> float:
    """The sum over float leaves of gradient * tangent: the directional derivative a
    gradient gives along ``tangent`` (``tangent`` mirrors the argument)."""
    return math.fsum(get_path(gradient, path) * get_path(tangent, path)
                     for path in float_paths(tangent))


def array_differences(f, args, position, h=1e-6):
    """Central differences of the scalar ``f`` in its array argument ``position``, element
    by element with step ``h`` (``central_fd`` walks Python structures, not arrays). A
    complex value (scipy < 1.16's sqrtm of a real matrix) is taken as real."""
    x = np.array(args[position], dtype=float)
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = h
        up = f(*args[:position], x + step, *args[position + 1:])
        down = f(*args[:position], x - step, *args[position + 1:])
        out[index] = np.real(up - down) / (2 * h)
    return out
