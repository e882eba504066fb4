"""The tape of the code for floats (runtime/_float_tape.c) against tape.py's reference.

The code for floats records ``_record(slot, partial, ...)`` (the tape's ``record``) on
``ad.float_tape()``: a list on the Python runtime, a FloatTape of C arrays on the native
one, swept by ``float_adjoints``. The two must give the same adjoints bit for bit, refuse
what is not a float without recording part of it, and leave a tape swept for one row of
a Jacobian whole for the next.
"""
import math
import random
import struct
from fractions import Fraction

import numpy as np
import pytest

import astad
from astad.runtime import tape as runtime

native = pytest.importorskip("astad.runtime._native",
                             reason="the compiled runtime was not built (no C compiler)")

python_float_tape, python_float_adjoints = runtime.python_float_tape
# (numpy.float64 partials times inf or nan warn on the reference sweep, as numpy does)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def bits(values):
    return [("nan" if math.isnan(v) else struct.pack("<d", v)) for v in values]


def random_entries(rng, width, first, n_entries):
    """Entries of ``width`` pairs, parents anywhere below; partials now and then inf,
    nan, -0.0, an int or a numpy.float64."""
    entries = []
    for k in range(first, first + n_entries):
        pairs = ()
        for _ in range(width):
            partial = rng.choice((rng.uniform(-3.0, 3.0),) * 6 + (
                math.inf, -math.inf, math.nan, -0.0, 0.0, 2, True, np.float64(0.7)))
            pairs += (rng.randrange(k), partial)
        entries.append(pairs)
    return entries


def both(entries):
    expected, got = python_float_tape(), native.FloatTape()
    for k, pairs in enumerate(entries):  # (as the code records them, and by extend)
        if k % 2:
            expected.record(*pairs)
            got.record(*pairs)
        else:
            expected.extend(pairs)
            got.extend(pairs)
    return expected, got


@pytest.mark.parametrize("width", [1, 2, 3, 4])  # (the code for floats' widths)
@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_sweep_gives_the_python_adjoints_bit_for_bit(width, seed):
    rng = random.Random(10 * width + seed)
    first = rng.randrange(1, 30)
    n_entries = 2 * runtime._SWEEP_CHUNK + 77  # (the Python sweep frees in chunks)
    expected_tape, got_tape = both(random_entries(rng, width, first, n_entries))
    assert len(got_tape) == len(expected_tape)
    for start in (first + n_entries - 1, first + rng.randrange(n_entries), rng.randrange(first)):
        expected = python_float_adjoints(list(expected_tape), width, start, first, True)
        got = native.float_adjoints(got_tape, width, start, first, True)
        assert len(got) == len(expected) == first
        assert all(type(v) is float for v in got)
        assert bits(got) == bits(expected)


def test_a_zero_adjoint_passes_nothing_on_even_through_inf_and_nan():
    for make, adjoints in ((python_float_tape, python_float_adjoints),
                           (native.FloatTape, native.float_adjoints)):
        tape = make()
        tape.extend((0, math.inf, 1, math.nan))  # entry 2: its adjoint stays 0.0
        tape.extend((1, 2.0, 1, 0.5))  # entry 3: seeded
        assert adjoints(tape, 2, 3, 2, True) == [0.0, 2.5]
        tape = make()
        tape.extend((0, math.nan))
        assert math.isnan(adjoints(tape, 1, 1, 1, True)[0])  # (a non-zero times nan)


def test_a_tape_swept_for_one_row_is_whole_for_the_next():
    rng = random.Random(7)
    expected_tape, got_tape = both(random_entries(rng, 2, 5, 300))
    rows = [(python_float_adjoints(expected_tape, 2, k, 5, k == 299 + 5),
             native.float_adjoints(got_tape, 2, k, 5, k == 299 + 5)) for k in (100, 200, 304)]
    assert expected_tape == []  # (the last sweep freed the list)
    for expected, got in rows:
        assert bits(got) == bits(expected)


@pytest.mark.parametrize("partial", [Fraction(1, 3), 1j, "2.0", None, [1.0], np.array([1.0]),
                                     np.float32(1.5), 10 ** 400])
def test_a_partial_that_is_not_a_float_is_refused_and_nothing_recorded(partial):
    tape = native.FloatTape()
    tape.extend((0, 1.0))
    with pytest.raises((TypeError, OverflowError)):
        tape.extend((0, 2.0, 1, partial))
    with pytest.raises((TypeError, OverflowError)):
        tape.record(0, 2.0, 1, partial)
    assert len(tape) == 2
    assert native.float_adjoints(tape, 1, 1, 1, True) == [1.0]


@pytest.mark.parametrize("pairs", [(0.0, 1.0), ("0", 1.0), (True, 1.0), (0, 1.0, 1),
                                   [0, 1.0], (2 ** 70, 1.0)])
def test_an_entry_of_another_form_is_refused(pairs):
    tape = native.FloatTape()
    with pytest.raises((TypeError, OverflowError)):
        tape.extend(pairs)
    if type(pairs) is tuple:
        with pytest.raises((TypeError, OverflowError)):
            tape.record(*pairs)
    assert len(tape) == 0


def test_a_sweep_outside_the_tape_raises_as_the_list_does():
    tape = native.FloatTape()
    tape.extend((0, 1.0, 5, 1.0))  # slot 5: past the tape (size 2 + 1 entries)
    with pytest.raises(IndexError):
        native.float_adjoints(tape, 2, 2, 2, True)
    with pytest.raises(IndexError):
        python_float_adjoints([0, 1.0, 5, 1.0], 2, 2, 2, True)
    with pytest.raises(IndexError):  # the seed past the tape
        native.float_adjoints(native.FloatTape(), 1, 3, 2, True)
    tape = native.FloatTape()
    tape.extend((0, 1.0, 0, 1.0, 0, 1.0))
    with pytest.raises(ValueError):  # 3 pairs are not entries of 2
        native.float_adjoints(tape, 2, 1, 1, True)
    with pytest.raises(TypeError):
        native.float_adjoints([0, 1.0], 1, 1, 1, True)


def test_the_code_for_floats_records_on_the_runtimes_tape():
    def dot(xs, ys):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * ys[i]
        return s

    from astad.compile import calls as codegen
    assert "_tape = ad.float_tape()" in codegen.build(dot).specialised_source
    expected = runtime.float_tape is (native.FloatTape if runtime.RUNTIME == "native"
                                      else runtime.FlatTape)
    assert expected
    xs, ys = [0.5, -1.25, 3.0], [2.0, 0.75, -0.1]
    value, (gx, gy) = astad.value_and_grad(dot, argnums=(0, 1))(xs, ys)
    assert value == sum(a * b for a, b in zip(xs, ys))
    assert gx == ys and gy == xs


def test_partials_of_numpy_floats_and_ints_give_floats_and_others_take_the_ordinary_code():
    scale = Fraction(1, 4)  # a global the code multiplies by: a partial that is a Fraction

    def f(xs):
        s = 0.0
        for x in xs:
            s = s + np.sin(x) * 3 + x * scale
        return s

    xs = [0.3, -1.2, 2.0]
    grad = astad.grad(f)(xs)
    assert grad == pytest.approx([math.cos(x) * 3 + 0.25 for x in xs], rel=1e-15)

    def g(xs):
        s = 0.0
        for x in xs:
            s = s + np.sin(x) * 3
        return s

    grad = astad.grad(g)(xs)
    assert all(type(v) is float for v in grad) or runtime.RUNTIME == "python"
    assert grad == pytest.approx([math.cos(x) * 3 for x in xs], rel=1e-15)
