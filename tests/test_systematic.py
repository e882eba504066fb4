"""Every array rule, checked the same way (in the spirit of autograd's test_systematic).

For EVERY function in astad's rule table (``astad.rules.catalogue.OWN``: numpy,
numpy.linalg, scipy.special) there is at least one case below, or
``test_every_rule_has_a_case`` fails: a rule added without a case fails the suite. For
each case, on random inputs (seeded; small shapes; axis/keepdims variants; broadcasting):

- value: astad's result equals numpy's, bit for bit;
- vjp: ``<w, J v>`` by central finite differences equals ``<J^T w, v>`` from
  ``astad.reverse_diff(...).vjp`` (the adjoint identity, one random w and v per case), in
  float64 and float32 (float32 gradients keep their dtype);
- jvp: the registered jvp (or, for element-wise functions, partials times tangents)
  equals finite differences, and ``<w, jvp(v)> == <vjp(w), v>``;
- batched: a vjp (jvp) declared batched gives, for cotangents (tangents) with two
  leading axes, what it gives for each direction alone;
- derivatives of derivatives: the vjp and the jvp, run on differentiated values inside
  ``astad.reverse_diff``, have gradients equal to finite differences (so they compute
  only with functions astad differentiates).

The page docs/numpy.md is the catalogue's ``render()``; ``python tests/test_systematic.py``
rewrites it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import astad
from astad.rules import catalogue
from astad.registry import RECORDS
from astad.rules.array_gather import UfuncMethod

from systematic_cases import CASES, PLAIN_CASES, Case, F, L, make_args, scipy_special

pytestmark = pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors")
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "numpy.md"


# -- the function under test, differentiated through astad -----------------------------------
def apply(diff, call, args, kwargs, positions):
    full = list(args)
    for k, value in zip(positions, diff):
        full[k] = value
    return call(*full, **kwargs)


APPLY = astad.reverse_diff(apply, argnums=0)


def run(case: Case, args):
    return case.call(*args, **case.kwargs)


def skip_overridden(case):
    """Another test module may have registered a rule of its own for a function (as a
    user may: astad.custom_vjp(scipy.special.gammaln)): that rule is not astad's."""
    if catalogue.overridden(case.key):
        pytest.skip("a rule registered by other code replaces astad's in this process")


def leaves(value):
    """The float arrays of a result (a tuple, list or one array), as float64 arrays or None
    for a leaf with no derivative (an int, or a piecewise constant result)."""
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in leaves(v)]
    value = np.asarray(value)
    return [value if value.dtype.kind in "fc" else None]


def like(value, rng):
    """A random cotangent with the structure of ``value``."""
    if isinstance(value, (tuple, list)):
        return type(value)(like(v, rng) for v in value) if not hasattr(value, "_fields") \
            else tuple(like(v, rng) for v in value)
    array = np.asarray(value)
    if array.dtype.kind == "c":  # (a complex cotangent, JAX's convention)
        w = rng.standard_normal(array.shape) + 1j * rng.standard_normal(array.shape)
        return complex(w) if array.ndim == 0 else w
    if array.dtype.kind != "f":
        return value
    w = rng.standard_normal(array.shape)
    return float(w) if array.ndim == 0 else w  # (a 0-d result is a scalar: a float)


def inner(a, b) -> float:
    """``Re(sum(a * b))`` over the leaves: how a cotangent pairs with a tangent (for
    complex values JAX's convention: no conjugate)."""
    total = 0.0
    for x, y in zip(leaves(a), leaves(b)):
        if x is not None and y is not None:
            total += float(np.real(np.sum(as64(x) * as64(y))))
    return total


def as64(x):
    """``x`` in double precision: complex128 for a complex value, else float64."""
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def random_like(x, rng):
    """A random tangent shaped like the argument ``x`` (complex for a complex one)."""
    if np.iscomplexobj(x):
        return rng.standard_normal(np.shape(x)) + 1j * rng.standard_normal(np.shape(x))
    return rng.standard_normal(np.shape(x))


def directions(case, args, rng):
    """A random tangent for each differentiated argument."""
    return [[random_like(x, rng) for x in args[k]] if isinstance(args[k], list)
            else random_like(args[k], rng) for k in case.positions]


def moved(case, args, tangents, step):
    new = list(args)
    for k, t in zip(case.positions, tangents):
        if isinstance(args[k], list):
            new[k] = [x + step * d for x, d in zip(args[k], t)]
        else:
            new[k] = args[k] + step * t
    return new


def finite_difference(case, args, tangents):
    plus = run(case, moved(case, args, tangents, case.h))
    minus = run(case, moved(case, args, tangents, -case.h))
    return [None if p is None else (as64(p) - m) / (2 * case.h)
            for p, m in zip(leaves(plus), leaves(minus))]


def close(a, b, rtol, what, case):
    scale = max(1.0, abs(a), abs(b))
    assert abs(a - b) <= rtol * scale, f"{case.id}: {what}: {a!r} != {b!r}"


def case_params(select=None, quick_every=1):
    """The cases ``select`` takes; with ``quick_every=n`` every n-th of them runs in the
    quick subset (``-m "not slow"``), the others are marked slow."""
    chosen = [c for c in CASES if select is None or select(c)]
    return [pytest.param(c, id=c.id, marks=() if k % quick_every == 0 else pytest.mark.slow)
            for k, c in enumerate(chosen)]


# -- the registry is covered -----------------------------------------------------------------
def own_rules():
    rules = {fn for fn, kind in catalogue.OWN.items() if kind != "no derivative"}
    if scipy_special is not None:
        rules |= set(scipy_special.ELEMENTWISE) | set(scipy_special.PYTHON_FUNCTIONS)
    return rules


def test_every_rule_has_a_case():
    covered = {c.key for c in CASES}
    missing = [catalogue.names_of(fn)[0] for fn in own_rules() if fn not in covered]
    assert not missing, f"rules without a case in tests/systematic_cases.py: {sorted(missing)}"
    plain = {fn for fn, kind in catalogue.OWN.items() if kind == "no derivative"}
    missing = [catalogue.names_of(fn)[0] for fn in plain if fn not in PLAIN_CASES]
    assert not missing, f"functions with no derivative and no case: {sorted(missing)}"


def test_every_rule_has_a_jvp():
    missing = [catalogue.names_of(fn)[0] for fn in own_rules()
               if RECORDS[fn].jvps is None and RECORDS[fn].partials is None]
    assert not missing, f"rules without a forward-mode rule: {sorted(missing)}"


@pytest.mark.parametrize("fn", sorted(PLAIN_CASES, key=lambda f: catalogue.names_of(f)[0]),
                         ids=lambda f: catalogue.names_of(f)[0])
def test_functions_with_no_derivative_see_primal_values(fn):
    args = make_args(PLAIN_CASES[fn], np.random.default_rng(0), np.float64)
    try:
        expected = fn(*args)
    except TypeError as error:  # (integer-only functions of floats: astad raises as numpy)
        with pytest.raises(type(error)):
            APPLY.vjp((args[0],), fn, args, {}, (0,))
        return
    got, pullback = APPLY.vjp((args[0],), fn, args, {}, (0,))
    for e, g in zip(leaves(expected), leaves(got)):
        if fn is np.empty_like:  # (its values are whatever the memory held)
            assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype
            continue
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
    if any(leaf is not None for leaf in leaves(expected)):
        grad, = pullback(like(got, np.random.default_rng(1)))
        assert not np.any(grad), f"{fn.__name__}: a gradient through a primal-only function"


# -- value and vjp -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", case_params())
def test_value_and_vjp(case):
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    expected = run(case, args)
    diff = tuple(args[k] for k in case.positions)
    value, pullback = APPLY.vjp(diff, case.call, args, case.kwargs, case.positions)
    for e, v in zip(leaves(expected), leaves(value)):
        if e is not None:
            np.testing.assert_array_equal(np.asarray(v), e, err_msg=f"{case.id}: value")
    w = like(value, rng)
    grads = pullback(w)
    tangents = directions(case, args, rng)
    fd = finite_difference(case, args, tangents)
    close(inner(w, fd), sum(inner(g, t) for g, t in zip(grads, tangents)), case.rtol,
          "<w, J v> (finite differences) vs <vjp(w), v>", case)


def _as32(case, args):
    """The float arguments in float32 (constants as they are)."""
    def cast(x):
        if isinstance(x, np.ndarray):
            return x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)
        return x
    return [a if k not in case.positions else [cast(x) for x in a] if isinstance(a, list)
            else cast(a) for k, a in enumerate(args)]


@pytest.mark.parametrize("case", case_params(lambda c: c.f32))
def test_float32(case):
    skip_overridden(case)
    args64 = make_args(case.args, np.random.default_rng(case.seed), np.float64)
    args = _as32(case, args64)
    expected = run(case, args)
    diff = tuple(args[k] for k in case.positions)
    value, pullback = APPLY.vjp(diff, case.call, args, case.kwargs, case.positions)
    for e, v in zip(leaves(expected), leaves(value)):
        if e is not None:
            np.testing.assert_array_equal(np.asarray(v), e, err_msg=f"{case.id}: value")
    w = like(value, np.random.default_rng(2))
    g32 = pullback(w)
    for g, k in zip(g32, case.positions):
        for gi, xi in zip(g if isinstance(g, list) else [g],
                          args[k] if isinstance(args[k], list) else [args[k]]):
            if isinstance(xi, np.ndarray):
                assert gi.dtype == xi.dtype, f"{case.id}: a float32 argument's gradient"
    # against the float64 gradient at (nearly) the same point
    diff64 = tuple(args64[k] for k in case.positions)
    _, pullback64 = APPLY.vjp(diff64, case.call, args64, case.kwargs, case.positions)
    g64 = pullback64(w)
    tangents = directions(case, args64, np.random.default_rng(3))
    close(sum(inner(g, t) for g, t in zip(g32, tangents)),
          sum(inner(g, t) for g, t in zip(g64, tangents)), 2e-3, "float32 vs float64", case)


# -- jvp -----------------------------------------------------------------------------------------
def jvp_of(case, args, tangents):
    """The result's tangent from the registered jvps (or partials), summed over arguments."""
    result = run(case, args)
    key = case.key
    if RECORDS[key].partials is not None:
        total = 0.0
        for k, t in zip(case.positions, tangents):
            total = total + RECORDS[key].partials[k](*args, result) * t
        return total
    total = None
    for k, t in zip(case.positions, tangents):
        jvp = RECORDS[key].jvps[k]
        part = jvp(t, result, *args, **case.kwargs)
        total = part if total is None else _add(total, part)
    return total


def _add(a, b):
    if isinstance(a, (tuple, list)):
        return type(a)(_add(x, y) for x, y in zip(a, b))
    if a is None:
        return b
    if b is None:
        return a
    return a + b


@pytest.mark.parametrize("case", case_params(lambda c: c.jvp))
def test_jvp(case):
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    tangents = directions(case, args, rng)
    jvp = jvp_of(case, args, tangents)
    fd = finite_difference(case, args, tangents)
    for j, f in zip(leaves(jvp) if isinstance(jvp, (tuple, list)) else [jvp], fd):
        if f is not None and j is not None:
            np.testing.assert_allclose(np.broadcast_to(j, np.shape(f)), f, rtol=case.rtol,
                                       atol=case.rtol, err_msg=f"{case.id}: jvp vs finite "
                                       "differences")
    diff = tuple(args[k] for k in case.positions)
    value, pullback = APPLY.vjp(diff, case.call, args, case.kwargs, case.positions)
    w = like(value, rng)
    single = any(x is not None and x.dtype in (np.float32, np.complex64)
                 for x in leaves(value))
    close(inner(w, jvp), sum(inner(g, t) for g, t in zip(pullback(w), tangents)),
          1e-5 if single else 1e-8, "<w, jvp(v)> vs <vjp(w), v>", case)


# -- batched vjps and jvps -----------------------------------------------------------------------
def _stacked(make, count=6, lead=(2, 3)):
    """``count`` values made by ``make(n)``, and their stack with leading axes ``lead``."""
    items = [make(n) for n in range(count)]
    return _stack_values(items, lead), items


def _stack_values(items, lead):
    first = items[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stack_values([item[j] for item in items], lead)
                           for j in range(len(first)))
    if first is None or np.asarray(first).dtype.kind not in "fc":
        return first
    return np.stack([np.asarray(x) for x in items]).reshape(lead + np.shape(first))


def _unstacked(value, n):
    if isinstance(value, (tuple, list)):
        return type(value)(_unstacked(v, n) for v in value)
    if value is None or np.asarray(value).dtype.kind not in "fc":
        return value
    return np.reshape(value, (-1,) + np.shape(value)[2:])[n]


def _same(a, b, case, what):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            _same(x, y, case, what)
        return
    if a is None or b is None:
        assert a is None and b is None or not np.any(a if b is None else b)
        return
    np.testing.assert_allclose(np.broadcast_to(a, np.shape(b)), b, rtol=1e-10, atol=1e-12,
                               err_msg=f"{case.id}: {what}")


@pytest.mark.parametrize("case", case_params(lambda c: RECORDS[c.key].batched_vjps and
                                             RECORDS[c.key].vjps is not None))
def test_batched_vjp(case):
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    result = run(case, args)
    g, singles = _stacked(lambda n: like(result, np.random.default_rng(n)))
    for k in case.positions:
        vjp = RECORDS[case.key].vjps[k]
        batched = vjp(g, result, *args, **case.kwargs)
        for n, single in enumerate(singles):
            _same(_unstacked(batched, n), vjp(single, result, *args, **case.kwargs), case,
                  f"batched vjp of argument {k}, direction {n}")


@pytest.mark.parametrize("case", case_params(lambda c: RECORDS[c.key].batched_jvps))
def test_batched_jvp(case):
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    result = run(case, args)
    for k in case.positions:
        jvp = RECORDS[case.key].jvps[k]
        t, singles = _stacked(lambda n, k=k: directions(case, args, np.random.default_rng(
            n))[case.positions.index(k)])
        batched = jvp(t, result, *args, **case.kwargs)
        for n, single in enumerate(singles):
            _same(_unstacked(batched, n), jvp(single, result, *args, **case.kwargs), case,
                  f"batched jvp of argument {k}, direction {n}")


# -- derivatives of derivatives ------------------------------------------------------------------
def _derivative_of(case, kind, k):
    key = case.key
    if kind == "vjp":
        return RECORDS[key].vjps[k]
    if RECORDS[key].partials is not None:
        return lambda t, r, *args, **kw: RECORDS[key].partials[k](*args, r) * t
    return RECORDS[key].jvps[k]


def run_derivative(derivative, seed, call, kwargs, positions, args, diff):
    """sum(w * derivative(seed, call(args), *args)), for astad to differentiate."""
    full = list(args)
    for k, value in zip(positions, diff):
        full[k] = value
    result = call(*full, **kwargs)
    out = derivative(seed, result, *full, **kwargs)
    return out


SECOND = astad.reverse_diff(run_derivative, argnums=(1, 6))


@pytest.mark.parametrize("case, kind", [
    pytest.param(c, kind, id=f"{c.id}-{kind}") for c in CASES if c.second
    for kind in ("vjp", "jvp")
    if kind == "jvp" or RECORDS[c.key].vjps is not None])  # (partials: by the jvp)
def test_derivatives_of_derivatives(case, kind):
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    result = run(case, args)
    for k in case.positions:
        derivative = _derivative_of(case, kind, k)
        seed = like(result, rng) if kind == "vjp" else directions(case, args, rng)[
            case.positions.index(k)]
        diff = tuple(args[j] for j in case.positions)
        value, pullback = SECOND.vjp(derivative, seed, case.call, case.kwargs,
                                     case.positions, args, diff)
        w = like(value, rng)
        g_seed, g_diff = pullback(w)
        t_seed = like(seed, rng)
        t_diff = directions(case, args, rng)

        def at(step, derivative=derivative, seed=seed, t_seed=t_seed, t_diff=t_diff):
            moved_args = moved(case, args, t_diff, step)
            s = _add_scaled(seed, t_seed, step)
            return derivative(s, run(case, moved_args), *moved_args, **case.kwargs)
        fd = [None if p is None else (as64(p) - m) / (2 * case.h)
              for p, m in zip(leaves(at(case.h)), leaves(at(-case.h)))]
        expected = inner(w, fd)
        got = inner(g_seed, t_seed) + sum(inner(g, t) for g, t in zip(g_diff, t_diff))
        close(expected, got, max(case.rtol, 1e-4), f"second order ({kind} of argument {k})",
              case)


def _add_scaled(seed, direction, step):
    if isinstance(seed, (tuple, list)):
        return type(seed)(_add_scaled(s, d, step) for s, d in zip(seed, direction))
    if seed is None or not isinstance(direction, (float, complex, np.ndarray)):
        return seed
    return seed + step * direction


# -- the page ---------------------------------------------------------------------------------
def test_the_numpy_page_is_the_rendered_catalogue():
    assert PAGE.read_text() == catalogue.render(), (
        "docs/numpy.md differs from astad.rules.catalogue.render(): rewrite it with "
        "`python tests/test_systematic.py`")


_ = (F, L, UfuncMethod)

if __name__ == "__main__":
    PAGE.write_text(catalogue.render())
    print(f"wrote {PAGE}")


# -- forward mode and Hessians through astad's transforms (every rule, as programs call it) ----
@pytest.mark.parametrize("case", case_params(lambda c: c.jvp, quick_every=4))
def test_forward_mode(case):
    """astad.jvp of the function: numpy's dispatch at a forward level, the rule's jvp."""
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    diff = tuple(args[k] for k in case.positions)
    tangents = directions(case, args, rng)
    value, tangent = astad.jvp(lambda d: apply(d, case.call, args, case.kwargs,
                                               case.positions), (diff,), (tuple(tangents),))
    fd = finite_difference(case, args, tangents)
    for t, f in zip(leaves(tangent), fd):
        if f is not None and t is not None:
            np.testing.assert_allclose(np.broadcast_to(t, np.shape(f)), f, rtol=case.rtol,
                                       atol=case.rtol, err_msg=f"{case.id}: forward mode")


def _weighted(diff, call, args, kwargs, positions, weights):
    out = apply(diff, call, args, kwargs, positions)
    total = 0.0
    for piece, w in zip(out if isinstance(out, (tuple, list)) else [out], weights):
        if w is not None:
            total = total + (np.real(np.sum(piece * w)) if np.iscomplexobj(w) else
                             np.sum(piece * w))
    return total


@pytest.mark.parametrize("case", case_params(lambda c: c.second and c.jvp, quick_every=4))
def test_hessian_vector_product(case):
    """Forward mode over reverse mode (a Hessian's column): the rule's vjp run on forward
    duals, against finite differences of the gradient."""
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    diff = tuple(args[k] for k in case.positions)
    result = run(case, args)
    weights = [None if x is None else random_like(x, rng) for x in leaves(result)]
    grad = astad.grad(_weighted, argnums=0)
    tangents = tuple(directions(case, args, rng))
    _, hvp = astad.jvp(lambda d: grad(d, case.call, args, case.kwargs, case.positions,
                                      weights), (diff,), (tangents,))

    def at(step):
        moved_args = moved(case, args, tangents, step)
        return grad(tuple(moved_args[k] for k in case.positions), case.call, moved_args,
                    case.kwargs, case.positions, weights)
    fd = [None if p is None else (as64(p) - m) / (2 * case.h)
          for p, m in zip(leaves(at(case.h)), leaves(at(-case.h)))]
    probe = like(hvp, rng)
    close(inner(probe, fd), inner(probe, hvp), max(case.rtol, 1e-4),
          "Hessian-vector product vs finite differences of the gradient", case)


@pytest.mark.parametrize("case", case_params(lambda c: c.jvp, quick_every=4))
def test_jacrev_takes_every_row_at_once(case, monkeypatch):
    """``jacrev``'s one sweep with a vector of adjoints runs each array entry on all the
    rows at once where its backward step can (runtime/tape.BATCHED_BACKWARDS: element-wise
    functions, batched vjps, indexing, views): the same Jacobian as one row at a time."""
    skip_overridden(case)
    rng = np.random.default_rng(case.seed)
    args = make_args(case.args, rng, np.float64)
    diff = tuple(args[k] for k in case.positions)
    if not any(np.size(x) > 1 for x in leaves(run(case, args))):
        pytest.skip("one output scalar: no vector of adjoints")
    holomorphic = any(np.iscomplexobj(x) for x in leaves(run(case, args)))

    def jacobian():
        return astad.jacrev(lambda d: apply(d, case.call, args, case.kwargs,
                                            case.positions), holomorphic=holomorphic)(diff)
    from astad.runtime import tape
    at_once = jacobian()
    monkeypatch.setattr(tape, "BATCHED_BACKWARDS", {})
    _same(at_once, jacobian(), case, "jacrev, all rows at once vs one row at a time")
