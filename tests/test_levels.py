"""Levels and writes compose in every order: every random numpy program of
tests/numpy_programs.py (writes into arrays and arguments, views made by indexing and by
numpy's functions, copies, aliases, out=, in-place methods, loops) differentiated twice,
under every nesting of two of grad, jvp, jacfwd and jacrev, and by hessian, gives the
same second directional derivative ``t' H t``, which matches central differences of the
gradient; the tangents and cotangents handed to the transforms are left as given.

Budget: ``ASTAD_LEVELS_EXAMPLES`` programs (default 10), derandomized; a long search:
``ASTAD_LEVELS_EXAMPLES=2000 pytest tests/test_levels.py -s`` (prints the count), in
parts on several cores with ``ASTAD_LEVELS_SEED=1``, ``2``... (each part other programs;
progress every 100)."""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, seed, settings

import astad
from numpy_programs import HEADER, load, programs, run_probe

EXAMPLES = int(os.environ.get("ASTAD_LEVELS_EXAMPLES", "10"))
SEED = os.environ.get("ASTAD_LEVELS_SEED")  # a long search in parts: other programs
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


@settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@seed(int(SEED or 0))
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
    on_the_arguments(module, like, t, gradient, g1, tolerance)
    STATS["checked"] += 1
    if SEED is not None and STATS["checked"] % 100 == 0:  # (a long search's progress)
        print(f"levels: {STATS['checked']} programs checked", flush=True)


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _flat(values):
    if not isinstance(values, (tuple, list)):
        values = (values,)
    return np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in values])


def _pieces(v, like):
    """The flat vector ``v`` as plain arguments shaped like ``like`` (a float stays one)."""
    out, k = [], 0
    for a in like:
        size = np.size(a)
        out.append(v[k:k + size].reshape(np.shape(a)).copy() if isinstance(a, np.ndarray)
                   else float(v[k]))
        k += size
    return tuple(out)


def on_the_arguments(module, like, t, gradient, second, tolerance):
    """Every transform, alone and nested in two, called on the program's own arguments
    (which it writes into): the value bit for bit as numpy's, the arguments left as the
    original leaves them, the tangents and cotangents as given, the derivatives as the
    gradient and ``t' H t`` say."""
    f, argnums = module.f, tuple(range(len(like)))
    after_numpy = _copies(like)
    with np.errstate(all="ignore"):
        value = f(*after_numpy)
    tangents = _pieces(t, like)
    given = _copies(tangents)
    grad = astad.grad(f, argnums)
    first_order = {
        "jvp": lambda a: astad.jvp(f, a, tangents),
        "vjp": lambda a: (lambda out, pullback: (out, pullback(1.0)))(*astad.vjp(f, *a)),
        "jacfwd": lambda a: (None, astad.jacfwd(f, argnums)(*a)),
        "jacrev": lambda a: (None, astad.jacrev(f, argnums)(*a)),
    }
    second_order = {
        "jvp(grad)": lambda a: astad.jvp(grad, a, tangents)[1],
        "vjp(grad)": lambda a: astad.vjp(grad, *a)[1](tangents),
        "grad(jvp)": lambda a: astad.grad(lambda *b: astad.jvp(f, b, tangents)[1],
                                          argnums)(*a),
        "jacfwd(grad)": lambda a: sum(  # (H t from the Jacobian's blocks)
            np.tensordot(block, tk, axes=np.ndim(tk)) for block, tk in
            zip(astad.jacfwd(lambda *b: _flat(grad(*b)), argnums)(*a), tangents)),
    }
    for name, run in {**first_order, **second_order}.items():
        arguments = _copies(like)
        with np.errstate(all="ignore"):
            result = run(arguments)
        for k, (got, want) in enumerate(zip(arguments, after_numpy)):
            np.testing.assert_array_equal(got, want, err_msg=f"{name}: argument {k} afterwards")
        for k, (got, want) in enumerate(zip(tangents, given)):
            np.testing.assert_array_equal(got, want, err_msg=f"{name}: tangent {k} changed")
        if name in first_order:
            out, derivative = result
            assert out is None or out == value, f"{name}: value {out!r}, numpy's {value!r}"
            derivative = float(derivative) if name == "jvp" else _flat(derivative) @ t
            expected = gradient @ t
            assert abs(derivative - expected) <= 1e-9 * (1.0 + np.abs(gradient) @ np.abs(t)), (
                f"{name}: {derivative!r}, the gradient along t {expected!r}")
        else:
            got = _flat(result) @ t
            assert abs(got - second) <= tolerance, (
                f"{name}: {got!r}; differences of the gradient {second!r}")


STATS: collections.Counter = collections.Counter()


@pytest.mark.slow
@pytest.mark.search
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


def _makes_and_writes(y):
    a = np.zeros(2)
    a[0] = y * y
    a[1] = np.sin(y)
    b = a.copy()
    b[1] = y ** 3
    return np.sum(a * b)  # y^4 + sin(y) y^3


def _d_makes_and_writes(y):
    return 4 * y ** 3 + np.cos(y) * y ** 3 + 3 * y ** 2 * np.sin(y)


INNER = {
    "grad": lambda f, x: astad.grad(f)(x),
    "jvp": lambda f, x: astad.jvp(f, (x,), (1.0,))[1],
    "jacfwd": lambda f, x: astad.jacfwd(f)(x),
    "jacrev": lambda f, x: astad.jacrev(f)(x),
}


@pytest.mark.parametrize("outer", ["grad", "jvp"])
@pytest.mark.parametrize("inner", list(INNER))
@pytest.mark.parametrize("form", ["lambda", "def"])
def test_a_closure_made_inside_differentiated_again_makes_and_writes_arrays(inner, outer, form):
    """A lambda or nested def made inside a differentiated function, differentiated there
    by an inner transform, runs on the inner level though its code names the enclosing
    tape: the arrays it makes are the inner level's (they were the enclosing one's, and
    every write into them was refused)."""
    def F(x):
        if form == "lambda":
            return INNER[inner](lambda y: _makes_and_writes(y), x) * x

        def closure(y):
            a = np.zeros(2)
            a[0] = y * y
            a[1] = np.sin(y)
            b = a.copy()
            b[1] = y ** 3
            return np.sum(a * b)
        return INNER[inner](closure, x) * x

    x, h = 0.7, 1e-5
    second = (_d_makes_and_writes(x + h) - _d_makes_and_writes(x - h)) / (2 * h)
    expected = _d_makes_and_writes(x) + x * second
    got = astad.grad(F)(x) if outer == "grad" else astad.jvp(F, (x,), (1.0,))[1]
    assert got == pytest.approx(expected, rel=1e-8)
    decorated = astad.reverse_diff(F)
    assert decorated.grad(x) == pytest.approx(expected, rel=1e-8)
