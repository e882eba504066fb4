"""Property test: astad's gradients of random numpy programs that write into arrays.

Hypothesis writes the source of ``f(x, [y | m,] a)`` over float64 arrays and a float
(tests/numpy_programs.py says what the bodies hold: item, slice, row, column, fancy and
boolean-mask writes, in-place operators on arrays, slices and views, views and aliases
read after a write through the other, ``np.add.at``, ``out=``, arrays made inside and
filled, writes into the arguments, recurrences and stencils in ``for`` loops). Each
program is written to a real file (astad reads source with ``inspect``) and checked:

1. ``astad.value_and_grad`` gives the original's value bit for bit, and leaves the
   arguments mutated exactly as the original leaves them (so does ``astad.jvp``);
2. the gradient matches central finite differences within a tolerance set by the
   function's conditioning (steps h and 2h: their disagreement estimates the truncation
   error), with every boolean mask the same at every shifted point and away from ties;
3. forward mode, ``astad.jvp`` along random directions, equals the gradient dotted with
   the direction (~1e-9 relative);
4. on a quarter of the programs, a Hessian-vector product (``astad.jvp`` of
   ``astad.grad``) matches central differences of the gradient along the direction.

Budget: ``ASTAD_FUZZ_EXAMPLES`` programs (default 40, a few seconds), derandomized so
that CI checks the same programs every time; ``ASTAD_FUZZ_SEED=n`` draws other programs.
A long run: ``ASTAD_FUZZ_EXAMPLES=2000 pytest tests/test_property_numpy.py -s`` (prints
the count of programs checked).
"""
from __future__ import annotations

import collections
import contextlib
import os
import signal
import threading

import numpy as np
import pytest
import hypothesis
from hypothesis import HealthCheck, assume, given, note, settings

import astad
from numpy_programs import HEADER, load, programs, run_probe

# Constructs the generator writes but the property test leaves out, because astad gets
# them wrong: none now. (What this search found, each fixed and kept as a regression test at
# the end of this file: np.array(x) of a differentiated array aliased x; jvp of grad through
# an in-place write saw the array as written; np.add.at with a repeated index rounded
# differently from numpy; a write whose value overlaps its region took the gradient of a
# copy-first write, now refused where numpy's order makes a difference.)
KNOWN_BUGS: frozenset = frozenset()
# astad's refusal of a write whose value overlaps its region in a way where numpy's copy
# order matters (x[::2] = x[0:3]): such a program is discarded
OVERLAP_REFUSAL = "overlaps the region written"

MAX_EXAMPLES = int(os.environ.get("ASTAD_FUZZ_EXAMPLES", "40"))
SEED = os.environ.get("ASTAD_FUZZ_SEED")  # unset: the same programs on every run (CI)

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=SEED is None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)

VALUE_LIMIT = 1e4      # the value and every partial derivative must stay below this
FD_EPS = 1e-6
MASK_MARGIN = 1e-3     # a masked value this close to its threshold is a tie: discarded
EXAMPLE_SECONDS = 60


def copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def flatten(values) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in values])


def unflatten(flat, like):
    out, k = [], 0
    for v in like:
        size = np.size(v)
        piece = flat[k:k + size]
        out.append(piece.reshape(np.shape(v)).copy() if isinstance(v, np.ndarray)
                   else float(piece[0]))
        k += size
    return tuple(out)


def assert_same_arrays(after, expected, what):
    for k, (got, want) in enumerate(zip(after, expected)):
        if isinstance(want, np.ndarray):
            assert type(got) is np.ndarray and got.dtype == np.float64, \
                f"{what}: argument {k} is a {type(got).__name__} afterwards"
            np.testing.assert_array_equal(got, want, err_msg=f"{what}: argument {k}")


def shifted_value(probe_module, args, direction, step, masks):
    """f at args + step * direction on the probe copy; None when a mask differs."""
    point = unflatten(flatten(args) + step * direction, args)
    value, probe = run_probe(probe_module, point)
    return float(value) if probe.masks == masks else None


def central(fn, step):
    """(derivative at step, at 2 step): central differences of ``fn`` (None: a mask
    differs at a shifted point)."""
    out = []
    for h in (step, 2 * step):
        plus, minus = fn(h), fn(-h)
        if plus is None or minus is None:
            return None
        out.append((plus - minus) / (2 * h))
    return out


def check_program(program, stats) -> None:
    note(HEADER + program.rendered())
    note(f"args = {[v for _, v in program.spec]!r}")
    plain = load(program.rendered())
    probe_module = load(program.rendered(probe=True))
    try:
        _check(program, plain, probe_module, stats)
    finally:  # the files are read when the program is transformed, not later
        os.remove(plain.__file__)
        os.remove(probe_module.__file__)


def _check(program, plain, probe_module, stats):
    args = tuple(v for _, v in program.spec)
    argnums = tuple(range(len(args)))
    with np.errstate(all="ignore"):
        after_plain = copies(args)
        value = plain.f(*after_plain)
        _, probe = run_probe(probe_module, copies(args))
    assert isinstance(value, float), "the generator's programs return a float"
    assume(np.isfinite(value) and abs(value) < VALUE_LIMIT)
    assume(probe.margin > MASK_MARGIN)
    masks = probe.masks

    # 1. value and the arguments' mutation, as the original's
    after_astad = copies(args)
    try:
        ad_value, grad = astad.value_and_grad(plain.f, argnums)(*after_astad)
    except astad.NotDifferentiableError as error:
        assume(OVERLAP_REFUSAL not in str(error))
        raise
    assert ad_value == value, f"astad's value {ad_value!r}, the original's {value!r}"
    assert_same_arrays(after_astad, after_plain, "after value_and_grad")
    assert len(grad) == len(args)
    for g, a in zip(grad, args):
        assert np.shape(g) == np.shape(a)
        assert isinstance(g, np.ndarray) if isinstance(a, np.ndarray) else type(g) is float
    flat_grad = flatten(grad)
    assume(np.all(np.isfinite(flat_grad)) and np.max(np.abs(flat_grad)) < VALUE_LIMIT)

    # 2. central finite differences, each leaf, steps h and 2h on the same masks
    flat_args = flatten(args)
    for k in range(flat_args.size):
        e = np.zeros(flat_args.size)
        e[k] = 1.0
        step = FD_EPS * max(1.0, abs(flat_args[k]))
        with np.errstate(all="ignore"):
            fd = central(lambda h, e=e: shifted_value(probe_module, args, e, h, masks), step)
        assume(fd is not None)
        g1, g2 = fd
        tol = 1e-6 * (1.0 + abs(g1)) + 1e-10 * VALUE_LIMIT + 4.0 * abs(g1 - g2)
        assert abs(flat_grad[k] - g1) <= tol, (
            f"leaf {k}: astad {flat_grad[k]!r}, finite differences {g1!r} (tol {tol:.3g})")

    # 3. forward mode along random directions: the gradient dotted with the direction
    rng = np.random.default_rng(abs(hash(program.source)) % 2**32)
    for _ in range(2):
        direction = rng.uniform(-1.0, 1.0, size=flat_args.size)
        after_jvp = copies(args)
        out, tangent = astad.jvp(plain.f, after_jvp, unflatten(direction, args))
        assert out == value, f"jvp's value {out!r}, the original's {value!r}"
        assert_same_arrays(after_jvp, after_plain, "after jvp")
        expected = float(flat_grad @ direction)
        scale = float(np.abs(flat_grad) @ np.abs(direction)) + 1.0
        assert abs(tangent - expected) <= 1e-9 * scale, (
            f"jvp {tangent!r}, gradient . direction {expected!r}")

    # 4. a Hessian-vector product against central differences of the gradient
    if program.hvp and "any_write" in program.used and "hvp_of_writes" in KNOWN_BUGS:
        stats["hvp skipped (a write: a known bug)"] += 1
    elif program.hvp:
        direction = rng.uniform(-1.0, 1.0, size=flat_args.size)
        grad_fn = astad.grad(plain.f, argnums)

        def shifted_grad(h):
            point = unflatten(flat_args + h * direction, args)
            _, shifted_probe = run_probe(probe_module, copies(point))
            if shifted_probe.masks != masks:
                return None
            return flatten(grad_fn(*point))

        g_out, hv = astad.jvp(grad_fn, copies(args), unflatten(direction, args))
        # forward over reverse runs other code than grad: equal up to rounding
        np.testing.assert_allclose(flatten(g_out), flat_grad, rtol=1e-12,
                                   atol=1e-12 * (1.0 + np.max(np.abs(flat_grad))))
        hv = flatten(hv)
        with np.errstate(all="ignore"):
            fd = central(shifted_grad, FD_EPS * max(1.0, float(np.max(np.abs(flat_args)))))
        if fd is not None:
            h1, h2 = fd
            tol = 1e-6 * (1.0 + np.abs(h1)) + 1e-10 * VALUE_LIMIT + 4.0 * np.abs(h1 - h2)
            bad = np.abs(hv - h1) > tol
            assert not bad.any(), (f"Hessian-vector product {hv!r}, finite differences "
                                   f"of the gradient {h1!r}")
            stats["hvp"] += 1
    stats["checked"] += 1
    stats["masks"] += bool(masks)


@contextlib.contextmanager
def time_limit(seconds):
    """Fail, rather than hang, when one example runs too long (main thread, Unix)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"one generated program ran for more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
@pytest.mark.search
def test_random_numpy_programs_match_numpy_forward_mode_and_finite_differences():
    stats: collections.Counter = collections.Counter()

    @FUZZ_SETTINGS
    @given(program=programs(excluded=KNOWN_BUGS))
    def run(program):
        stats["tried"] += 1
        with time_limit(EXAMPLE_SECONDS):
            check_program(program, stats)

    if SEED is not None:
        run = hypothesis.seed(int(SEED))(run)
    run()
    print(f"\nnumpy fuzz: {stats['checked']} programs checked ({stats['masks']} with "
          f"boolean masks, {stats['hvp']} with a Hessian-vector product), "
          f"{stats['tried']} generated; {dict(stats)}")
    # the property must not be vacuous: most generated programs are really checked
    assert stats["checked"] >= MAX_EXAMPLES // 2


# ---------------------------------------------------------------------------------------
# The generator itself: every program runs under numpy, and it produces the constructs
# the brief asks for (so the property above is not vacuous).

CLAIMED = ["new_array", "copy", "copy:.copy", "copy:np.copy", "copy:np.array", "zeros",
           "zeros_like", "empty_whole", "empty_split",
           "empty_loop", "item_write", "slice_write", "row_write", "column_write",
           "fancy_write", "fancy_repeated", "mask_write", "mask:scalar", "mask:other",
           "mask:self", "mask:inplace", "inplace_whole", "inplace_region", "inplace_fancy",
           "inplace+=", "inplace-=", "inplace*=", "inplace/=", "view_1d", "view_2d",
           "alias", "rebind", "add_at", "add_at_repeated", "out", "recurrence_1d",
           "recurrence_2d", "stencil",
           "loop", "write_argument", "index_loop_variable", "expr:matmul", "sum_axis",
           "scalar:dot", "region:step", "region:block", "view:function",
           "method:fill", "copy:astype", "copy:flatten"]


@pytest.mark.slow
def test_generator_programs_run_and_cover_constructs():
    seen: set = set()

    # (600: in a full run the derandomized draws have differed from a run of this file
    # alone, and the rarest construct was missed at 300)
    @settings(max_examples=600, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(program=programs())
    def run(program):
        module = load(program.rendered(probe=True))
        try:
            args = tuple(v for _, v in program.spec)
            with np.errstate(all="ignore"):
                value, _ = run_probe(module, copies(args))
            assert isinstance(value, float)
        finally:
            os.remove(module.__file__)
        seen.update(program.used)

    run()
    missing = [kind for kind in CLAIMED if kind not in seen]
    assert not missing, f"the program generator never produced {missing}"


@pytest.mark.parametrize("probe", [False, True])
def test_masks_render_for_astad_and_for_the_probe(probe):
    from numpy_programs import Program
    program = Program('def f(x, a):\n    x[__MASK__(x, ">", 0.3)] = a\n'
                      '    return np.sum(x)\n', [], set(), False)
    text = program.rendered(probe)
    assert ('_mask(x, ">", 0.3)' if probe else "(x > 0.3)") in text
    module = load(text)
    try:
        x = np.array([0.1, 0.5, 0.35])
        value, seen = run_probe(module, (x, 2.0)) if probe else (module.f(x, 2.0), None)
        assert value == 0.1 + 2.0 + 2.0
        if probe:
            assert seen.margin == pytest.approx(0.05) and len(seen.masks) == 1
    finally:
        os.remove(module.__file__)


# ---------------------------------------------------------------------------------------
# Regressions: what the fuzzer found, as plain tests.

def copy_with_np_array(x, a):
    c = np.array(x)  # numpy: a new array
    c[0] = a
    return np.sum(np.sin(x)) + a


@pytest.mark.parametrize("mode", ["value_and_grad", "jvp"])
def test_regression_np_array_of_an_argument_is_a_copy(mode):
    x = np.zeros(3)
    if mode == "value_and_grad":
        value, (gx, ga) = astad.value_and_grad(copy_with_np_array, (0, 1))(x, 1.0)
        np.testing.assert_array_equal(gx, np.cos(np.zeros(3)))
        assert ga == 1.0
    else:
        value, tangent = astad.jvp(copy_with_np_array, (x, 1.0), (np.ones(3), 1.0))
        assert tangent == 4.0  # sum(cos(0)) + 1
    assert value == copy_with_np_array(np.zeros(3), 1.0) == 1.0
    np.testing.assert_array_equal(x, np.zeros(3))  # the caller's x untouched


def scale_in_place(x, a):
    t = x * 2.0
    t *= np.tanh(a)  # an array made inside, written in place
    return np.sum(t)


def test_regression_hessian_vector_product_through_an_in_place_multiply():
    x, a = np.array([0.5, 1.0]), 0.3
    # f = 2 tanh(a) sum(x): df/da = 2 sech^2(a) sum(x), d2f/da2 = -4 tanh sech^2 sum(x)
    s2 = 1.0 - np.tanh(a) ** 2
    (gx, ga), (hx, ha) = astad.jvp(astad.grad(scale_in_place, (0, 1)), (x, a),
                                   (np.zeros(2), 1.0))
    assert ga == pytest.approx(2.0 * s2 * 1.5, rel=1e-12)  # astad: 2 tanh s2 sum(x)
    np.testing.assert_allclose(hx, [2.0 * s2, 2.0 * s2], rtol=1e-12)
    assert ha == pytest.approx(-4.0 * np.tanh(a) * s2 * 1.5, rel=1e-12)


def scale_argument_in_place(y, a):
    y *= np.tanh(a)  # a write into the argument
    return y[0]


def test_regression_hessian_vector_product_through_a_write_into_an_argument():
    # f = y0 tanh(a); at y = [1, 0], a = 0: grad = ([0, 0], 1); along a the gradient
    # changes by ([sech^2 a, 0], -2 y0 tanh a sech^2 a) = ([1, 0], 0)
    grad_fn = astad.grad(scale_argument_in_place, (0, 1))
    (gy, ga), (hy, ha) = astad.jvp(grad_fn, (np.array([1.0, 0.0]), 0.0),
                                   (np.zeros(2), 1.0))
    np.testing.assert_array_equal(gy, [0.0, 0.0])
    assert ga == 1.0
    np.testing.assert_array_equal(hy, [1.0, 0.0])
    assert ha == 0.0


def add_at_three_times(x, a):
    np.add.at(x, [0, 0, 0], a)  # numpy: x[0] += a, three times over
    return x[0]


def test_regression_add_at_with_a_repeated_index_rounds_as_numpy():
    x = np.array([1.0, 0.0])
    want = add_at_three_times(x.copy(), 0.1)  # ((1 + 0.1) + 0.1) + 0.1
    assert want == 1.0 + 0.1 + 0.1 + 0.1 != 1.0 + (0.1 + 0.1 + 0.1)
    value, _ = astad.value_and_grad(add_at_three_times, (0, 1))(x, 0.1)
    assert value == want
    assert x[0] == want


def overlapping_slice_write(x):
    x[::2] = x[0:3]  # the value is a view overlapping the region it writes
    return np.sum(x * np.array([1.0, 10.0, 100.0, 1000.0, 10000.0]))


def test_regression_slice_write_from_an_overlapping_view():
    # numpy copies element by element: x[::2] = x[0:3] chains (x[4] gets the new x[2]), so
    # the result is not that of copying the value first; astad refuses it at the line
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    expected = x.copy()
    expected[::2] = expected[0:3]
    np.testing.assert_array_equal(expected, [1.0, 2.0, 2.0, 4.0, 2.0])  # numpy chains
    with pytest.raises(astad.NotDifferentiableError, match=OVERLAP_REFUSAL) as caught:
        astad.value_and_grad(overlapping_slice_write)(x)
    assert caught.value.lineno == overlapping_slice_write.__code__.co_firstlineno + 1
    # where numpy's order gives a copy-first result (a shift), the write is differentiated
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    value, g = astad.value_and_grad(shift_right)(y)
    assert value == shift_right(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    np.testing.assert_array_equal(y, [1.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(g, [1.0 + 10.0, 100.0, 1000.0, 10000.0, 0.0])


def shift_right(x):
    x[1:] = x[:-1]  # overlapping; numpy moves the memory as a copy would
    return np.sum(x * np.array([1.0, 10.0, 100.0, 1000.0, 10000.0]))
