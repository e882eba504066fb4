"""The compiled backend (``compile="numba"``, compile/numba_backend.py): the gradient of
the code written for floats, compiled, equals the Python code's bit for bit (the same
operations in the same order), and finite differences; what it cannot compile, or a call
its kernel does not take, runs the Python code and gives Python's answer."""
import dataclasses
import functools
import math
import os
import pickle
import random
import threading
import warnings

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen
from astad import CompileWarning

import compiled_programs as P

numba = pytest.importorskip("numba", reason="numba is not installed: the compiled backend "
                            "is optional (pip install numba)")

if os.environ.get("ASTAD_RUNTIME") == "python":  # (CI's second run on one version)
    pytest.skip("the compiled backend does not use the runtime's sweep: its tests run "
                "with the default runtime", allow_module_level=True)

COUNT = int(os.environ.get("ASTAD_COMPILED_FUZZ", "8"))


def _args(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    return {
        "dot": ([1.0, 2.0, 3.5], [0.5, -1.0, 2.0]),
        "pendulum": (1.0, 0.2, 9.81, 0.1, 0.01),
        "particles": ([float(v) for v in rng.random(6)],
                      [float(v) for v in rng.random(6) - 0.5], 0.01),
        "tree_fold": (0.7, 6),
        "smoothed_steps": ([float(v) for v in rng.random(8) * 2 - 0.5], 1.5),
        "monte_carlo_path": (1.0, 0.05, 0.2, [float(v) for v in rng.standard_normal(50)]),
        "rows_weighted": ([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], [0.3, -0.7]),
        "decay": (0.3, 20),
        "written_then_reduced": ([float(v) for v in rng.random(300) - 0.5], 0.7),
    }[name]


PROGRAMS = ["dot", "pendulum", "particles", "tree_fold", "smoothed_steps",
            "monte_carlo_path", "rows_weighted", "decay", "written_then_reduced"]


def _sampled(names: list, quick: tuple) -> list:
    """``names`` as parameters, those not in ``quick`` marked slow: each costs a numba
    compile, and the quick subset runs on every Python (the whole suite runs them all)."""
    return [name if name in quick else pytest.param(name, marks=pytest.mark.slow)
            for name in names]


def _compiled_call(f):
    """The compiled gradient of decorated ``f``."""
    entry = codegen.transformed(f)
    call = entry.compiled.get(("numba", "gradient"))
    assert call, f"{f.__name__} was not compiled"
    return call


def _counting(call, monkeypatch):
    ran = {"python": 0}
    python_code = call.python_code

    def counted(*args):
        ran["python"] += 1
        return python_code(*args)
    monkeypatch.setattr(call, "python_code", counted)
    return ran


def _flat(gradient):
    out = []
    for g in gradient:
        if g is None:
            continue
        if isinstance(g, (list, tuple, np.ndarray)):
            for item in g:
                out.extend(_flat([item]) if isinstance(item, (list, tuple)) else [item])
        else:
            out.append(g)
    return [float(v) for v in out]


@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_gradient_equals_the_python_code_bit_for_bit(name, monkeypatch):
    fn, args = getattr(P, name), _args(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)  # (each of these compiles)
        compiled = astad.reverse_diff(fn, compile="numba")
        value, gradient = compiled.value_and_grad(*args)
    ran = _counting(_compiled_call(compiled), monkeypatch)
    assert compiled.value_and_grad(*args) == (value, gradient)
    assert ran["python"] == 0  # (the kernel answered)
    want_value, want_gradient = astad.reverse_diff(fn).value_and_grad(*args)
    assert value == want_value and type(value) is float
    assert gradient == want_gradient
    assert [type(g) for g in gradient] == [type(g) for g in want_gradient]


@pytest.mark.parametrize("name", _sampled(["dot", "pendulum", "particles", "tree_fold",
                                           "monte_carlo_path"], ("dot", "tree_fold")))
def test_compiled_gradient_against_finite_differences(name):
    fn, args = getattr(P, name), _args(name)
    gradient = astad.grad(fn, argnums=0, compile="numba")(*args)
    x = args[0]
    if isinstance(x, float):
        h = 1e-6
        numeric = (fn(x + h, *args[1:]) - fn(x - h, *args[1:])) / (2 * h)
        assert gradient == pytest.approx(numeric, rel=1e-6, abs=1e-8)
        return
    for k in range(len(x)):
        h = 1e-6
        up, down = list(x), list(x)
        up[k] += h
        down[k] -= h
        numeric = (fn(up, *args[1:]) - fn(down, *args[1:])) / (2 * h)
        assert gradient[k] == pytest.approx(numeric, rel=1e-5, abs=1e-7)


def _tangents(args, seed):
    rng = random.Random(seed)
    out = []
    for a in args:
        if isinstance(a, float):
            out.append(rng.uniform(-1, 1))
        elif isinstance(a, list) and a and isinstance(a[0], list):
            out.append([[rng.uniform(-1, 1) for _ in row] for row in a])
        elif isinstance(a, list):
            out.append([rng.uniform(-1, 1) for _ in a])
        else:
            out.append(None)  # (an int: no tangent)
    return tuple(out)


@pytest.mark.parametrize("name", _sampled(PROGRAMS, ("particles", "rows_weighted",
                                                    "tree_fold")))
def test_compiled_forward_mode_equals_the_python_code(name, monkeypatch):
    """``jvp`` with ``compile="numba"`` runs forward mode's code for floats compiled: the
    same value and tangent as that code, bit for bit, and the gradient's dot product."""
    fn, args = getattr(P, name), _args(name)
    tangents = _tangents(args, len(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        got = astad.jvp(fn, args, tangents, compile="numba")
    call = codegen.transformed(fn).compiled.get(("numba", "forward"))
    assert call, name
    ran = _counting(call, monkeypatch)
    assert astad.jvp(fn, args, tangents, compile="numba") == got
    assert ran["python"] == 0
    assert got == astad.jvp(fn, args, tangents)
    gradient = astad.reverse_diff(fn).grad(*args)
    expected = math.fsum(g * t for g, t in zip(_flat(gradient), _flat(tangents)))
    assert got[1] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    decorated = astad.reverse_diff(fn, compile="numba")
    assert decorated.jvp(args, tangents) == got


@pytest.mark.parametrize("name", _sampled(["pendulum", "particles", "decay",
                                           "smoothed_steps", "monte_carlo_path"],
                                          ("pendulum", "smoothed_steps")))
def test_compiled_hessian_vector_products(name, monkeypatch):
    """``jvp(grad(f, compile="numba"), ...)`` runs the Hessian-vector code (reverse mode
    over forward mode's code for floats, api/hvp.py) compiled: the same numbers as that
    code, bit for bit, and central differences of the gradient. The pendulum leaves a
    parameter to its default (before, that sent the product to the general path)."""
    fn, args = getattr(P, name), _args(name)
    argnums = tuple(k for k, a in enumerate(args) if not isinstance(a, int))
    tangents = _tangents(args, 7 * len(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        got = astad.jvp(astad.grad(fn, argnums=argnums, compile="numba"), args, tangents)
    call = codegen.transformed(fn).compiled.get(("numba", "hvp"))
    assert call, name
    ran = _counting(call, monkeypatch)
    again = astad.jvp(astad.grad(fn, argnums=argnums, compile="numba"), args, tangents)
    assert again == got and ran["python"] == 0
    assert got == astad.jvp(astad.grad(fn, argnums=argnums), args, tangents)
    h = 1e-5
    shifted = [[a + s * h * t for a, t in zip(arg, tangent)] if isinstance(arg, list)
               else arg if tangent is None else arg + s * h * tangent
               for s in (1, -1) for arg, tangent in zip(args, tangents)]
    grad = astad.grad(fn, argnums=argnums)
    up, down = grad(*shifted[:len(args)]), grad(*shifted[len(args):])
    numeric = [(u - d) / (2 * h) for u, d in zip(_flat(up), _flat(down))]
    assert _flat(got[1]) == pytest.approx(numeric, rel=1e-3, abs=1e-6)
    if name != "pendulum":  # (forward duals through reverse mode: seconds for 1,000 steps)
        general = astad.jvp(lambda *a: grad(*a), args, tangents)
        assert _flat(got[1]) == pytest.approx(_flat(general[1]), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", _sampled(["pendulum", "particles", "decay"], ("decay",)))
def test_compiled_hessians_and_jacobians(name, monkeypatch):
    """``hessian(f, compile="numba")`` takes one compiled Hessian-vector product per
    column; ``jacrev``, ``jacfwd`` and ``jacobian`` of a float result its compiled
    gradient. The same numbers as without ``compile=``."""
    fn, args = getattr(P, name), _args(name)
    argnums = tuple(k for k, a in enumerate(args) if not isinstance(a, int))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        got = astad.hessian(fn, argnums=argnums, compile="numba")(*args)
    ran = _counting(codegen.transformed(fn).compiled[("numba", "hvp")], monkeypatch)
    assert astad.hessian(fn, argnums=argnums, compile="numba")(*args) == got
    assert ran["python"] == 0
    assert got == astad.hessian(fn, argnums=argnums)(*args)
    for transform in (astad.jacrev, astad.jacfwd, astad.jacobian):
        assert transform(fn, argnums=argnums, compile="numba")(*args) == \
            astad.grad(fn, argnums=argnums)(*args)


def _rows_of_records(xs):
    out = []
    for v in xs:
        out.append((v * v, v))  # (a tuple of tuples: no code for its rows)
    return tuple(out)


def test_compiled_jacobian_rows(monkeypatch):
    """A function returning a tuple of floats: ``jacrev`` (and ``jacobian``, ``vjp``) by
    the code for its rows compiled, one sweep per output; the same as without it."""
    args = ([0.1, 0.5, 1.2, -0.3],)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        got = astad.jacrev(P.three_moments, compile="numba")(*args)
    ran = _counting(codegen.transformed(P.three_moments).compiled[("numba", "rows")],
                    monkeypatch)
    assert astad.jacobian(P.three_moments, compile="numba")(*args) == got
    assert ran["python"] == 0
    assert got == astad.jacrev(P.three_moments)(*args)
    decorated = astad.reverse_diff(P.three_moments, compile="numba")
    value, pullback = decorated.vjp(*args)
    assert value == P.three_moments(*args)
    assert pullback((1.0, 0.0, 2.0)) == astad.reverse_diff(P.three_moments).vjp(
        *args)[1]((1.0, 0.0, 2.0))
    # a list appended to, returned as a tuple: its rows compiled too (jacfwd takes them)
    x = [0.1, 0.3, -0.2, 0.6]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        got = astad.jacfwd(P.lattice_forces, compile="numba")(x, 2.0)
    ran = _counting(codegen.transformed(P.lattice_forces).compiled[("numba", "rows")],
                    monkeypatch)
    assert astad.jacrev(P.lattice_forces, compile="numba")(x, 2.0) == got
    assert ran["python"] == 0
    assert got == astad.jacrev(P.lattice_forces)(x, 2.0)
    np.testing.assert_allclose(  # (forward mode's general path, in its own order)
        got, astad.jacfwd(functools.partial(P.lattice_forces))(x, 2.0), rtol=1e-14)
    # (rows the writer has no code for: said, and the Python path's answer)
    with pytest.warns(CompileWarning, match="rows"):
        assert astad.jacrev(_rows_of_records, compile="numba")([0.1, 0.3]) == \
            astad.jacrev(_rows_of_records)([0.1, 0.3])


def test_arrays_tuples_and_lists_take_the_kernel(monkeypatch):
    compiled = astad.reverse_diff(P.dot, compile="numba")
    x, y = np.linspace(0.1, 1.0, 7), np.linspace(-1.0, 2.0, 7)
    value, (gx, gy) = compiled.value_and_grad(x, y)
    ran = _counting(_compiled_call(compiled), monkeypatch)
    want_value, (wx, wy) = astad.reverse_diff(P.dot).value_and_grad(x, y)
    assert value == want_value
    assert type(gx) is np.ndarray and gx.dtype == np.float64
    np.testing.assert_array_equal(gx, wx)
    np.testing.assert_array_equal(gy, wy)
    # a tuple, a non-contiguous array, a list of numpy.float64: the kernel again
    for xs in (tuple(x), x[::-1][::-1].copy()[::2], [np.float64(v) for v in x]):
        ys = y[:len(xs)]
        got = compiled.value_and_grad(xs, ys)
        want = astad.reverse_diff(P.dot).value_and_grad(xs, ys)
        assert got[0] == want[0]
        assert _flat(got[1]) == _flat(want[1])
        assert type(got[1][0]) is type(want[1][0])
    assert ran["python"] == 0


def test_a_long_tape_runs_again_with_arrays_long_enough():
    """The tape's arrays start at 4,096 items: a longer call counts what it needs and runs
    once more; the arrays are kept for the next call."""
    compiled = astad.reverse_diff(P.dot, compile="numba")
    for n in (10, 5000, 20000, 300):
        x = [math.sin(k) for k in range(n)]
        y = [math.cos(k) for k in range(n)]
        assert compiled.value_and_grad(x, y) == astad.reverse_diff(P.dot).value_and_grad(x, y)


def test_numpy_sums_of_written_arrays_add_in_numpy_order():
    """numpy sums a contiguous array pairwise, in chunks of 8,192 items before numpy 2.3:
    the kernels copy the order this numpy has (numba_kernels.numpy_sum_order), or say
    they cannot."""
    from astad.compile.numba_kernels import numpy_sum_order
    compiled = astad.reverse_diff(P.written_then_reduced, compile="numba")
    for n in (3, 8193, 20001):
        xs = [math.sin(0.37 * k) for k in range(n)]
        want = astad.reverse_diff(P.written_then_reduced).value_and_grad(xs, 0.3)
        if numpy_sum_order() is None:
            with pytest.warns(CompileWarning, match="another order"):
                assert compiled.value_and_grad(xs, 0.3) == want
            return
        assert compiled.value_and_grad(xs, 0.3) == want


def test_numpy_functions_of_floats_compile(monkeypatch):
    """np.exp(x), np.tanh(h)... of floats in a loop (rules/numpy_floats.py) compile as C's
    functions: the gradient within rounding of numpy's own (equal where numpy's
    functions round as the C library's), and the same at a singular point, where the
    kernel raises and the Python code gives numpy's inf."""
    xs = [0.3, -0.2, 1.1, 0.7, -1.4]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled = astad.reverse_diff(P.softplus_chain, compile="numba")
        value, gradient = compiled.value_and_grad(xs, 1.5)
    ran = _counting(_compiled_call(compiled), monkeypatch)
    assert compiled.value_and_grad(xs, 1.5) == (value, gradient) and ran["python"] == 0
    want_value, want = astad.reverse_diff(P.softplus_chain).value_and_grad(xs, 1.5)
    assert value == pytest.approx(want_value, rel=1e-14)
    np.testing.assert_allclose(_flat(gradient), _flat(want), rtol=1e-13)
    _, dot = astad.jvp(P.softplus_chain, (xs, 1.5), ([1.0] * 5, 0.0), compile="numba")
    assert dot == pytest.approx(sum(gradient[0]), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        at_inf = compiled.value_and_grad([800.0], 1.5)  # (exp overflows: numpy's inf)
        assert ran["python"] == 1
        np.testing.assert_equal(  # (nan where the Python code's is)
            at_inf, astad.reverse_diff(P.softplus_chain).value_and_grad([800.0], 1.5))


def test_python_semantics_where_numba_would_differ():
    """A raise inside the kernel runs the Python code: an int past 64 bits (numba would
    wrap it), a math domain error (numba gives nan), an index out of range (numba would
    read past the array) each give exactly what the Python code gives."""
    compiled = astad.reverse_diff(P.growing_int, compile="numba")
    for n in (5, 30, 60):  # 3**40 > 2**63
        assert compiled.value_and_grad(0.5, n) == \
            astad.reverse_diff(P.growing_int).value_and_grad(0.5, n)
    logs = astad.reverse_diff(P.logs, compile="numba")
    assert logs.grad([1.0, 2.0, 4.0]) == [1.0, 0.5, 0.25]
    with pytest.raises(ValueError, match="math domain error"):
        logs.grad([1.0, -2.0])
    shifted = astad.reverse_diff(P.shifted, compile="numba")
    assert shifted.grad([1.0, 2.0, 3.0], -1) == astad.reverse_diff(P.shifted).grad(
        [1.0, 2.0, 3.0], -1)  # (a negative index reads from the end, as in Python)
    with pytest.raises(IndexError):
        shifted.grad([1.0, 2.0, 3.0], 1)
    assert logs.grad([1.0, 2.0]) == [1.0, 0.5]  # (and later calls are not disturbed)


def test_a_changed_global_changes_the_compiled_gradient(monkeypatch):
    compiled = astad.reverse_diff(P.decay, compile="numba")
    before = compiled.grad(0.3, 5)
    monkeypatch.setattr(P, "RATE", 0.25)
    after = compiled.grad(0.3, 5)
    assert after != before
    assert after == astad.reverse_diff(P.decay).grad(0.3, 5)


def test_threads_share_the_kernel_and_keep_their_own_tapes():
    compiled = astad.grad(P.particles, argnums=(0, 1), compile="numba")
    plain = astad.grad(P.particles, argnums=(0, 1))
    inputs = [([0.1 * k + 0.01 * j for j in range(5)], [0.02 * j for j in range(5)], 0.01)
              for k in range(8)]
    want = [plain(*a) for a in inputs]
    errors = []

    def work(k):
        for _ in range(5):
            got = compiled(*inputs[k])
            if got != want[k]:
                errors.append((k, got))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_transforms_take_the_option_and_pickle():
    g = astad.grad(P.pendulum, argnums=(0, 1), compile="numba")
    want = astad.grad(P.pendulum, argnums=(0, 1))(*_args("pendulum"))
    assert g(*_args("pendulum")) == want
    again = pickle.loads(pickle.dumps(g))
    assert again(*_args("pendulum")) == want
    assert "compile='numba'" in repr(again)
    vg = astad.value_and_grad(P.dot, compile="numba")
    assert vg([1.0, 2.0], [3.0, 4.0]) == (11.0, [3.0, 4.0])
    decorated = pickle.loads(pickle.dumps(P.norm2))
    assert decorated.grad([1.0, 2.0]) == [2.0, 4.0]
    assert pickle.loads(pickle.dumps(P.norm2.grad))([1.0, 3.0]) == [2.0, 6.0]
    assert codegen.transformed(P.norm2).compiled.get(("numba", "gradient"))  # (compiled)


def test_a_numba_function_is_taken_by_its_python_code():
    jitted = numba.njit(P.dot)
    g = astad.grad(jitted, argnums=(0, 1), compile="numba")
    assert g([1.0, 2.0], [3.0, 4.0]) == ([3.0, 4.0], [1.0, 2.0])
    decorated = astad.reverse_diff(jitted)
    assert decorated.grad([1.0, 2.0], [3.0, 4.0]) == ([3.0, 4.0], [1.0, 2.0])


@dataclasses.dataclass
class Body:
    x: float
    v: float


def _energy(b, n):
    e = 0.0
    for _ in range(n):
        e += b.x * b.x + b.v * b.v
    return e


def _no_loop(x, y):
    return x * math.sin(y)


def _whole_arrays(xs):
    s = 0.0
    for v in xs:
        s += np.sum(np.exp(v * np.ones(3)))  # (arrays the code makes: numpy's dispatch)
    return s


def _closure_loop(scale):
    def f(xs):
        s = 0.0
        for v in xs:
            s += scale * v * v
        return s
    return f


def test_what_is_not_compiled_says_why_once_and_runs_as_python():
    cases = [(_no_loop, (1.0, 2.0), "no loop"),
             (P.maybe_int, ([1.0, 2.0],), "may hold an int"),
             (_whole_arrays, ([1.0, 2.0],), "no code for floats")]
    for fn, args, reason in cases:
        compiled = astad.reverse_diff(fn, compile="numba")
        with pytest.warns(CompileWarning, match=reason) as said:
            got = compiled.value_and_grad(*args)
        assert fn.__name__ in str(said[0].message)
        assert got == astad.reverse_diff(fn).value_and_grad(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)  # (said once)
            assert compiled.value_and_grad(*args) == got
    with pytest.warns(CompileWarning, match="forward.*no code for floats"):
        assert astad.jvp(_whole_arrays, ([1.0, 2.0],), ([1.0, 0.0],), compile="numba") \
            == astad.jvp(_whole_arrays, ([1.0, 2.0],), ([1.0, 0.0],))


def _oscillator(b, n, k):
    e = 0.0
    x, v = b.x, b.v
    for _ in range(n):
        v = v - k * x * 0.01
        x = x + v * 0.01
        e += x * x + v * v
    return e


def test_dataclasses_of_floats_compile_by_their_fields(monkeypatch):
    """A dataclass of floats is read into its fields by the Python prologue: the kernel
    computes on them, and the gradient is the dataclass again."""
    args = (Body(1.0, 0.5), 50, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled = astad.reverse_diff(_oscillator, compile="numba")
        got = compiled.value_and_grad(*args)
    ran = _counting(_compiled_call(compiled), monkeypatch)
    assert compiled.value_and_grad(*args) == got and ran["python"] == 0
    assert got == astad.reverse_diff(_oscillator).value_and_grad(*args)
    assert type(got[1][0]) is Body and got[1][1] is None
    tangents = (Body(1.0, -0.5), None, 0.3)
    assert astad.jvp(_oscillator, args, tangents, compile="numba") == \
        astad.jvp(_oscillator, args, tangents)
    assert _energy(Body(1.0, 2.0), 3) == 15.0


def _plain_loop(xs):
    s = 0.0
    for v in xs:
        s += v * v * v
    return s


def test_without_numba_it_says_so_and_runs_as_python(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "numba", None)  # (import numba raises ImportError)
    compiled = astad.reverse_diff(_plain_loop, compile="numba")
    with pytest.warns(CompileWarning, match="numba is not installed"):
        assert compiled.grad([1.0, 2.0]) == [3.0, 12.0]


def test_closures_are_read_at_call_time():
    g1, g2 = (astad.grad(_closure_loop(s), compile="numba") for s in (2.0, 3.0))
    assert g1([1.0, 2.0]) == [4.0, 8.0]
    assert g2([1.0, 2.0]) == [6.0, 12.0]


def test_refused_options():
    with pytest.raises(astad.AstadError, match="compile='jax'"):
        astad.grad(P.dot, compile="jax")
    with pytest.raises(astad.AstadError, match="has_aux"):
        astad.grad(P.dot, has_aux=True, compile="numba")
    with pytest.raises(astad.AstadError, match="plain function"):
        class Model:
            @astad.reverse_diff(compile="numba")
            def loss(self, x):
                return x


@pytest.mark.slow  # (a numba compile per program: CI runs them on the whole suite's Python)
@pytest.mark.parametrize("k", range(COUNT))
def test_random_programs_compile_and_agree(k, tmp_path, monkeypatch):
    """The random programs of test_specialised_fuzz (every loop form, helpers inlined and
    recursive, sums, lists written, a matrix): each compiles, and its gradient equals the
    Python code's bit for bit."""
    from test_specialised_fuzz import _program
    rng = random.Random(1000003 + k)
    source, module, args = _program(rng, tmp_path, f"compiled_{k}")
    try:
        want = astad.reverse_diff(module.f).value_and_grad(*args)
    except (ZeroDivisionError, OverflowError, ValueError):
        pytest.skip("the program raises at these arguments")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled = astad.reverse_diff(module.f, compile="numba")
        got = compiled.value_and_grad(*args)
    ran = _counting(_compiled_call(compiled), monkeypatch)
    assert compiled.value_and_grad(*args) == got
    assert ran["python"] == 0, source
    assert got == want, source
