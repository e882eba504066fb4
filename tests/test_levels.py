"""Levels and writes compose in every order: every random numpy program of
tests/numpy_programs.py (writes into arrays and arguments, views made by indexing and by
numpy's functions, copies, aliases, out=, in-place methods, loops) differentiated twice,
under every nesting of two of grad, jvp, jacfwd and jacrev, and by hessian, gives the
same second directional derivative ``t' H t``, which matches central differences of the
gradient; the tangents and cotangents handed to the transforms are left as given.

Budget: ``ASTAD_LEVELS_EXAMPLES`` programs (default 10), derandomized; a long search:
``ASTAD_LEVELS_EXAMPLES=2000 pytest tests/test_levels.py -s`` (prints the count)."""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings

import astad
from numpy_programs import HEADER, load, programs, run_probe

EXAMPLES = int(os.environ.get("ASTAD_LEVELS_EXAMPLES", "10"))
STEP = 1e-5


def split(v, like):
    """The program's arguments as pieces of one flat vector (in differentiated code)."""
    out, k = [], 0
    for a in like:
        if isinstance(a, np.ndarray):
            out.append(v[k:k + a.size].reshape(a.shape) * 1.0)
            k += a.size
        else:
            out.append(v[k] * 1.0)
            k += 1
    return out


def nestings(f, x, t):
    """``t' H t`` by every nesting of two transforms (each a callable of no argument)."""
    def inner_jvp(v):
        return astad.jvp(f, (v,), (t,))[1]
    return {
        "jvp(jvp)": lambda: astad.jvp(inner_jvp, (x.copy(),), (t,))[1],
        "grad(jvp)": lambda: astad.grad(inner_jvp)(x.copy()) @ t,
        "jvp(grad)": lambda: astad.jvp(astad.grad(f), (x.copy(),), (t,))[1] @ t,
        "grad(grad)": lambda: astad.grad(lambda v: astad.grad(f)(v) @ t)(x.copy()) @ t,
        "jacfwd(jacfwd)": lambda: t @ astad.jacfwd(astad.jacfwd(f))(x.copy()) @ t,
        "jacrev(jacfwd)": lambda: t @ astad.jacrev(astad.jacfwd(f))(x.copy()) @ t,
        "jacfwd(jacrev)": lambda: t @ astad.jacfwd(astad.jacrev(f))(x.copy()) @ t,
        "jacrev(jacrev)": lambda: t @ astad.jacrev(astad.jacrev(f))(x.copy()) @ t,
        "hessian": lambda: t @ astad.hessian(f)(x.copy()) @ t,
    }


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(program=programs())
def every_nesting_of_two_levels(program):
    note(HEADER + program.rendered())
    module, probe_module = load(program.rendered()), load(program.rendered(probe=True))
    like = tuple(v for _, v in program.spec)
    x = np.concatenate([np.ravel(a) for a in like]).astype(np.float64)

    def f(v):
        return module.f(*split(v, like))

    def probed(v):
        point = tuple(np.array(a) if isinstance(a, np.ndarray) else float(a)
                      for a in split(v, like))
        value, probe = run_probe(probe_module, point)
        return value, probe.masks, probe.margin

    with np.errstate(all="ignore"):
        value, masks, margin = probed(x)
    assume(np.isfinite(value) and abs(value) < 1e4 and margin > 1e-3)
    t = np.random.default_rng(len(program.source)).uniform(-1.0, 1.0, x.size)
    try:
        g = astad.grad(f)
        gradient = g(x.copy())
    except astad.NotDifferentiableError as error:
        assume("overlaps the region written" not in str(error))
        raise
    assume(np.all(np.isfinite(gradient)) and np.max(np.abs(gradient)) < 1e4)
    with np.errstate(all="ignore"):
        shifted = [probed(x + h * t) for h in (STEP, -STEP, 2 * STEP, -2 * STEP)]
    assume(all(m == masks for _, m, _ in shifted))
    g1 = (g(x + STEP * t) - g(x - STEP * t)) @ t / (2 * STEP)
    g2 = (g(x + 2 * STEP * t) - g(x - 2 * STEP * t)) @ t / (4 * STEP)
    tolerance = 1e-5 * (1.0 + abs(g1)) + 4.0 * abs(g1 - g2)
    kept = t.copy()
    found = {}
    for name, run in nestings(f, x, t).items():
        with np.errstate(all="ignore"):
            found[name] = float(run())
        np.testing.assert_array_equal(t, kept, err_msg=f"{name} changed the tangent")
    for name, second in found.items():
        assert abs(second - g1) <= tolerance, (
            f"{name}: {second!r}; differences of the gradient {g1!r}; all: {found}")
    STATS["checked"] += 1


STATS: collections.Counter = collections.Counter()


@pytest.mark.slow
def test_every_nesting_of_two_levels_agrees_with_differences():
    STATS.clear()
    every_nesting_of_two_levels()
    print(f"\nlevels: {STATS['checked']} programs checked under {len(nestings(None, 0, 0))} "
          "nestings")
    assert STATS["checked"] >= EXAMPLES // 2


@pytest.mark.parametrize("nesting", list(nestings(None, 0, 0)))
def test_a_copy_before_a_write_has_its_own_derivative_at_every_level(nesting):
    def f(x):
        a = x * x
        b = a.copy()
        b[1] = b[0] * x[1]
        a *= b
        return np.sum(np.sin(a) + b)

    x, t = np.array([0.3, 0.7]), np.array([1.0, 0.5])
    g = astad.grad(f)
    expected = (g(x + 1e-6 * t) - g(x - 1e-6 * t)) @ t / 2e-6
    assert nestings(f, x, t)[nesting]() == pytest.approx(expected, rel=1e-6)
