"""Runtime: duals, the tape, the backward sweep, interleave/rebuild/seed."""
import math

import pytest

import astad
from astad.rules.scalar import ad
from astad.runtime.duals import NestedDual, StaleDualError
from astad.runtime.tape import Dual, sweep
from astad.core.boundary import Interleaving, build_gradient, primal, seed


def interleave(value, tape, path="x"):
    return Interleaving(tape).interleave(value, path)[0]


def test_sweep_visits_each_entry_once_in_descending_order():
    # x0, x1 inputs; t2 = x0 * x1; t3 = t2 + x0 ; adjoint of t3 = 1
    tape = [(), (), (0, 3.0, 1, 2.0), (2, 1.0, 0, 1.0)]
    adjoint = [0.0, 0.0, 0.0, 1.0]
    sweep(tape, adjoint, 2, {})
    assert adjoint[:2] == [3.0 + 1.0, 2.0]


def test_primitive_appends_one_entry_with_local_partials():
    tape = []
    x = interleave(2.0, tape, "x")
    y = interleave(5.0, tape, "y")
    z = ad.mul(tape, x, y)
    assert (z.v, z.i) == (10.0, 2)
    assert tape[2] == (0, 5.0, 1, 2.0)
    w = ad.sin(tape, z)
    assert tape[3] == (2, math.cos(10.0))
    assert w.v == math.sin(10.0)


def test_constants_and_ints_never_touch_the_tape():
    tape = []
    assert ad.add(tape, 2, 3) == 5
    assert ad.mul(tape, 2.0, 3.0) == 6.0
    assert ad.sin(tape, 0.5) == math.sin(0.5)
    assert ad.add(tape, [1.0], [2.0]) == [1.0, 2.0]  # Python's own meaning of +
    assert tape == []


def test_mixed_dual_and_constant_records_one_parent():
    tape = []
    x = interleave(3.0, tape, "x")
    z = ad.truediv(tape, 1.0, x)
    assert tape[1] == (0, -(1.0 / 3.0) / 3.0)
    assert z.v == pytest.approx(1 / 3)


def test_dual_compares_hashes_and_formats_by_primal():
    d = Dual(1.5, 0, [])
    assert d < 2 and d > 1.0 and d == 1.5 and 1.5 == d and d != 2.0
    assert hash(d) == hash(1.5)
    assert f"{d:.2f}" == "1.50" and str(d) == "1.5"
    assert bool(Dual(0.0, 0, [])) is False and bool(d) is True
    assert int(d) == 1 and round(d) == 2 and math.floor(d) == 1


def test_dual_refuses_to_lose_its_derivative_outside_the_transform():
    d = Dual(1.5, 0, [])  # a dual of a differentiation that is not running
    with pytest.raises(StaleDualError, match="has returned"):
        float(d)  # (converted outside its call: what is wrong is that it escaped)
    with pytest.raises(StaleDualError, match="has returned"):
        d + 1.0  # a dual that escaped its gradient call
    with pytest.raises(astad.AstadError):
        math.sin(d)


def test_interleave_and_rebuild_mirror_structure():
    tape = []
    arg = [1.0, (2.0, 3), "tag", None, True, {"a": 4.0}]
    dual, plan = Interleaving(tape).interleave(arg, "arg")
    assert len(tape) == 3 and type(dual[1]) is tuple and dual[2] == "tag"
    adjoint = [10.0, 20.0, 30.0]
    g = build_gradient(plan, adjoint, {})
    assert g == [10.0, (20.0, 3), "tag", None, True, {"a": 30.0}]
    assert type(g[1]) is tuple
    assert primal(dual) == arg


def test_interleave_nests_outer_duals():
    outer_tape, tape = [()], []
    outer = Dual(1.0, 0, outer_tape)  # a value of an enclosing differentiation
    d = interleave(outer, tape, "args[0]")
    assert type(d) is NestedDual and d.v is outer and d.t is tape and d.i == 0


def test_seed_checks_cotangent_shape():
    tape = []
    result = interleave([1.0, 2.0], tape, "r")
    adjoint = [0.0, 0.0]
    seed(result, [1.0, None], adjoint, {})
    assert adjoint == [1.0, 0.0]
    with pytest.raises(astad.InputError, match=r"result.*length 2"):
        seed(result, [1.0], adjoint, {})
    with pytest.raises(astad.InputError, match=r"result\[0\].*float"):
        seed(result, ["a", 1.0], adjoint, {})


def test_pow_partials_at_special_points():
    tape = []
    x = interleave(0.0, tape, "x")
    ad.pow(tape, x, 2)
    assert tape[-1] == (0, 0.0)
    ad.pow(tape, x, 0.5)  # sqrt at 0: infinite slope
    assert tape[-1] == (0, math.inf)
    y = interleave(-2.0, tape, "y")
    r = ad.pow(tape, y, 3)
    assert r.v == -8.0 and tape[-1] == (y.i, 12.0)
    with pytest.raises(astad.NotDifferentiableError, match="complex"):
        ad.pow(tape, y, 0.5)


def test_float_attributes_of_a_dual():
    @astad.reverse_diff
    def f(x):
        """Uses float's own attributes."""
        if (x * 2.0).is_integer():
            return x.real * x.conjugate() + x.imag
        return x
    assert f.grad(1.5) == 3.0
    assert "# Uses float" not in f.source
    @astad.reverse_diff
    def g(x):
        return x.hex()
    with pytest.raises(astad.AstadError, match="'hex'"):
        g.grad(1.5)


def test_sweep_and_free_gives_the_sweeps_adjoints_across_chunks():
    # a random tape of several chunks (runtime._SWEEP_CHUNK entries each), entries of one
    # to four parents below themselves: the freeing sweep must add exactly what the
    # keeping sweep adds, and leave only the inputs' slots
    import random

    from astad.runtime import tape as runtime
    rng = random.Random(7)
    n_inputs = 5
    tape = [()] * n_inputs
    for k in range(n_inputs, n_inputs + 3 * runtime._SWEEP_CHUNK + 17):
        entry = ()
        for _ in range(rng.randint(1, 4)):
            entry += (rng.randrange(k), rng.uniform(-2.0, 2.0))
        tape.append(entry)
    kept = [0.0] * len(tape)
    kept[-1] = 1.0
    freed = list(kept)
    sweep(list(tape), kept, n_inputs, {})
    runtime.sweep_and_free(tape, freed, n_inputs, {})
    assert freed == kept and any(freed[:n_inputs])
    assert len(tape) == n_inputs


def test_one_shot_gradients_free_the_tape_and_keep_custom_entries_working():
    # value_and_grad sweeps and frees its tape chunk by chunk; a custom_vjp entry with a
    # structured result (its slots only note that the entry must run) far below the top
    # must still run, and a pullback, which keeps its tape, must give the same twice
    @astad.custom_vjp
    def polar(r, t):
        return (r * math.cos(t), r * math.sin(t))

    def polar_fwd(r, t):
        return polar(r, t), (r, t)

    def polar_bwd(residuals, g):
        r, t = residuals
        gx, gy = g
        return (gx * math.cos(t) + gy * math.sin(t),
                -gx * r * math.sin(t) + gy * r * math.cos(t))

    polar.defvjp(polar_fwd, polar_bwd)

    def f(r, t, w):
        x, y = polar(r, t)
        s = 0.0
        for _ in range(700):  # several chunks of entries above the custom one
            s = s + w * x
        return s + y * w

    g = astad.reverse_diff(f)
    r, t, w = 1.5, 0.3, 0.7
    # f = 700 w r cos t + w r sin t
    expected = (700 * w * math.cos(t) + w * math.sin(t),
                -700 * w * r * math.sin(t) + w * r * math.cos(t),
                700 * r * math.cos(t) + r * math.sin(t))
    value, grads = g.value_and_grad(r, t, w)
    assert value == pytest.approx(700 * w * r * math.cos(t) + w * r * math.sin(t), rel=1e-12)
    assert grads == pytest.approx(expected, rel=1e-12)
    _, pullback = g.vjp(r, t, w)
    assert pullback(1.0) == pytest.approx(expected, rel=1e-12)
    assert pullback(2.0) == pytest.approx(tuple(2 * e for e in expected), rel=1e-12)


def test_specialised_float_code_frees_its_tape_and_stays_exact():
    # the float-specialised loop code (specialise/loops.py) sweeps through gradient_of, which
    # frees its tape chunk by chunk: a dot product of 1000 (several chunks) still has
    # gradient (ys, xs) exactly
    def dot(xs, ys):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * ys[i]
        return s

    xs = [0.001 * k - 0.3 for k in range(1000)]
    ys = [math.sin(k) for k in range(1000)]
    f = astad.reverse_diff(dot)
    assert "_floats(" in f.source  # the specialised code exists for these arguments
    value, (gx, gy) = f.value_and_grad(xs, ys)
    assert value == dot(xs, ys)
    assert gx == ys and gy == xs


def _central_differences(f, args, h=1e-6):
    grads = []
    for k in range(len(args)):
        up, down = list(args), list(args)
        up[k] += h
        down[k] -= h
        grads.append((f(*up) - f(*down)) / (2 * h))
    return grads


def test_flat_tape_pads_narrow_entries_and_splits_wide_ones():
    # the specialised code's flat tape gives every entry the same number of (slot,
    # partial) pairs: here 4 (at most 4; the loop has a six-parent entry, split), the
    # one-parent entry padded, and the eight-parent return entry split twice
    def wide(a, b, c, d, e):
        s = 0.0
        t = 0.0
        for k in range(3):
            s = s + a * b + c * d * e + k * a
            t = s * 0.5
        return s + t * a * b * c * d * e + a / b - math.sin(c)

    f = astad.reverse_diff(wide)
    args = (0.7, 1.3, -0.4, 0.9, 1.1)
    value, grads = f.value_and_grad(*args)
    assert "4 (slot, partial) pairs" in f.source and "_vlast, 1.0)\n" in f.source
    assert "_vsink, 0.0)\n" in f.source  # a padded entry
    # the dual path's tape of tuples, one per entry of its own width, agrees
    _, pullback = f.vjp(*args)
    assert value == wide(*args)
    assert grads == pytest.approx(pullback(1.0), rel=1e-13, abs=1e-15)
    assert grads == pytest.approx(_central_differences(wide, args), rel=1e-6)


def test_flat_tape_of_one_parent_entries_widens_for_a_split():
    # every entry in the loop has one parent, so the width would be 1, but the return
    # entry has three: the width is 2 and that entry is split
    def chain(x, y, z):
        for _ in range(5):
            x = math.sin(x)
        return x * y * z

    f = astad.reverse_diff(chain)
    args = (0.3, 2.0, -1.5)
    value, grads = f.value_and_grad(*args)
    assert "2 (slot, partial) pairs" in f.source and "_vlast, 1.0)\n" in f.source
    x = 0.3
    dx = 1.0
    for _ in range(5):
        dx *= math.cos(x)
        x = math.sin(x)
    assert value == chain(*args)
    assert grads == pytest.approx((dx * 2.0 * -1.5, x * -1.5, x * 2.0), rel=1e-14)
