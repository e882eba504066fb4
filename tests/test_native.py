"""The compiled sweep (astad/runtime/_native.c) against the Python sweeps of tape.py.

The Python sweeps are the reference: on every tape the compiled ones must leave the same
adjoints bit for bit (floats compared by their bits, so -0.0 and inf count; every NaN is
one NaN, as CPython's own sign of a NaN depends on whether the interpreter has specialised
the operation), make the same calls and raise the same errors. The whole suite also runs
under both runtimes (CI); these tests compare the two side by side in one process.
"""
import math
import os
import random
import struct
import subprocess
import sys
import types
import weakref
from fractions import Fraction

import numpy as np
import pytest

import astad
from astad.runtime import tape as runtime

native = pytest.importorskip("astad.runtime._native",
                             reason="the compiled sweep was not built (no C compiler)")

python_sweep, _python_sweep_and_free, python_sweep_flat = runtime.python_sweeps
# tape.py's sweep_and_free calls the module's `sweep`, the compiled one when it is in
# use: the reference here calls the Python sweep
python_sweep_and_free = types.FunctionType(
    _python_sweep_and_free.__code__, {**vars(runtime), "sweep": python_sweep})


def bits(values):
    """Floats by their bits (so -0.0 differs from 0.0), every NaN as one; anything else
    as itself."""
    return [("nan" if math.isnan(v) else struct.pack("<d", v)) if type(v) is float else v
            for v in values]


def random_tape(rng, n_inputs, n_entries, zero_share=0.3, specials=True):
    """A tuple tape (entries of 1 to 6 pairs, parents anywhere below, now and then the
    same parent twice) and a seeded adjoint; some adjoints zero, some partials inf or
    nan, so the skipping of zero adjoints is exercised."""
    tape = [()] * n_inputs
    for k in range(n_inputs, n_inputs + n_entries):
        entry = ()
        for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 4, 6))):
            parent = rng.randrange(k)
            partial = rng.uniform(-2.0, 2.0)
            roll = rng.random()
            if specials and roll < 0.03:
                partial = rng.choice((math.inf, -math.inf, math.nan, -0.0, 0.0))
            entry += (parent, partial)
            if rng.random() < 0.1:
                entry += (parent, -partial)  # the same parent twice in one entry
        tape.append(entry)
    adjoint = [0.0] * len(tape)
    for k in range(n_inputs, len(tape)):
        if rng.random() > zero_share:
            adjoint[k] = rng.uniform(-1.0, 1.0)
    adjoint[-1] = 1.0
    return tape, adjoint


def test_the_runtime_in_use_is_named_and_its_functions_are_the_ones_astad_calls():
    from astad.core import reverse_pass
    assert runtime.RUNTIME in ("native", "python")
    expected = native if runtime.RUNTIME == "native" else None
    if expected is not None:
        assert reverse_pass.sweep is native.sweep and runtime.sweep_flat is native.sweep_flat
        assert reverse_pass.sweep_and_free is native.sweep_and_free
    else:
        assert reverse_pass.sweep is python_sweep
    assert native.SWEEP_CHUNK == runtime._SWEEP_CHUNK


@pytest.mark.parametrize("seed", range(8))
def test_sweep_is_bit_identical_to_the_python_sweep(seed):
    rng = random.Random(seed)
    tape, adjoint = random_tape(rng, rng.randrange(1, 6), rng.randrange(1, 700))
    first = rng.randrange(0, len(tape))
    expected = list(adjoint)
    python_sweep(tape, expected, first, {})
    got = list(adjoint)
    native.sweep(tape, got, first, {})
    assert bits(got) == bits(expected)


@pytest.mark.parametrize("seed", range(6))
def test_sweep_and_free_is_bit_identical_and_frees_the_same_entries(seed):
    rng = random.Random(100 + seed)
    n_inputs = rng.randrange(1, 6)
    tape, adjoint = random_tape(rng, n_inputs, rng.randrange(1, 3 * runtime._SWEEP_CHUNK + 40))
    expected, got = list(adjoint), list(adjoint)
    native_tape = list(tape)
    python_sweep_and_free(tape, expected, n_inputs, {})
    native.sweep_and_free(native_tape, got, n_inputs, {})
    assert bits(got) == bits(expected)
    assert native_tape == tape == [()] * n_inputs


def test_a_zero_adjoint_skips_its_entry_even_against_inf_and_nan():
    tape = [(), (), (0, math.inf, 1, math.nan), (2, 0.5), (0, 2.0)]
    for sweep_fn in (python_sweep, native.sweep):
        adjoint = [0.0, 0.0, 0.0, 0.0, 1.0]
        sweep_fn(tape, adjoint, 2, {})
        assert adjoint == [2.0, 0.0, 0.0, 0.0, 1.0]
    adjoint = [0.0, 0.0, -0.0, 0.0, 1.0]  # -0.0 is zero too
    native.sweep(tape, adjoint, 2, {})
    assert adjoint[:2] == [2.0, 0.0]


def test_a_self_referring_entry_uses_the_adjoint_it_started_with():
    # an entry whose parent is its own slot: Python reads g once; the compiled sweep
    # updates an adjoint float in place where nothing else holds it, which must not
    # change the g of the entry's later pairs, also after a pair that is not all floats
    for last in (1.0, Fraction(1)):
        tape = [(), (1, 0.5, 0, 3.0, 1, 0.25, 0, last)]
        expected = [0.0, 2.0]
        python_sweep(tape, expected, 1, {})
        got = [0.0, math.fsum([2.0])]  # a float only this list holds
        native.sweep(tape, got, 1, {})
        assert bits(got) == bits(expected) == bits([8.0, 3.5])


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5])
def test_sweep_flat_is_bit_identical_to_the_python_flat_sweep(width):
    # width 5 is not one the specialised code writes; tape.py reads it as 4 pairs per
    # entry of 10 items, and the compiled sweep does the same
    rng = random.Random(width)
    first = rng.randrange(1, 20)
    n_entries = 2 * runtime._SWEEP_CHUNK + 77
    flat = []
    for k in range(first, first + n_entries):
        for _ in range(width):
            flat += [rng.randrange(k), rng.choice((rng.uniform(-3, 3), 1.0, math.inf))]
    adjoint = [0.0] * (first + n_entries)
    for k in range(first, len(adjoint)):
        adjoint[k] = rng.choice((0.0, rng.uniform(-1.0, 1.0)))
    adjoint[-1] = 1.0
    expected, got = list(adjoint), list(adjoint)
    expected_tape, got_tape = list(flat), list(flat)
    python_sweep_flat(expected_tape, width, expected, first)
    native.sweep_flat(got_tape, width, got, first)
    assert bits(got) == bits(expected)
    assert got_tape == expected_tape == []


class Traced:
    """A number that logs every operation done on it: the compiled sweep must do, on
    anything that is not an exact float, what the Python statement does, in its order."""

    def __init__(self, value, log):
        self.value, self.log = value, log

    def _v(self, other):
        return other.value if isinstance(other, Traced) else other

    def __mul__(self, other):
        self.log.append(("mul", self.value, self._v(other)))
        return Traced(self.value * self._v(other), self.log)

    def __rmul__(self, other):
        self.log.append(("rmul", self._v(other), self.value))
        return Traced(self._v(other) * self.value, self.log)

    def __add__(self, other):
        self.log.append(("add", self.value, self._v(other)))
        return Traced(self.value + self._v(other), self.log)

    __radd__ = __add__

    def __iadd__(self, other):
        self.log.append(("iadd", self.value, self._v(other)))
        self.value += self._v(other)
        return self

    def __bool__(self):
        self.log.append(("bool", self.value))
        return self.value != 0


class LoggingList(list):
    """An adjoint list that logs its reads and writes (not exactly a list: the compiled
    sweep hands it to the Python one)."""

    def __init__(self, items, log):
        super().__init__(items)
        self.log = log

    def __getitem__(self, k):
        self.log.append(("get", k))
        return super().__getitem__(k)

    def __setitem__(self, k, v):
        self.log.append(("set", k))
        super().__setitem__(k, v)


def _traced_run(sweep_fn, make):
    log = []
    tape, adjoint = make(log)
    sweep_fn(tape, adjoint, 2, {})
    return [a.value if isinstance(a, Traced) else a for a in adjoint], log


@pytest.mark.parametrize("case", ["adjoints", "partials", "mixed", "logging-list"])
def test_other_numbers_go_through_the_number_protocol_in_pythons_order(case):
    def make(log):
        if case == "adjoints":  # e.g. duals of an enclosing differentiation
            adjoint = [Traced(0.0, log), Traced(0.0, log), Traced(0.0, log),
                       Traced(0.0, log), Traced(1.0, log)]
            tape = [(), (), (0, 2.0, 1, 3.0), (0, 1.0), (2, 0.5, 3, 4.0, 2, 1.0)]
        elif case == "partials":
            adjoint = [0.0, 0.0, 0.0, 0.0, 1.0]
            tape = [(), (), (0, Traced(2.0, log), 1, 3.0), (0, 1.0),
                    (2, 0.5, 3, Traced(4.0, log), 2, 1.0)]
        elif case == "mixed":  # a float adjoint slot meets a traced product mid-entry
            adjoint = [0.0, Traced(0.0, log), 0.0, 0.0, 1.0]
            tape = [(), (), (0, 2.0, 1, 3.0, 0, 5.0), (1, 1.0), (2, 0.5, 3, 4.0, 2, 1.0)]
        else:
            adjoint = LoggingList([0.0, 0.0, 0.0, 0.0, 1.0], log)
            tape = [(), (), (0, 2.0, 1, 3.0), (0, 1.0), (2, 0.5, 3, 4.0)]
        return tape, adjoint

    expected = _traced_run(python_sweep, make)
    got = _traced_run(native.sweep, make)
    assert got == expected
    assert expected[1]  # operations were logged


def test_fractions_numpy_scalars_and_int_partials_give_the_python_results():
    tape = [(), (), (0, Fraction(1, 3), 1, 2), (0, np.float64(0.1), 1, 7, 2, 1.5),
            (3, 0.25, 2, Fraction(2, 7))]
    for adjoint0 in ([0.0, 0.0, 0.0, 0.0, 1.0], [Fraction(0), 0, 0.0, np.float64(0.0), 1.0],
                     [0.0, 0.0, np.float64(0.0), 0.0, Fraction(3, 2)]):
        expected, got = list(adjoint0), list(adjoint0)
        python_sweep(tape, expected, 2, {})
        native.sweep(tape, got, 2, {})
        assert [type(v) for v in got] == [type(v) for v in expected]
        assert bits(got) == bits(expected)
    flat = [0, 1.5, 1, Fraction(1, 2), 0, np.float64(2.0), 2, 3]
    for adjoint0 in ([0.0, 0.0, 0.0, 1.0], [0.0, 0.0, Fraction(1, 3), np.float64(2.0)]):
        expected, got = list(adjoint0), list(adjoint0)
        python_sweep_flat(list(flat), 2, expected, 2)
        native.sweep_flat(list(flat), 2, got, 2)
        assert [type(v) for v in got] == [type(v) for v in expected]
        assert bits(got) == bits(expected)


def test_array_entries_are_called_back_as_the_python_sweep_calls_them():
    # a triple (backward, parents, context) runs when its adjoint is non-zero, or when it
    # is zero but its slot is in `arrays`; with the same arguments, in the same order,
    # seeing the adjoints the entries above left
    def make(log):
        def backward(adjoint, arrays, k, parents, context):
            log.append((k, parents, context, list(adjoint), sorted(arrays)))
            adjoint[parents[0]] += context * (adjoint[k] or 1.0)
            arrays.pop(k, None)

        tape = [(), (), (backward, (0,), 3.0), (1, 2.0), (backward, (1,), 5.0),
                (2, 1.0, 3, 1.0), (backward, (2,), 7.0)]
        return tape, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]

    for arrays0 in ({}, {4: "array", 2: "array"}):
        runs = []
        for sweep_fn in (python_sweep, native.sweep, python_sweep_and_free,
                         native.sweep_and_free):
            log = []
            tape, adjoint = make(log)
            sweep_fn(tape, adjoint, 2, dict(arrays0))
            runs.append((bits(adjoint), log))
        assert runs[0] == runs[1] == runs[2] == runs[3]
        assert len(runs[0][1]) == (3 if arrays0 else 2)


def test_sweep_and_free_frees_the_chunks_at_the_same_points():
    # an array entry's backward sees the tape as the freeing sweep left it: the compiled
    # sweep must have deleted exactly the chunks the Python one had
    size = 3 * runtime._SWEEP_CHUNK + 10

    def make(log):
        tape = [()]

        def backward(adjoint, arrays, k, parents, context):
            log.append((k, len(tape)))
            adjoint[parents[0]] += adjoint[k]

        for k in range(1, size):
            tape.append((backward, (k - 1,), None) if k % 97 == 0 else (k - 1, 1.0))
        return tape, [0.0] * (size - 1) + [1.0]

    logs = []
    for sweep_fn in (python_sweep_and_free, native.sweep_and_free):
        log = []
        tape, adjoint = make(log)
        sweep_fn(tape, adjoint, 1, {})
        logs.append((log, adjoint[0]))
    assert logs[0] == logs[1]
    log, gradient = logs[0]
    assert gradient == 1.0 and len(log) == (size - 1) // 97
    assert log[-1][1] < size  # the entries above had been freed


@pytest.mark.parametrize("bad", ["parent", "short-adjoint", "odd-entry", "callback"])
def test_errors_are_raised_where_the_python_sweep_raises_them(bad):
    def make():
        tape = [(), (), (0, 2.0, 1, 3.0), (0, 1.0, 1, 1.0), (2, 0.5, 3, 4.0)]
        adjoint = [0.0, 0.0, 0.0, 0.0, 1.0]
        if bad == "parent":
            tape[3] = (0, 1.0, 9, 1.0)
        elif bad == "short-adjoint":
            adjoint = adjoint[:3]
            tape[2] = (0, 1.0)
        elif bad == "odd-entry":
            tape[3] = (0, 1.0, 1, 2.0, 1)
        else:
            def backward(adjoint, arrays, k, parents, context):
                raise ZeroDivisionError("from the backward")
            tape[3] = (backward, (0,), None)
        return tape, adjoint

    outcomes = []
    for sweep_fn in (python_sweep, native.sweep):
        tape, adjoint = make()
        with pytest.raises(Exception) as info:
            sweep_fn(tape, adjoint, 2, {})
        outcomes.append((type(info.value), str(info.value), bits(adjoint)))
    assert outcomes[0] == outcomes[1]


def test_a_tape_or_adjoint_that_is_not_a_list_is_swept_by_the_python_sweep():
    tape = ((), (), (0, 2.0, 1, 3.0), (0, 1.0), (2, 0.5, 3, 4.0))
    expected, got = [0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0]
    python_sweep(tape, expected, 2, {})
    native.sweep(tape, got, 2, {})
    assert got == expected == [5.0, 1.5, 0.5, 4.0, 1.0]
    for sweep_fn in (native.sweep_and_free, native.sweep_flat):
        log = []
        adjoint = LoggingList([0.0, 0.0, 0.0, 0.0, 1.0], log)
        if sweep_fn is native.sweep_flat:  # entries 2, 3, 4 of one pair each
            sweep_fn([0, 2.0, 0, 1.0, 2, 0.5], 1, adjoint, 2)
            assert list(adjoint) == [1.0, 0.0, 0.5, 0.0, 1.0]
        else:
            sweep_fn(list(tape), adjoint, 2, {})
            assert list(adjoint) == [5.0, 1.5, 0.5, 4.0, 1.0]
        assert ("get", 4) in log  # the Python sweep read it through __getitem__


def _program_gradients():
    """Gradients of programs on both tapes (the specialised code's flat one and the
    duals' tuple one, with its freeing sweep and pullbacks), as float hex strings."""
    import math as m

    def dot(xs, ys):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * ys[i]
        return s

    def kepler(e, ms):
        total = 0.0
        for i in range(len(ms)):
            mean = ms[i]
            big_e = mean + e * m.sin(mean)
            while True:
                delta = (big_e - e * m.sin(big_e) - mean) / (1.0 - e * m.cos(big_e))
                big_e = big_e - delta
                if abs(delta) < 1e-12:
                    break
            total = total + m.cos(big_e) - e
        return total

    def chain(xs):  # a dict and a method call: the duals' tape
        state = {"x": xs[0]}
        for k in range(600):
            state["x"] = m.sin(state["x"]) * xs[k % 3] + state["x"] * 0.5
        return state["x"]

    xs = [m.sin(0.37 * k) for k in range(700)]
    ys = [m.cos(0.11 * k) for k in range(700)]
    out = []
    for fn, args in ((dot, (xs, ys)), (kepler, (0.5, xs[:40])), (chain, (xs[:3],))):
        f = astad.reverse_diff(fn)
        value, grads = f.value_and_grad(*args)
        _, pullback = f.vjp(*args)
        out.append(repr((value, grads, pullback(0.75))))
    return out


@pytest.mark.slow
def test_gradients_of_programs_are_bit_identical_under_both_runtimes():
    here = _program_gradients()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_native as t; "
            "from astad.runtime import tape; assert tape.RUNTIME == 'python'; "
            "print('\\n'.join(t._program_gradients()))")
    env = dict(os.environ, ASTAD_RUNTIME="python")
    result = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == here


@pytest.mark.slow
@pytest.mark.parametrize("value, expected", [("python", "python"), ("native", "native"),
                                             (" Python ", "python"), ("", None)])
def test_astad_runtime_selects_the_runtime(value, expected):
    env = dict(os.environ, ASTAD_RUNTIME=value)
    result = subprocess.run(
        [sys.executable, "-c", "from astad.runtime import tape; "
         "from astad.core import reverse_pass as a; "
         "print(tape.RUNTIME, a.sweep is tape.python_sweeps[0])"],
        capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    name, uses_python = result.stdout.split()
    assert name == (expected or "native")  # unset: the compiled sweep, which is built here
    assert uses_python == str(name == "python")


def test_an_unknown_astad_runtime_is_refused_with_the_choices():
    env = dict(os.environ, ASTAD_RUNTIME="fortran")
    result = subprocess.run([sys.executable, "-c", "import astad"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert result.returncode != 0
    assert "ASTAD_RUNTIME='fortran'" in result.stderr and "'python'" in result.stderr


class _FloatSubclass(float):
    pass


CHECKED = [[], [1.0], [1.0, 2.5], [1.0, 2], [1.0, np.float64(2.0)], [1.0, True],
           [_FloatSubclass(1.0)], (1.0, 2.0), [1.0, None], "ab", None, [[1.0]], [1.0, 2.0, 3.0]]
ROWS = [[], [[]], [[1.0], [2.0, 3.0]], [[1.0], [2.0, 3]], [[1.0], (2.0,)], ([1.0],),
        [[1.0], [2.0, 4.0]], [[1.0, 5.0], [2.0, 3.0]], [[1.0], [2.0, 3.0], [4.0]], [1.0],
        [[np.float64(1.0)]]]


def test_the_argument_checks_answer_as_the_python_ones():
    from astad.specialise import value_kinds
    python_lists, python_rows, python_floats = value_kinds.python_checks
    values = [1.0, 2, True, np.float64(1.0), _FloatSubclass(1.0), None, float("nan")]
    for a in values:
        assert native.floats(a) is python_floats(a), a
        for b in values:
            assert native.floats(a, b, 3.0) is python_floats(a, b, 3.0), (a, b)
    assert native.floats() is python_floats() is True
    for a in CHECKED:
        assert native.float_lists(a) == python_lists(a), a
        for b in CHECKED:
            assert native.float_lists(a, b) == python_lists(a, b), (a, b)
    assert native.float_lists() is python_lists() is True
    for a in ROWS:
        assert native.float_rows(a) == python_rows(a), a
        for b in ROWS:
            assert native.float_rows(a, b) == python_rows(a, b), (a, b)
    assert native.float_rows() is python_rows() is True
    assert value_kinds.float_lists is native.float_lists if runtime.RUNTIME == "native" else \
        value_kinds.float_lists is python_lists


def test_the_check_of_bindings_answers_as_the_python_one():
    from astad.transform import bindings

    def helper():
        pass

    class Namespace:  # neither a dict nor a weak reference: read through its get
        def get(self, name, default):
            return {"a": 1}.get(name, default)

    def gone():
        pass

    dead = weakref.ref(gone)
    del gone
    missing, code = bindings.MISSING, helper.__code__
    namespace, attributes = {"a": helper, "b": None}, weakref.ref(helper)
    cases = [(namespace, "a", helper), (namespace, "a", None), (namespace, "b", None),
             (namespace, "c", missing), (namespace, "c", None),
             (attributes, "__code__", code), (attributes, "__code__", None),
             (attributes, "no_such", missing), (attributes, "__defaults__", None),
             (dead, "__code__", missing), (dead, "__code__", code),
             (Namespace(), "a", 1), (Namespace(), "b", missing), (Namespace(), "a", 2)]
    for k in range(len(cases) + 1):
        for dependencies in ([cases[k - 1]] if k else [], cases[:k], cases[k:]):
            assert native.unchanged(dependencies, missing) == \
                bindings.python_unchanged(dependencies, missing), dependencies
    assert not native.unchanged([(attributes, "__code__", code)] * 3 + [(dead, "x", 1)],
                                missing)
    with pytest.raises(TypeError):
        native.unchanged([(namespace, "a")], missing)
    assert bindings.unchanged is native.unchanged if runtime.RUNTIME == "native" else \
        bindings.unchanged is bindings.python_unchanged
