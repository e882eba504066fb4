"""Functions with default arguments on the specialised path: the code written for floats
takes every parameter, and a call leaving some to their defaults passes the function's
defaults as they are now (as Python fills them in). Checked against the same call with
the defaults written out on the general path, against central differences, and that
the general path does not run; both runtimes (CI runs this file with
``ASTAD_RUNTIME=python`` too)."""
import math

import numpy as np
import pytest

import astad
from astad.api import diff as diff_module
from astad.api import jacobians, transforms


def model(x, y, scale=2.0, n=3):
    s = 0.0
    for i in range(n):
        s = s + scale * math.sin(x * y + i)
    return s


def huber(r, delta=0.5):
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


def weighted(x, w=[0.5, 1.5, -2.0]):  # noqa: B006 (only read)
    return sum(wi * math.sin(x * (i + 1)) for i, wi in enumerate(w))


def optional(x, y=None):
    if y is None:
        y = 3.0
    return x * x * y


def pair(x, y, k=2.0):
    return (k * x * y, x - y * y)


def scaled(x, k=(2.0, 3.0)):
    return k[0] * x * x + k[1] * x


# (function, the arguments passed, the same call with every default written out, does the
# code written for floats answer: it is written for the kinds the source suggests, a float
# for ``y`` of ``optional``, whose default None then takes the general path)
CASES = [
    (model, (0.3, 0.5), (0.3, 0.5, 2.0, 3), True),
    (model, (0.3, 0.5, 1.5), (0.3, 0.5, 1.5, 3), True),
    (model, (0.3, 0.5, 1.5, 5), (0.3, 0.5, 1.5, 5), True),
    (huber, (0.2,), (0.2, 0.5), True),
    (huber, (1.7,), (1.7, 0.5), True),
    (huber, (1.7, 2.0), (1.7, 2.0), True),
    (weighted, (1.3,), (1.3, [0.5, 1.5, -2.0]), True),
    (scaled, (1.3,), (1.3, (2.0, 3.0)), True),
    (optional, (1.3,), (1.3, None), False),
    (optional, (1.3, 0.5), (1.3, 0.5), True),
]
IDS = [f"{fn.__name__}-{len(args)}" for fn, args, _, _ in CASES]


WEIGHTS = np.array([1.0, 2.0])


def _taped_refused(monkeypatch):
    """The general (taped) path raises from now on: what answers is the specialised code."""
    def general_path(*_, **__):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(diff_module.DiffFunction, "_value_and_grad_taped", general_path)
    monkeypatch.setattr(diff_module.DiffFunction, "_forward", general_path)
    monkeypatch.setattr(transforms, "forward", general_path)
    monkeypatch.setattr(jacobians, "forward", general_path)
    monkeypatch.setattr(jacobians, "reverse", general_path)


def _differences(fn, args, k, h=1e-6):
    up, down = list(args), list(args)
    up[k], down[k] = args[k] + h, args[k] - h
    return (fn(*up) - fn(*down)) / (2 * h)


def _floats(args):
    return [k for k, a in enumerate(args) if type(a) is float]


@pytest.mark.parametrize("fn, args, full, fast", CASES, ids=IDS)
def test_gradients_leaving_defaults_out(fn, args, full, fast, monkeypatch):
    """f.grad, f.value_and_grad, astad.grad and astad.value_and_grad (every argument, one,
    a negative argnums) of a call leaving defaults out: what the general path gives for
    the call with them written out, the gradients of the arguments passed only."""
    want_value, want = astad.reverse_diff(fn).value_and_grad.__self__._value_and_grad_taped(
        full, {})
    want = want if len(full) > 1 else (want,)
    floats = _floats(args)
    for k in floats:  # (the general path against differences, once)
        assert want[k] == pytest.approx(_differences(fn, full, k), rel=1e-6, abs=1e-8)
    f = astad.reverse_diff(fn)
    if fast:
        _taped_refused(monkeypatch)
    n = len(args)
    single = n == 1 and fn.__code__.co_argcount == 1
    everything = want[0] if single else tuple(want[:n])
    assert f.grad(*args) == everything
    assert f.value_and_grad(*args) == (want_value, everything)
    assert astad.grad(fn, argnums=tuple(range(n)))(*args) == tuple(want[:n])
    assert astad.value_and_grad(fn, argnums=floats[0])(*args) == (want_value,
                                                                  want[floats[0]])
    assert astad.grad(fn, argnums=floats[-1] - n)(*args) == want[floats[-1]]
    assert f.grad(*args) == everything  # (again: what the first call kept)


@pytest.mark.parametrize("fn, args, full, fast", CASES, ids=IDS)
def test_forward_mode_leaving_defaults_out(fn, args, full, fast, monkeypatch):
    """astad.jvp of a call leaving defaults out: the directional derivative (each
    default a constant), by the forward code written for floats."""
    tangents = tuple(0.7 - 0.4 * k if type(a) is float else None
                     for k, a in enumerate(args))
    want = sum(t * _differences(fn, full, k) for k, t in enumerate(tangents)
               if t is not None)
    if fast and fn is not scaled:  # (the forward code takes lists of floats, not tuples)
        _taped_refused(monkeypatch)
    value, tangent = astad.jvp(fn, args, tangents)
    assert value == fn(*full)
    assert tangent == pytest.approx(want, rel=1e-6, abs=1e-8)


def test_jacobians_leaving_defaults_out(monkeypatch):
    """jacrev and jacfwd of a function returning a pair of floats, its default left out:
    each output's gradients of the arguments passed, by the code written for its rows."""
    x, y, k = 0.3, -1.1, 2.0
    want = ((k * y, k * x), (1.0, -2 * y))  # by hand
    _taped_refused(monkeypatch)
    for transform in (astad.jacrev, astad.jacfwd):
        got = transform(pair, argnums=(0, 1))(x, y)
        assert np.allclose(np.array(got, dtype=float), want, rtol=1e-14)
    value, pullback = astad.vjp(pair, x, y)
    assert value == pair(x, y, k)
    assert np.allclose(pullback((1.0, 2.0)), np.add(want[0], np.multiply(2.0, want[1])))


def test_defaults_replaced_are_read_again():
    """A new ``__defaults__`` is what the next call uses, on every path (the code written
    for the old ones depends on them: rebuilt, as the taped code is)."""
    def square(x, y, a=2.0):
        return a * x * y
    f = astad.reverse_diff(square)
    assert f.grad(1.5, 0.5) == (2.0 * 0.5, 2.0 * 1.5)
    assert astad.grad(square)(1.5, 0.5) == 2.0 * 0.5
    f.__defaults__ = (5.0,)
    square.__defaults__ = (5.0,)
    assert f.grad(1.5, 0.5) == (5.0 * 0.5, 5.0 * 1.5)
    assert astad.grad(square)(1.5, 0.5) == 5.0 * 0.5
    assert astad.jvp(square, (1.5, 0.5), (1.0, 0.0)) == (5.0 * 0.75, 5.0 * 0.5)


def test_a_default_of_another_kind_takes_the_general_path():
    """A default the float code was not written for (an array) is refused by its checks
    of the arguments, as an argument of that kind would be: the general path answers."""
    def dotted(x, w=WEIGHTS):
        return x * float(np.sum(w))
    assert astad.grad(dotted)(1.5) == 3.0
    assert astad.reverse_diff(dotted).grad(1.5) == (3.0,)  # (f.grad: every argument)


def test_too_few_arguments_is_the_error_python_gives():
    f = astad.reverse_diff(model)
    with pytest.raises(TypeError, match="missing a required argument: 'y'"):
        f.grad(0.3)
