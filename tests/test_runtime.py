"""Runtime: duals, the tape, the backward sweep, interleave/rebuild/seed."""
import math

import pytest

import astad
from astad.primitives import ad
from astad.runtime import Dual, sweep
from astad.structure import Interleaving, build_gradient, primal, seed


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
    d = Dual(1.5, 0)
    assert d < 2 and d > 1.0 and d == 1.5 and 1.5 == d and d != 2.0
    assert hash(d) == hash(1.5)
    assert f"{d:.2f}" == "1.50" and str(d) == "1.5"
    assert bool(Dual(0.0, 0)) is False and bool(d) is True
    assert int(d) == 1 and round(d) == 2 and math.floor(d) == 1


def test_dual_refuses_to_lose_its_derivative_outside_the_transform():
    d = Dual(1.5, 0)
    with pytest.raises(astad.AstadError, match="plain float"):
        float(d)
    with pytest.raises(astad.AstadError, match="outside a gradient call"):
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


def test_interleave_rejects_complex_and_outer_duals():
    with pytest.raises(astad.InputError, match="complex"):
        interleave([1j], [], "args[0]")
    with pytest.raises(astad.InputError, match="higher-order"):
        interleave(Dual(1.0, 0), [], "args[0]")


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
