"""``astad.jvp`` on floats: with the compiled runtime a ``CompiledJvp``
(astad/runtime/_jvp.c) runs forward mode's code for floats of a Python function, and the
Hessian-vector code of an ``astad.grad``, with the checks of transforms.jvp compiled
around them. The Python function is the reference: the same answers, bit for bit; and
where the compiled case does not apply (other arguments, keywords, an enclosing
differentiation, a replaced ``__code__``, a rebound global, an error, a tangent that is
not finite), the reference's answer or error. Under ASTAD_RUNTIME=python ``astad.jvp`` is
the Python function (CI runs both)."""
import inspect
import math
import pickle
import traceback

import numpy as np
import pytest

import astad
from astad.api import transforms
from astad.api.hvp import HvpKnown
from astad.compile import entry
from astad.transform import bindings
from astad.runtime import duals
from astad.runtime import tape as runtime

from test_specialised import CASES

NATIVE = runtime.RUNTIME == "native"
REFERENCE = getattr(astad.jvp, "__wrapped__", astad.jvp)  # transforms.jvp's Python path


def mult(x, y):
    return x * y


def rotate_x(q0, q1, q2, q3, v0, v1, v2):
    udotv = q0 * v0 + q1 * v1 + q2 * v2
    udotu = q0 * q0 + q1 * q1 + q2 * q2
    return 2.0 * udotv * q0 + (q3 * q3 - udotu) * v0 + 2.0 * q3 * (q1 * v2 - q2 * v1)


def loops(x, y):
    total = 0.0
    for k in range(5):
        total = total + math.sin(x * k) * y
        if total > 3.0:
            break
    return total


def root(x):
    return math.sqrt(x)


def divides(x, y):
    return x / y


OFFSET = 1.5


def uses_global(x):
    return x * OFFSET


FLOATS = [(mult, (1.5, -2.25)), (rotate_x, (1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7)),
          (loops, (0.7, 1.3)), (root, (2.0,)), (uses_global, (0.5,))]
FLOATS += [(fn, args) for fn, args in CASES if all(type(a) is float for a in args)]


def _tangents(n):
    return tuple(0.25 + 0.5 * k for k in range(n))


def _bits(value):
    return value if type(value) is not float else (math.copysign(1.0, value), value.hex())


@pytest.mark.parametrize("fn, args", FLOATS, ids=[f[0].__name__ for f in FLOATS])
def test_answers_as_the_python_function_bit_for_bit(fn, args):
    tangents = _tangents(len(args))
    got, want = astad.jvp(fn, args, tangents), REFERENCE(fn, args, tangents)
    assert type(got) is tuple and len(got) == 2
    assert [_bits(v) for v in got] == [_bits(v) for v in want]
    for k in range(len(args)):  # against the gradient: jvp along each axis
        basis = tuple(1.0 if j == k else 0.0 for j in range(len(args)))
        gradient = astad.grad(fn, argnums=k)(*args)
        assert astad.jvp(fn, args, basis)[1] == pytest.approx(gradient, rel=1e-13, abs=1e-15)


def test_every_other_call_gets_the_python_function_answer():
    args = (1.5, 2.0)
    assert astad.jvp(mult, [1.5, 2.0], [1.0, 0.0]) == (3.0, 2.0)  # lists
    assert astad.jvp(mult, (1.5, 2), (1.0, 0.0)) == (3.0, 2.0)  # an int primal
    assert astad.jvp(mult, args, (1.0, None)) == (3.0, 2.0)  # None: a zero tangent
    assert astad.jvp(mult, args, (1, 0)) == (3.0, 2.0)  # int tangents
    value, tangent, aux = astad.jvp(lambda x: (x * x, "aux"), (3.0,), (1.0,), has_aux=True)
    assert (value, tangent, aux) == (9.0, 6.0, "aux")
    assert astad.jvp(mult, primals=args, tangents=(1.0, 0.0)) == (3.0, 2.0)  # keywords
    with pytest.raises(astad.InputError, match="2 primals and 1 tangents"):
        astad.jvp(mult, args, (1.0,))
    with pytest.raises(TypeError):
        astad.jvp(mult, (1.0,), (1.0,))  # the wrong number of arguments for mult


def test_a_tangent_that_is_not_finite_is_decided_by_the_duals():
    # sqrt at 0 along a zero tangent: the code for floats gives 0 * inf = nan; forward
    # duals drop a zero tangent through an infinite partial (as the reference does)
    assert astad.jvp(root, (0.0,), (0.0,)) == REFERENCE(root, (0.0,), (0.0,)) == (0.0, 0.0)
    assert astad.jvp(root, (0.0,), (1.0,))[1] == math.inf


def test_an_error_is_raised_at_the_users_line():
    with pytest.raises(ZeroDivisionError) as raised:
        astad.jvp(divides, (1.0, 0.0), (1.0, 1.0))
    frames = [f for f in traceback.extract_tb(raised.tb) if f.name == "divides"]
    assert frames and frames[-1].line == "return x / y"
    assert astad.jvp(divides, (1.0, 2.0), (1.0, 0.0)) == (0.5, 0.5)  # and then as before


def test_a_replaced_code_and_a_rebound_global_are_followed():
    global OFFSET

    def f(x):
        return x * x

    assert astad.jvp(f, (3.0,), (1.0,)) == (9.0, 6.0)
    f.__code__ = (lambda x: x * x * x).__code__
    assert astad.jvp(f, (3.0,), (1.0,)) == (27.0, 27.0)
    assert astad.jvp(uses_global, (2.0,), (1.0,)) == (3.0, 1.5)
    OFFSET = 4.0
    try:
        assert astad.jvp(uses_global, (2.0,), (1.0,)) == (8.0, 4.0)
    finally:
        OFFSET = 1.5
    assert astad.jvp(uses_global, (2.0,), (1.0,)) == (3.0, 1.5)


def cubic(x, y):
    return x * x * y + 3.0 * y * y * y


def cubic_hessian(x, y):
    return [[2.0 * y, 2.0 * x], [2.0 * x, 18.0 * y]]


@pytest.mark.parametrize("argnums", [0, 1, (0,), (1,), (0, 1), (1, 0), -1])
def test_hessian_vector_products_against_the_hand_derived_hessian(argnums):
    x, y, v = 1.25, -0.5, (0.75, 2.0)
    g = astad.grad(cubic, argnums=argnums)
    h = cubic_hessian(x, y)
    chosen = argnums if isinstance(argnums, tuple) else (argnums % 2,)
    for _ in range(3):  # found, then known (grad.hvp_known), then known again
        gradient, product = astad.jvp(g, (x, y), v)
        want_g = [(2.0 * x * y, x * x + 9.0 * y * y)[k] for k in chosen]
        want_p = [h[k][0] * v[0] + h[k][1] * v[1] for k in chosen]
        if isinstance(argnums, tuple):
            assert list(gradient) == pytest.approx(want_g) and type(gradient) is tuple
            assert list(product) == pytest.approx(want_p) and type(product) is tuple
        else:
            assert (gradient, product) == pytest.approx((want_g[0], want_p[0]))
        assert (gradient, product) == REFERENCE(g, (x, y), v)


def test_hessian_vector_product_follows_a_replaced_code():
    def f(x):
        return x * x * x

    g = astad.grad(f)
    assert astad.jvp(g, (2.0,), (1.0,)) == (12.0, 12.0)
    assert astad.jvp(g, (2.0,), (1.0,)) == (12.0, 12.0)
    f.__code__ = (lambda x: x * x * x * x).__code__
    assert astad.jvp(g, (2.0,), (1.0,)) == (32.0, 48.0)


def test_under_an_enclosing_differentiation_the_levels_stay_apart():
    def inner(x):
        return astad.jvp(mult, (x, 3.0), (0.0, 1.0))[1] * x  # x * x

    assert astad.grad(inner)(2.0) == 4.0
    assert astad.jvp(inner, (2.0,), (1.0,)) == (4.0, 4.0)
    assert astad.grad(lambda c: astad.jvp(astad.grad(cubic), (c, 1.0), (1.0, 0.0))[1])(
        2.0) == 0.0  # d/dc of H_xx v = 2 y
    assert not duals.running.stack


def test_reads_as_the_function_it_stands_for():
    assert astad.jvp.__name__ == "jvp" and astad.jvp.__module__ == "astad.api.transforms"
    assert "forward mode" in astad.jvp.__doc__
    assert list(inspect.signature(astad.jvp).parameters) == ["fun", "primals", "tangents",
                                                           "has_aux", "compile"]
    assert pickle.loads(pickle.dumps(astad.jvp)) is astad.jvp
    assert transforms.jvp is astad.jvp
    if NATIVE:
        assert type(astad.jvp).__name__ == "CompiledJvp"
        assert repr(astad.jvp) == repr(REFERENCE)


@pytest.mark.skipif(not NATIVE, reason="the compiled runtime's CompiledJvp")
def test_the_compiled_case_runs_and_leaves_the_rest_to_the_reference():
    calls = []

    def general(*args, **kwargs):
        calls.append(args)
        return REFERENCE(*args, **kwargs)

    jvp = runtime.native.CompiledJvp(general, entry.CACHE, transforms.grad,
                                     duals.running, bindings.MISSING, HvpKnown)
    g = astad.grad(cubic, argnums=(0, 1))
    for fn, args, tangents in [(mult, (1.5, 2.0), (1.0, 0.5)), (g, (1.0, 2.0), (1.0, 0.0)),
                               (mult, (1.5, 2.0), (1.0, None))]:  # (None: a zero tangent)
        want = REFERENCE(fn, args, tangents)  # (builds the entry, finds the HVP code)
        calls.clear()
        assert jvp(fn, args, tangents) == want and calls == []
    for args, tangents in [((1.5, 2), (1.0, 0.0)), ([1.5, 2.0], [1.0, 0.0]),
                           ((1.5, 2.0), (1.0, np.float64(0.5)))]:
        calls.clear()
        assert jvp(mult, args, tangents) == REFERENCE(mult, args, tangents)
        assert len(calls) == 1
    calls.clear()
    assert jvp(root, (0.0,), (0.0,)) == (0.0, 0.0) and len(calls) == 1  # (nan: the duals)

    def f(x):
        return x * x

    assert jvp(f, (3.0,), (1.0,)) == (9.0, 6.0)
    f.__code__ = (lambda x: x * x * x).__code__
    calls.clear()
    assert jvp(f, (3.0,), (1.0,)) == (27.0, 27.0) and len(calls) == 1  # (rebuilt there)
    assert jvp(f, (3.0,), (1.0,)) == (27.0, 27.0) and len(calls) == 1  # (the new entry)


def test_a_none_tangent_of_a_float_is_zero_on_the_compiled_path():
    """astad.jvp(f, (a, x), (None, t)): None is a zero tangent, as 0.0 is, and takes the
    float code (it ran every dual before, about 70 times slower)."""
    import math

    def f(a, x):
        return a * math.sin(x) + x * x

    expected = astad.jvp(f, (0.3, 0.7), (0.0, 1.0))
    assert astad.jvp(f, (0.3, 0.7), (None, 1.0)) == expected
    assert astad.jvp(f, (0.3, 0.7), (1.0, None)) == astad.jvp(f, (0.3, 0.7), (1.0, 0.0))
    g = astad.grad(f, 1)
    assert astad.jvp(g, (0.3, 0.7), (None, 1.0)) == astad.jvp(g, (0.3, 0.7), (0.0, 1.0))
