"""Every path astad can take to a derivative, for tests whose promise holds on all of them.

``gradients(f, *args)`` gives ``{path: (value, gradient)}`` for:

- ``grad``: ``reverse_diff(f).value_and_grad`` (the specialised float code where it
  applies, else the tape);
- ``vjp``: ``reverse_diff(f).vjp`` and its pullback at 1.0 (always the tape);
- ``unfused``: ``reverse_diff(f, preaccumulate=False)`` (one entry per operation);
- ``transform``: ``astad.value_and_grad(f, argnums=...)`` (JAX's signature);
- ``forward``: ``astad.jvp`` along each float argument in turn (forward mode), as a
  gradient of floats;
- ``nested``: the gradient taken inside a forward-mode differentiation (its duals are
  nested: every rule's general form, rules/scalar_general.py), as a gradient of floats.

The last two take float arguments only; ``check_every_path`` compares every path with an
expected value and gradient (hand-derived or by finite differences).
"""
from __future__ import annotations

import math

import numpy as np

import astad

_CACHE: dict = {}


def decorated(f, **options):
    key = (f, tuple(sorted(options.items())))
    if key not in _CACHE:
        _CACHE[key] = astad.reverse_diff(f, **options)
    return _CACHE[key]


def gradients(f, *args, argnums=None, forward=True, nested=True):
    n = len(args)
    argnums = tuple(range(n)) if argnums is None else argnums
    single = isinstance(argnums, int)
    options = {} if argnums == tuple(range(n)) else {"argnums": argnums}
    found = {"grad": decorated(f, **options).value_and_grad(*args)}
    value, pullback = decorated(f, **options).vjp(*args)
    found["vjp"] = (value, pullback(1.0))
    found["unfused"] = decorated(f, preaccumulate=False, **options).value_and_grad(*args)
    found["transform"] = astad.value_and_grad(f, argnums=argnums)(*args)
    if n == 1 and argnums == (0,):  # (reverse_diff of a one-parameter function: no tuple)
        found["transform"] = (found["transform"][0], found["transform"][1][0])
    floats = all(type(a) is float for a in args)
    positions = (argnums,) if single else argnums
    if forward and floats:
        partials = []
        for k in positions:
            tangents = tuple(1.0 if j == k else 0.0 for j in range(n))
            out, tangent = astad.jvp(f, args, tangents)
            partials.append(tangent)
        found["forward"] = (out, _shaped(partials, single, n, f))
    if nested and floats:
        inner = astad.grad(f, argnums=argnums)
        got = astad.jvp(inner, args, (0.0,) * n)[0]
        found["nested"] = (found["grad"][0], got if single or n > 1 or options else got[0])
    return found


def _shaped(partials, single, n, f):
    if single:
        return partials[0]
    return partials[0] if n == 1 else tuple(partials)


def close(a, b, rtol=1e-12, atol=1e-12) -> bool:
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(
            close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if isinstance(a, float) or isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(b)
    return a == b


def check_every_path(f, args, value, gradient, argnums=None, rtol=1e-12, atol=1e-12,
                     **options):
    """Assert that every path gives ``value`` and ``gradient``; return the paths."""
    found = gradients(f, *args, argnums=argnums, **options)
    for path, (v, g) in found.items():
        assert close(v, value, rtol, atol), f"{path}: value {v!r}, expected {value!r}"
        assert close(g, gradient, rtol, atol), f"{path}: gradient {g!r}, expected {gradient!r}"
    return found
