"""Transform and codegen: the generated source (snapshots), determinism, locations."""
import math
import textwrap
import traceback

import pytest

import astad
from astad import codegen


def figure1(x, y):
    z = x + y
    return x * z


def dot(xs, ys):
    s = 0.0
    for i in range(len(xs)):
        s += xs[i] * ys[i]
    return s


def branchy(x, n):
    k = 0
    while k < n:
        k += 1
        if x > 1.0:
            x = math.sqrt(x)
        else:
            return -x
    return x ** 2 + abs(x)


def clashing(_tape, ad):
    return _tape * ad


SNAPSHOTS = {
    figure1: '''
        def figure1(_tape, x, y):
            # z = x + y
            z = ad.add(_tape, x, y)
            # return x * z
            return ad.mul(_tape, x, z)
    ''',
    dot: '''
        def dot(_tape, xs, ys):
            # s = 0.0
            s = 0.0
            # for i in range(len(xs)):
            for i in range(len(xs)):
                # s += xs[i] * ys[i]
                s = ad.iadd(_tape, s, ad.mul(_tape, xs[i], ys[i]))
            # return s
            return s
    ''',
    branchy: '''
        def branchy(_tape, x, n):
            # k = 0
            k = 0
            # while k < n:
            while k < n:
                # k += 1
                k = k + 1
                # if x > 1.0:
                if x > 1.0:
                    # x = math.sqrt(x)
                    x = ad.sqrt(_tape, x)
                else:
                    # return -x
                    return ad.neg(_tape, x)
            # return x ** 2 + abs(x)
            return ad.add(_tape, ad.pow(_tape, x, 2), ad.abs(_tape, x))
    ''',
    clashing: '''
        def clashing(_tape_, _tape, ad):
            # return _tape * ad
            return ad_.mul(_tape_, _tape, ad)
    ''',
}


@pytest.mark.parametrize("fn", list(SNAPSHOTS), ids=lambda f: f.__name__)
def test_generated_source_snapshot_one_entry_per_operation(fn):
    source = codegen.build(fn, preaccumulate=False).source
    assert source == textwrap.dedent(SNAPSHOTS[fn]).lstrip()


DOT_PREACCUMULATED = '''
    def dot(_tape, xs, ys):
        # s = 0.0
        s = 0.0
        # for i in range(len(xs)):
        for i in range(len(xs)):
            # s += xs[i] * ys[i]
            s = _line20(_tape, s, xs[i], ys[i])
        # return s
        return s


    # line 20, preaccumulated: s += xs[i] * ys[i]
    # one tape entry with the partials of the whole expression
    def _line20(tape, a0, a1, a2):
        if type(a0) is Dual and type(a1) is Dual and (type(a2) is Dual):
            x0 = a0.v
            x1 = a1.v
            x2 = a2.v
            t0 = x1 * x2
            t1 = x0 + t0
            d = new(Dual)
            d.v = t1
            d.i = len(tape)
            tape.append((a0.i, 1.0, a1.i, x2, a2.i, x1))
            return d
        x = ad.primals(a0, a1, a2)
        if x is None:
            return ad.iadd(tape, a0, ad.mul(tape, a1, a2))
        x0, x1, x2 = x
        t0 = x1 * x2
        t1 = x0 + t0
        return ad.record(tape, t1, a0, 1.0, a1, x2, a2, x1)
'''


def test_generated_source_snapshot_preaccumulated():
    assert dot.__code__.co_firstlineno + 3 == 20  # the snapshot names the rule by line
    assert codegen.build(dot).source == textwrap.dedent(DOT_PREACCUMULATED).lstrip()


def test_generated_source_is_deterministic():
    assert codegen.build(branchy).source == codegen.build(branchy).source
    assert astad.reverse_diff(branchy).source == codegen.build(branchy).source


def test_names_that_clash_with_astads_still_differentiate():
    f = astad.reverse_diff(clashing)
    assert f.grad(3.0, 4.0) == (4.0, 3.0)


def test_int_loop_counter_and_constants_stay_plain_python():
    source = codegen.build(branchy, preaccumulate=False).source
    assert "k = k + 1" in source and "while k < n" in source


def test_traceback_through_generated_code_points_at_user_line():
    def fails(x):
        y = x * 2.0
        return math.log(y - 10.0)
    f = astad.reverse_diff(fails)
    with pytest.raises(ValueError, match="math domain error") as info:
        f.grad(1.0)
    frames = traceback.extract_tb(info.tb)
    user = [fr for fr in frames if fr.name == "fails"]
    assert user and user[-1].filename == __file__
    assert user[-1].line == "return math.log(y - 10.0)"


def test_generated_function_shares_the_users_closure_cells():
    scale = 2.0

    def f(x):
        return x * scale
    g = astad.reverse_diff(f)
    assert g.grad(1.0) == 2.0
    scale = 5.0  # noqa: F841 - rebinding the closure variable is seen by the generated code
    assert g.grad(1.0) == 5.0


def test_rebinding_a_resolved_global_retransforms():
    namespace = {}
    exec(compile("import math\nsin = math.sin\n", __file__, "exec"), namespace)
    # a function whose global 'sin' is later rebound to cos
    code = compile("def h(x):\n    return sin(x)\n", "<h>", "exec")
    exec(code, namespace)
    entry = codegen.Transformed(None, "", [(namespace, "sin", math.sin)])
    assert entry.still_valid()
    namespace["sin"] = math.cos
    assert not entry.still_valid()


def test_nested_defs_lambdas_and_comprehensions_share_the_tape():
    def f(x, ys):
        def scaled(y):
            return y * x
        squares = [scaled(y) ** 2 for y in ys]
        total = sum(squares)
        return total + max(map(lambda t: t * x, ys))
    g = astad.reverse_diff(f)
    x, ys = 1.5, [1.0, 2.0, 3.0]
    # total = x^2 * sum(y^2) = 14 x^2; max term = 3 x
    assert g.grad(x, ys)[0] == pytest.approx(28 * x + 3.0)
    assert g.grad(x, ys)[1] == pytest.approx([2 * x * x * y for y in ys[:2]] + [2 * x * x * 3 + x])
