"""Transforms made inline (a new transform object per call, api/inline.py) give what kept
ones give, see a changed function, and keep no function made at run time alive."""
import gc
import weakref

import numpy as np
import pytest

import astad


def f(a, x):
    return a * x * x + 3.0 * x


def g(a, x):
    return np.sum(a * np.tanh(x))


def defaults(x, k=2.0):
    return k * x * x


A, X = np.linspace(0.1, 1.0, 4), np.linspace(-1.0, 1.0, 4)


def _same(left, right):
    if isinstance(left, tuple):
        assert isinstance(right, tuple) and len(left) == len(right)
        for a, b in zip(left, right):
            _same(a, b)
    else:
        np.testing.assert_array_equal(left, right)
        assert type(left) is type(right)


@pytest.mark.parametrize("transform", [astad.grad, astad.value_and_grad])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,), -1])
def test_inline_equals_kept_floats(transform, argnums):
    kept = transform(f, argnums=argnums)
    for a, x in [(1.3, 0.7), (-2.0, 0.25), (0.5, -4.0)]:
        for _ in range(3):  # (first, second and later calls of each)
            _same(transform(f, argnums=argnums)(a, x), kept(a, x))
    assert astad.grad(f, argnums=1)(1.3, 0.7) == 2 * 1.3 * 0.7 + 3.0


@pytest.mark.parametrize("transform", [astad.grad, astad.value_and_grad])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_inline_equals_kept_numpy(transform, argnums):
    kept = transform(g, argnums=argnums)
    for _ in range(3):
        _same(transform(g, argnums=argnums)(A, X), kept(A, X))
    np.testing.assert_allclose(astad.grad(g, argnums=1)(A, X), A / np.cosh(X) ** 2,
                               rtol=1e-14)


def test_inline_jacobians_hessian_jvp_vjp():
    for transform in (astad.jacfwd, astad.jacrev, astad.jacobian):
        kept = transform(g, argnums=1)
        for _ in range(2):
            _same(transform(g, argnums=1)(A, X), kept(A, X))
    kept = astad.hessian(f, argnums=1)
    assert astad.hessian(f, argnums=1)(1.3, 0.7) == kept(1.3, 0.7) == pytest.approx(2 * 1.3)
    assert astad.jvp(f, (1.3, 0.7), (0.0, 1.0)) == (f(1.3, 0.7), 2 * 1.3 * 0.7 + 3.0)
    value, pullback = astad.vjp(f, 1.3, 0.7)
    assert value == f(1.3, 0.7)
    assert pullback(1.0) == (0.7 * 0.7, 2 * 1.3 * 0.7 + 3.0)


def test_mixed_arguments_take_the_general_path():
    # a 0-d array for a float: the shared call's general path
    for _ in range(3):
        out = astad.grad(f, argnums=1)(1.3, np.array(0.7))
        assert isinstance(out, np.ndarray) and out.shape == ()
        assert out == 2 * 1.3 * 0.7 + 3.0
    assert astad.grad(f, argnums=1)(1.3, 0.7) == 2 * 1.3 * 0.7 + 3.0


def test_code_replaced_gives_the_new_derivative(tmp_path, monkeypatch):
    path = tmp_path / "inline_model.py"
    path.write_text("def h(x):\n    return x * x\n\n\ndef cube(x):\n    return x * x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inline_model
    h = inline_model.h
    assert astad.grad(h)(3.0) == 6.0
    assert astad.grad(h)(3.0) == 6.0
    h.__code__ = inline_model.cube.__code__
    assert astad.grad(h)(3.0) == 27.0
    assert astad.grad(h)(3.0) == 27.0
    assert astad.value_and_grad(h)(2.0) == (8.0, 12.0)


def test_defaults_changed_give_the_new_derivative():
    original = defaults.__defaults__
    try:
        assert astad.grad(defaults)(3.0) == 12.0
        defaults.__defaults__ = (5.0,)
        assert astad.grad(defaults)(3.0) == 30.0
        assert astad.grad(defaults)(3.0) == 30.0
    finally:
        defaults.__defaults__ = original
    assert astad.grad(defaults)(3.0) == 12.0


def test_redefined_function_gives_the_new_derivative(tmp_path, monkeypatch):
    path = tmp_path / "inline_redefined.py"
    path.write_text("def k(x):\n    return x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inline_redefined
    assert astad.grad(inline_redefined.k)(2.0) == 4.0
    first = inline_redefined.k
    path.write_text("def k(x):\n    return 5.0 * x * x * x\n")
    import importlib
    importlib.reload(inline_redefined)
    assert inline_redefined.k is not first
    assert astad.grad(inline_redefined.k)(2.0) == 60.0
    assert astad.grad(first)(2.0) == 4.0  # (the first one is as it was)


def test_global_rebound_gives_the_new_derivative(tmp_path, monkeypatch):
    path = tmp_path / "inline_global.py"
    path.write_text("SCALE = 2.0\n\n\ndef s(x):\n    return SCALE * x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inline_global
    assert astad.grad(inline_global.s)(3.0) == 12.0
    inline_global.SCALE = 10.0
    assert astad.grad(inline_global.s)(3.0) == 60.0
    assert astad.grad(inline_global.s)(3.0) == 60.0


@pytest.mark.parametrize("kind", ["lambda", "closure", "numpy"])
def test_function_made_at_run_time_is_not_kept_alive(kind):
    scale = 1.5
    if kind == "lambda":
        fun, arg, expected = (lambda x: scale * x * x), 2.0, 6.0
    elif kind == "closure":
        def fun(x):
            return scale * x * x * x
        arg, expected = 2.0, 18.0
    else:
        fun, arg = (lambda x: np.sum(scale * x * x)), np.array([1.0, 2.0])
        expected = np.array([3.0, 6.0])
    ref = weakref.ref(fun)
    for _ in range(3):
        np.testing.assert_array_equal(astad.grad(fun)(arg), expected)
        np.testing.assert_array_equal(astad.value_and_grad(fun)(arg)[1], expected)
    del fun
    gc.collect()
    assert ref() is None


def test_lambdas_made_in_a_loop_are_not_kept_alive(tmp_path, monkeypatch):
    path = tmp_path / "inline_factory.py"
    path.write_text("def make(k):\n    return lambda x: k * x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inline_factory
    refs = []
    for k in range(5):
        fun = inline_factory.make(float(k))
        assert astad.grad(fun)(1.0) == 2.0 * k
        assert astad.value_and_grad(fun)(1.0) == (float(k), 2.0 * k)
        refs.append(weakref.ref(fun))
    del fun
    gc.collect()
    assert all(r() is None for r in refs)


def test_kept_transform_keeps_its_function_and_names():
    gradient = astad.grad(lambda x: x * x * x)
    gc.collect()
    assert gradient(2.0) == 12.0
    assert gradient(2.0) == 12.0
    named = astad.grad(f, argnums=1)
    assert named.__name__ == named.__qualname__ == "grad_f"
    assert named.__doc__ == "astad.grad of f"
    assert astad.grad.__name__ == "grad" and "argnums" in astad.grad.__doc__
    named.__name__ = "mine"
    assert named.__name__ == "mine"


def test_a_transform_made_inline_finds_the_kept_call_at_once(monkeypatch, tmp_path):
    """After the first, a transform made inline with an int argnums runs the call kept for
    its function (api/inline.kept_call), with none of the first call's checks."""
    from astad.api import transforms
    from astad.runtime import tape
    if tape.RUNTIME != "native":
        pytest.skip("the kept call is the compiled runtime's SpecialisedCall")
    kept = astad.grad(defaults, argnums=1)(3.0, 2.0)
    astad.value_and_grad(defaults, argnums=1)(3.0, 2.0)  # (its own kept call)
    path = tmp_path / "inline_fresh.py"  # (a function no transform has met)
    path.write_text("def fresh(a, x):\n    return a * x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inline_fresh
    fresh = inline_fresh.fresh
    assert astad.reverse_diff(fresh).grad(1.5, 2.0) == (4.0, 6.0)  # (its code written)
    for _ in range(3):  # (the first runs the code of its kind, as for a lambda made again;
        # a function met again is one its caller keeps: the second makes its kept call)
        assert astad.grad(fresh, argnums=1)(1.5, 2.0) == 6.0
    from astad.api import inline
    for name in ("plain_call", "resolvable_function"):
        monkeypatch.setattr(transforms, name, None)  # (not called)
    monkeypatch.setattr(inline, "made_again", None)
    assert astad.grad(defaults, argnums=1)(3.0, 2.0) == kept == 9.0
    assert astad.grad(fresh, argnums=1)(1.5, 2.0) == 6.0
    assert astad.value_and_grad(defaults, argnums=1)(3.0, 2.0) == (18.0, 9.0)
    with pytest.raises(astad.AstadError, match="argnums"):  # (one argument: no position 1)
        astad.grad(defaults, argnums=1)(3.0)


def test_a_partial_made_inline_runs_its_functions_call_with_the_bound_constants():
    import functools
    kept = astad.grad(f, argnums=1)
    for a in (1.3, -2.0, 0.5, 1.3):  # (a new partial each time, other bound constants)
        for x in (0.7, -4.0):
            got = astad.grad(functools.partial(f, a))(x)
            assert got == kept(a, x) == 2 * a * x + 3.0
            value, gradient = astad.value_and_grad(functools.partial(f, a))(x)
            assert (value, gradient) == (f(a, x), 2 * a * x + 3.0)
    keywords = functools.partial(defaults, k=3.0)  # (keywords: the partial's own pass)
    assert astad.grad(keywords)(2.0) == pytest.approx(12.0)
    with pytest.raises(astad.AstadError, match="argnums"):
        astad.grad(functools.partial(f, 1.3), argnums=1)(0.7)


def _closing_over(a):
    return lambda x: f(a, x)


def test_lambdas_made_anew_give_their_own_closures_derivatives():
    results = []
    for a in (1.3, -2.0, 0.5, 1.3, 4.0):
        for x in (0.7, -4.0):
            results.append((astad.grad(_closing_over(a))(x), 2 * a * x + 3.0))
            results.append((astad.grad(lambda x, a=a: f(a, x))(x), 2 * a * x + 3.0))
    assert all(got == want for got, want in results)


@pytest.mark.parametrize("make", [astad.jacfwd, astad.jacrev, astad.jacobian, astad.hessian])
def test_jacobians_made_inline_share_what_they_found_and_not_the_function(make):
    scale = 1.5
    fun = lambda x, y: scale * x * x * y  # noqa: E731
    ref = weakref.ref(fun)
    kept = make(fun, argnums=(0, 1))
    for x in (2.0, -0.5, 2.0):
        _same(make(fun, argnums=(0, 1))(x, 3.0), kept(x, 3.0))
        _same(make(fun, argnums=1)(x, 3.0), make(fun, argnums=1)(x, 3.0))
    del fun, kept
    gc.collect()
    assert ref() is None


def _first(x, y):
    return x * x * y


def _second(x, y):
    return x * y * y * y


@pytest.mark.parametrize("make", [astad.jacfwd, astad.jacrev, astad.hessian])
def test_jacobians_made_inline_see_the_function_changed(make):
    def fun(x, y):
        return x * x * y

    first = [make(fun, argnums=1)(2.0, 3.0) for _ in range(3)]
    fun.__code__ = _second.__code__
    second = [make(fun, argnums=1)(2.0, 3.0) for _ in range(3)]
    expected = (make(_first, argnums=1)(2.0, 3.0), make(_second, argnums=1)(2.0, 3.0))
    assert first == [expected[0]] * 3 and second == [expected[1]] * 3
    assert expected[0] != expected[1]
