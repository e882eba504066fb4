"""``f.value_and_grad`` and ``f.grad`` of a decorated function: with the compiled runtime
a ``SpecialisedCall`` (astad/runtime/_specialised.c), the checks of
``api.DiffFunction._specialised`` compiled around the specialised code. The Python method
is the reference: the same answers, of the same types, whichever argnums; and where the
specialised code does not apply (keywords, an enclosing differentiation, a replaced
``__code__``, a rebound global, an error), the general path's answer or error.
Under ASTAD_RUNTIME=python the same tests run the Python methods (CI runs both)."""
import gc
import math
import pickle
import sys
import traceback
import tracemalloc

import pytest

import astad
from astad.errors import SignatureError
from astad.runtime import tape as runtime

from test_specialised import _leaves, quick_sample, scale, series

NATIVE = runtime.RUNTIME == "native"


def _same(got, want):
    assert type(got) is type(want)
    leaves_got, leaves_want = list(_leaves(got)), list(_leaves(want))
    assert len(leaves_got) == len(leaves_want)
    for a, b in zip(leaves_got, leaves_want):
        assert type(a) is type(b) and (a == b or (a != a and b != b))


def _argnums_choices(n):
    return [None] + list(range(n)) + ([tuple(range(n - 1, -1, -1))] if n > 1 else [])


@pytest.mark.parametrize("fn, args", quick_sample(3))
def test_the_call_answers_as_the_python_method_for_every_argnums(fn, args):
    for argnums in _argnums_choices(len(args)):
        f = astad.reverse_diff(fn, argnums=argnums)
        reference = f.grad.__self__  # the DiffFunction: its Python methods
        try:
            want = reference.value_and_grad(*args)
        except astad.AstadError as error:  # (argnums choosing a str, a bool or None)
            with pytest.raises(type(error), match=r"no argument chosen"):
                f.value_and_grad(*args)
            with pytest.raises(type(error), match=r"no argument chosen"):
                f.grad(*args)
            continue
        _same(f.value_and_grad(*args), want)
        _same(f.grad(*args), reference.grad(*args))
        _same(f.grad(*args), want[1])


def test_the_call_is_the_compiled_one_where_it_was_built():
    f = astad.reverse_diff(scale)
    if NATIVE:
        assert type(f.grad).__name__ == "SpecialisedCall"
        assert type(f.value_and_grad) is type(f.grad)
    assert f.grad.__self__ is f.value_and_grad.__self__  # the DiffFunction
    assert f.grad.__name__ == "_grad_general" if NATIVE else "grad"
    assert "value_and_grad" in repr(f.value_and_grad)


def test_keyword_arguments_take_the_general_path():
    def g(x, y, k=2.0):
        return x * y * k
    f = astad.reverse_diff(g)
    assert f.value_and_grad(1.5, 2.0, k=3.0) == (9.0, (6.0, 4.5))
    assert f.grad(1.5, 2.0) == (4.0, 3.0)
    with pytest.raises(SignatureError, match="unexpected keyword"):
        f.grad(1.5, 2.0, q=1.0)


def test_a_wrong_argument_count_gets_pythons_error():
    f = astad.reverse_diff(scale)
    with pytest.raises(SignatureError, match="missing a required argument"):
        f.grad(1.5)
    with pytest.raises(SignatureError, match="too many positional"):
        f.value_and_grad(1.5, 2.0, 3.0)


def test_inside_an_enclosing_differentiation_the_derivative_is_nested():
    def h(x, c):
        return x * x * c

    inner = astad.reverse_diff(h)

    @astad.reverse_diff
    def outer(c):
        return inner.grad(3.0, c)[0] * c  # d/dx (x^2 c) = 2xc = 6c; times c: 6c^2

    assert outer.value_and_grad(2.0) == (24.0, 24.0)
    assert astad.jvp(outer, (2.0,), (1.0,)) == (24.0, 24.0)
    assert astad.grad(lambda c: inner.value_and_grad(3.0, c)[1][1] * c)(2.0) == 9.0  # x^2 c


def test_a_replaced_code_is_followed():
    def g(x, y):
        return x * y
    f = astad.reverse_diff(g)
    assert f.grad(2.0, 5.0) == (5.0, 2.0)
    f.__code__ = (lambda x, y: x * x + y).__code__
    assert f.value_and_grad(2.0, 5.0) == (9.0, (4.0, 1.0))
    assert f.grad(2.0, 5.0) == (4.0, 1.0)


FACTOR = 2.0


def _scaled_by_factor(x):
    return FACTOR * x * x


def test_a_rebound_global_is_followed(monkeypatch):
    f = astad.reverse_diff(_scaled_by_factor)
    assert f.grad(3.0) == 12.0
    monkeypatch.setitem(globals(), "FACTOR", 5.0)
    assert f.value_and_grad(3.0) == (45.0, 30.0)


def test_an_error_in_the_code_is_raised_at_the_users_line():
    def g(x, y):
        return math.log(x) * y
    f = astad.reverse_diff(g)
    assert f.grad(1.0, 2.0) == (2.0, 0.0)
    with pytest.raises(ValueError) as caught:
        f.grad(-1.0, 2.0)
    lines = [fr.line for fr in traceback.extract_tb(caught.tb) if fr.filename == __file__]
    assert lines[-1] == "return math.log(x) * y"
    assert f.grad(1.0, 3.0) == (3.0, 0.0)  # nothing left behind


def test_the_collector_is_left_as_it_was():
    f = astad.reverse_diff(series)  # (scalarloops: the collector paused during the call)
    assert gc.isenabled()
    want = f.grad.__self__.grad(0.7, 6)
    assert f.grad(0.7, 6) == want and gc.isenabled()
    gc.disable()
    try:
        assert f.grad(0.7, 6) == want and not gc.isenabled()
    finally:
        gc.enable()


@astad.reverse_diff
def product(x, y):
    return x * y


def test_the_call_pickles_as_itself():
    for call in (product.grad, product.value_and_grad):
        again = pickle.loads(pickle.dumps(call))
        assert again(1.5, 2.5) == call(1.5, 2.5) and type(again) is type(call)
        assert again.__self__ is call.__self__  # (imported by name: the same machinery)


def test_repeated_calls_keep_no_memory():
    f = astad.reverse_diff(scale)
    for _ in range(1000):
        f.value_and_grad(1.5, 2.5)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20000):
            f.value_and_grad(1.5, 2.5)
            f.grad(1.5, 2.5)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20000  # (a leak of one object per call would be over 600 kB)


@pytest.mark.skipif(not NATIVE, reason="the compiled call was not built")
def test_arguments_and_results_are_not_leaked():
    f = astad.reverse_diff(scale)
    x = 1.5e300 * 1.0  # (a float object of the test's own)
    f.grad(x, 2.5)
    before = sys.getrefcount(x)
    for _ in range(100):
        f.value_and_grad(x, 2.5)
        f.grad(x, 2.5)
    assert sys.getrefcount(x) == before
