"""Transform and codegen: the generated source (snapshots), determinism, locations."""
import math
import textwrap
import traceback

import pytest

import astad
from astad.compile import calls as codegen


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
                    x = (ad.sqrt if math.sqrt is _sqrt else ad.rev(math.sqrt))(_tape, x)
                else:
                    # return -x
                    return ad.neg(_tape, x)
            # return x ** 2 + abs(x)
            return ad.add(_tape, ad.pow(_tape, x, 2), (ad.abs if abs is _abs else ad.rev(abs))(_tape, x))
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
    from printed_code import assert_same_code  # (here: a line above would move `dot`)
    assert_same_code(source, textwrap.dedent(SNAPSHOTS[fn]).lstrip())


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
        if type(a0) is Dual and type(a1) is Dual and (type(a2) is Dual) and (a0.t is a1.t is a2.t is tape):
            x0 = a0.v
            x1 = a1.v
            x2 = a2.v
            t0 = x1 * x2
            t1 = x0 + t0
            d = new(Dual)
            d.v = t1
            d.i = len(tape)
            d.t = tape
            tape.append((a0.i, 1.0, a1.i, x2, a2.i, x1))
            return d
        x = ad.primals(tape, a0, a1, a2)
        if x is None:
            return ad.iadd(tape, a0, ad.mul(tape, a1, a2))
        x0, x1, x2 = x
        t0 = x1 * x2
        t1 = x0 + t0
        return ad.record(tape, t1, a0, 1.0, a1, x2, a2, x1)
'''


DOT_SPECIALISED = '''
    # specialised for float arguments: value_and_grad and grad run this when every argument is a list of floats
    def dot_floats(xs, ys):
        # every argument a list of floats: each float is a local and its tape index
        _vexact = ad.float_lists(xs, ys)
        if not _vexact and not ad.float_sequences((xs, ys), ()):
            return None  # not lists of floats: the transformed code runs instead
        _vlists = (xs, ys)
        if len(set(map(id, _vlists))) != len(_vlists):
            return None  # a list reached twice: the transformed code keeps the aliasing
        _vn_xs = len(xs)
        _vn_ys = len(ys)
        _vat_ys = _vn_xs
        _vsink = _vat_ys + _vn_ys  # the slot of constants: the sweep stops above it
        _vlayout = ((0, _vn_xs), (_vat_ys, _vn_ys)) if _vexact else ((0, _vn_xs, xs), (_vat_ys, _vn_ys, ys))
        _tape = ad.float_tape()  # the entries, one after another: 3 (slot, partial) pairs each
        _record = _tape.record
        _vlast = _vsink  # the index of the last entry
        # s = 0.0
        s = 0.0
        s_i = _vsink
        # for i in range(len(xs)):
        for i in range(len(xs)):
            # s += xs[i] * ys[i]
            _vx0 = xs[i]
            _vx1 = ys[i]
            _record(s_i, 1.0, i, _vx1, _vat_ys + i, _vx0)
            _vlast += 1
            s = s + _vx0 * _vx1
            s_i = _vlast
        # return s
        return ad.tape_gradient_of(_tape, 3, s, s_i, _vsink, _vlayout)
'''


def test_generated_source_snapshot_preaccumulated():
    assert dot.__code__.co_firstlineno + 3 == 20  # the snapshot names the rule by line
    from printed_code import assert_same_code
    assert_same_code(codegen.build(dot).source, textwrap.dedent(DOT_PREACCUMULATED).lstrip()
                     + "\n" + textwrap.dedent(DOT_SPECIALISED))


def test_generated_source_is_deterministic():
    assert codegen.build(branchy).source == codegen.build(branchy).source
    shown = astad.reverse_diff(branchy).source
    assert shown == astad.reverse_diff(branchy).source
    # the paper's transform first, then what runs, named as such (codegen.readable_source)
    paper = codegen.build(branchy, preaccumulate=False).source
    assert shown.startswith(paper.rstrip("\n"))
    assert "\n# what runs: the same, with each float expression one tape entry" in shown
    assert codegen.build(branchy).source.rstrip("\n") in shown


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
    from astad.compile.entry import Entry
    h = namespace["h"]
    entry = Entry(h, None, [(namespace, "sin", math.sin)], "")
    assert entry.is_current(h)
    namespace["sin"] = math.cos
    assert not entry.is_current(h)


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


# -- straight-line functions of floats: value and gradient without a tape (specialise/straight_line.py)

def rotate_x(q0, q1, q2, q3, v0, v1, v2):
    s = q3
    udotv = q0 * v0 + q1 * v1 + q2 * v2
    udotu = q0 * q0 + q1 * q1 + q2 * q2
    cross_x = q1 * v2 - q2 * v1
    return 2.0 * udotv * q0 + (s * s - udotu) * v0 + 2.0 * s * cross_x


def mixed_ops(x, y, z):
    """A docstring is allowed."""
    a = math.sin(x) * y - z / 2
    b = -a ** 3 + math.exp(y * z)
    a = a + b * math.log(z)  # a reassigned: the earlier value stays in use above
    k = 2
    return math.tanh(a) * k + b / x


def unused_sqrt(x):
    y = math.sqrt(x)
    return 0.0 * y + x


STRAIGHT_CASES = [
    (figure1, (1.5, -2.0)),
    (rotate_x, (1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7)),
    (mixed_ops, (0.7, -0.3, 1.9)),
    (unused_sqrt, (0.0,)),
]


@pytest.mark.parametrize("fn, args", STRAIGHT_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_straight_line_code_agrees_with_the_tape(fn, args):
    entry = codegen.build(fn)
    assert entry.tapeless is not None
    fast = astad.reverse_diff(fn)
    taped = astad.reverse_diff(fn, preaccumulate=False)
    value, grads = fast.value_and_grad(*args)
    want_value, want_grads = taped.value_and_grad(*args)
    assert value == want_value
    want_grads = want_grads if isinstance(want_grads, tuple) else (want_grads,)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert grads == pytest.approx(want_grads, rel=1e-13, abs=1e-15)
    # and the vjp (always the tape) agrees with it
    _, pullback = fast.vjp(*args)
    again = pullback(1.0)
    assert (again if isinstance(again, tuple) else (again,)) == pytest.approx(grads, rel=1e-13)


def test_straight_line_rotate_hand_values():
    value, grads = astad.reverse_diff(rotate_x).value_and_grad(1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7)
    assert value == pytest.approx(71.874)
    assert grads == pytest.approx((91.96, 58.08, -77.44, 38.72, 4.84, -24.2, 26.62))


def test_straight_line_mixed_ops_against_finite_differences():
    args = [0.7, -0.3, 1.9]
    grads = astad.reverse_diff(mixed_ops).grad(*args)
    for k in range(3):
        h = 1e-6
        plus, minus = list(args), list(args)
        plus[k] += h
        minus[k] -= h
        fd = (mixed_ops(*plus) - mixed_ops(*minus)) / (2 * h)
        assert grads[k] == pytest.approx(fd, rel=1e-6)


def test_straight_line_zero_adjoint_skips_an_infinite_partial():
    # d/dx sqrt(x) is inf at 0, but its adjoint is 0: the sweep contributes nothing
    assert astad.reverse_diff(unused_sqrt).grad(0.0) == 1.0


def test_straight_line_falls_back_for_non_float_arguments():
    f = astad.reverse_diff(figure1)
    assert f.grad(2, 3.0) == astad.reverse_diff(figure1, preaccumulate=False).grad(2, 3.0)
    assert f.grad(np_float := type("F", (float,), {})(2.0), 3.0) == (7.0, 2.0)
    assert type(np_float) is not float


def test_straight_line_argnums_select_gradients():
    assert astad.reverse_diff(figure1, argnums=1).grad(1.5, -2.0) == 1.5
    assert astad.reverse_diff(figure1, argnums=(1, 0)).grad(1.5, -2.0) == (1.5, 1.0)
    assert astad.reverse_diff(figure1, argnums=(0,)).grad(1.5, -2.0) == (1.0,)


def test_straight_line_errors_are_the_primals_at_the_users_line():
    def divides(x, y):
        z = x * y
        return x / (z - z)
    f = astad.reverse_diff(divides)
    assert codegen.build(divides).tapeless is not None
    with pytest.raises(ZeroDivisionError) as info:
        f.grad(1.0, 2.0)
    frames = [fr for fr in traceback.extract_tb(info.tb) if fr.filename == __file__]
    assert frames[-1].line == "return x / (z - z)"


def test_only_straight_line_bodies_get_the_tapeless_code():
    def iterates(xs):
        total = 0.0
        for x in xs:  # a loop: the specialised code keeps a tape
            total = total + x
        return total
    entry = codegen.build(iterates)
    assert entry.tapeless is not None and entry.tapes
    assert astad.reverse_diff(iterates).grad([1.0, 2.0, 3.0]) == [1.0, 1.0, 1.0]
    assert codegen.build(figure1, preaccumulate=False).tapeless is None

    def calls_user_code(x):  # figure1 inlined: 2 x (x + x) = 4 x^2
        return figure1(x, x) * 2.0
    assert codegen.build(calls_user_code).tapeless is not None
    assert astad.reverse_diff(calls_user_code).grad(1.5) == 12.0

    def returns_its_argument(x):
        return x
    assert astad.reverse_diff(returns_its_argument).grad(3.0) == 1.0


def test_straight_line_code_follows_a_rebound_global(tmp_path, monkeypatch):
    (tmp_path / "straight_rebind.py").write_text(
        "import math\nsin = math.sin\n\n\ndef h(x):\n    y = sin(x) * 2.0\n    return y * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import straight_rebind
    h = astad.reverse_diff(straight_rebind.h)
    assert codegen.build(straight_rebind.h).tapeless is not None
    x = 0.5
    assert h.grad(x) == pytest.approx(2 * math.cos(x) * x + 2 * math.sin(x))
    straight_rebind.sin = math.cos
    assert h.grad(x) == pytest.approx(-2 * math.sin(x) * x + 2 * math.cos(x))


FIGURE1_STRAIGHT = '''
    # specialised for float arguments: value_and_grad and grad run this when every argument is a float
    def figure1_floats(x, y):
        # every argument a float: the forward pass, then its sweep written out (no tape)
        _vfloats = type(x) is float and type(y) is float
        if not _vfloats:
            if not (type(x) in ad.numbers and type(y) in ad.numbers):
                return None  # other arguments: the transformed code runs instead
            if type(x) in ad.integers and type(y) in ad.integers:
                return None  # no float: the transformed code says so
        # z = x + y
        _vt0 = x + y
        # return x * z
        _vt2 = x * _vt0
        # backward: the sweep of the entries above, last first
        dx = dy = _vd1 = 0.0
        # return x * z
        dx += _vt0
        _vd1 += x
        # z = x + y
        if _vd1:
            dx += _vd1
            dy += _vd1
        if not _vfloats:
            return _vt2, (ad.number_gradient(x, dx), ad.number_gradient(y, dy))
        return _vt2, (dx, dy)
'''


def test_straight_line_source_snapshot():
    source = codegen.build(figure1).source
    assert source.endswith(textwrap.dedent(FIGURE1_STRAIGHT))
    assert source.rstrip("\n") in astad.reverse_diff(figure1).source



# -- scalar code with loops and branches, specialised for float arguments (specialise/loops.py)

def euler(v0, angle):
    dt = 0.05
    k = 0.01
    vx = v0 * math.cos(angle)
    vy = v0 * math.sin(angle)
    x = 0.0
    y = 0.0
    while y >= 0.0:
        speed = math.sqrt(vx * vx + vy * vy)
        x = x + vx * dt
        y = y + vy * dt
        vx = vx - k * speed * vx * dt
        vy = vy - (9.81 + k * speed * vy) * dt
    return x


def branches_and_counters(x, y):
    total = 0.0
    acc = y
    for i in range(7):
        if i % 3 == 0:
            continue
        if x * i > 2.5 and not acc < -10.0:
            acc = acc * 0.5 + math.tanh(x * acc)
        elif i == 5:
            break
        else:
            acc = -acc + x ** 2 / (1.0 + y * y)
        total += acc * x
    n = 0
    while n < 3:
        n += 1
        total = total - math.exp(-total * 0.01) * n
    return total + acc


def read_before_written(x):
    y = 1.0
    for i in range(4):
        if i > 1:
            y = y * z  # noqa: F821 (z is written below, in an earlier iteration)
        z = x + i  # noqa: F841
    return y


def constant_result_on_a_branch(x):
    for _ in range(2):
        if x > 0.0:
            return 2.0
    return x * x


SCALAR_LOOP_CASES = [
    (euler, (20.0, 0.7)),
    (branchy, (9.0, 3.0)),
    (branchy, (0.5, 3.0)),
    (branches_and_counters, (0.9, -0.4)),
    (branches_and_counters, (1.7, 2.3)),
    (read_before_written, (1.3,)),
    (constant_result_on_a_branch, (1.5,)),
    (constant_result_on_a_branch, (-1.5,)),
]


@pytest.mark.parametrize("fn, args", SCALAR_LOOP_CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_scalar_loop_code_agrees_with_the_tape(fn, args):
    assert codegen.build(fn).tapeless is not None
    fast = astad.reverse_diff(fn)
    value, grads = fast.value_and_grad(*args)
    want_value, want_grads = fast.value_and_grad.__self__._value_and_grad_taped(args, {})
    assert value == want_value
    assert grads == pytest.approx(want_grads, rel=1e-13, abs=1e-300)
    # and the plain algorithm, one entry per operation
    unfused = astad.reverse_diff(fn, preaccumulate=False).value_and_grad(*args)
    assert unfused[1] == pytest.approx(grads, rel=1e-12)


def test_scalar_loop_code_against_finite_differences():
    args = [0.9, -0.4]
    grads = astad.reverse_diff(branches_and_counters).grad(*args)
    for k in range(2):
        h = 1e-6
        plus, minus = list(args), list(args)
        plus[k] += h
        minus[k] -= h
        fd = (branches_and_counters(*plus) - branches_and_counters(*minus)) / (2 * h)
        assert grads[k] == pytest.approx(fd, rel=1e-6)


def test_scalar_loop_code_falls_back_for_an_int_argument():
    f = astad.reverse_diff(branchy)
    # three square roots: x = 9^(1/8), result x^2 + x
    want = 0.125 * 9.0 ** -0.875 * (2.0 * 9.0 ** 0.125 + 1.0)
    assert f.grad(9.0, 3) == (pytest.approx(want, rel=1e-14), None)  # (an int: None)
    assert f.grad(9.0, 3.0) == (pytest.approx(want, rel=1e-14), 0.0)


def test_scalar_loop_code_inlines_calls_and_reads_global_constants(monkeypatch):
    def calls_user_code(x):
        for _ in range(2):
            x = figure1(x, x)
        return x

    def reads_a_global(x):
        for _ in range(2):
            x = x * SCALE
        return x
    assert codegen.build(calls_user_code).tapeless is not None
    assert codegen.build(reads_a_global).tapeless is not None
    # figure1(x, x) = 2 x^2, twice: 8 x^4, derivative 32 x^3
    assert astad.reverse_diff(calls_user_code).grad(0.5) == pytest.approx(4.0, rel=1e-15)
    f = astad.reverse_diff(reads_a_global)
    assert f.grad(2.0) == 9.0
    monkeypatch.setitem(globals(), "SCALE", 2.0)  # the code is written again
    assert f.grad(2.0) == 4.0


SCALE = 3.0


def test_scalar_loop_code_raises_the_primals_errors():
    def divides(x):
        for i in range(3):
            x = x / (i - 1)
        return x
    with pytest.raises(ZeroDivisionError) as info:
        astad.reverse_diff(divides).grad(1.0)
    frames = [fr for fr in traceback.extract_tb(info.tb) if fr.filename == __file__]
    assert frames[-1].line == "x = x / (i - 1)"



# -- read-only list arguments in specialised scalar code

def indexed(xs, ys, c):
    total = c * xs[-1]
    for i in range(len(xs)):
        if xs[i] > ys[i - 1]:
            total = total + xs[i] * ys[i] / (1.0 + c * c)
        else:
            total = total - math.sin(ys[-i]) * c
    return total


def reads_past_the_end(xs):
    total = 0.0
    for i in range(len(xs) + 1):
        total = total + xs[i] * 2.0
    return total


LIST_CASES = [
    (dot, ([0.5, -1.5, 2.0], [3.0, 0.25, -1.0])),
    (indexed, ([0.5, -1.5, 2.0, 0.1], [3.0, 0.25, -1.0, 0.7], 1.3)),
    (indexed, ([0.9], [0.3], -0.6)),
]


@pytest.mark.parametrize("fn, args", LIST_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_list_arguments_in_specialised_code_agree_with_the_tape(fn, args):
    assert codegen.build(fn).tapeless is not None
    fast = astad.reverse_diff(fn)
    value, grads = fast.value_and_grad(*args)
    want_value, want_grads = fast.value_and_grad.__self__._value_and_grad_taped(args, {})
    assert value == want_value
    assert type(grads) is tuple and [type(g) for g in grads] == [type(a) for a in args]
    for got, want in zip(grads, want_grads):
        assert got == pytest.approx(want, rel=1e-13, abs=1e-300)


def test_dot_gradient_with_list_arguments_by_hand():
    assert astad.reverse_diff(dot).grad([1.0, 2.0], [3.0, 4.0]) == ([3.0, 4.0], [1.0, 2.0])


def test_list_arguments_that_do_not_fit_take_the_ordinary_path():
    f = astad.reverse_diff(dot)
    xs = [1.0, 2.0]
    assert f.grad(xs, xs) == f.value_and_grad.__self__._value_and_grad_taped((xs, xs), {})[1]
    # an int element is a constant: its place in the gradient holds the argument's value
    assert f.grad([1, 2.0], [3.0, 4.0]) == ([1, 4.0], [1.0, 2.0])
    assert f.grad((1.0, 2.0), [3.0, 4.0]) == ((3.0, 4.0), [1.0, 2.0])  # a tuple
    assert f.grad([], []) == ([], [])


def test_an_index_past_the_end_raises_as_the_primal_does():
    with pytest.raises(IndexError):
        astad.reverse_diff(reads_past_the_end).grad([1.0, 2.0])



def sum_matvec(m, v):
    s = 0.0
    for i in range(len(m)):
        row = m[i]
        r = 0.0
        for j in range(len(row)):
            r = r + row[j] * v[j]
        s = s + r * m[i][-1]
    return s


@pytest.mark.parametrize("m, v", [
    ([[1.0, 2.0], [3.0, -4.0]], [0.5, -1.5]),
    ([[1.0], [3.0, -4.0, 0.25], []], [0.5, -1.5, 2.0]),  # ragged rows
], ids=["square", "ragged"])
def test_lists_of_lists_in_specialised_code_agree_with_the_tape(m, v):
    f = astad.reverse_diff(sum_matvec)
    if not all(m):  # an empty row: m[i][-1] raises, as in the primal
        with pytest.raises(IndexError):
            f.grad(m, v)
        return
    assert codegen.build(sum_matvec).tapeless is not None
    value, (gm, gv) = f.value_and_grad(m, v)
    want_value, (wm, wv) = f.value_and_grad.__self__._value_and_grad_taped((m, v), {})
    assert value == want_value
    assert [len(row) for row in gm] == [len(row) for row in m]
    for got, want in zip(gm + [gv], wm + [wv]):
        assert got == pytest.approx(want, rel=1e-13, abs=1e-300)


def test_lists_of_lists_with_a_shared_row_take_the_ordinary_path():
    f = astad.reverse_diff(sum_matvec)
    row = [1.0, 2.0]
    m, v = [row, row], [0.5, -1.5]
    assert f.grad(m, v) == f.value_and_grad.__self__._value_and_grad_taped((m, v), {})[1]
    assert f.grad([[1.0, 2.0]], row) == \
        f.value_and_grad.__self__._value_and_grad_taped(([[1.0, 2.0]], row), {})[1]


def test_specialised_code_never_takes_a_differentiated_value_for_a_constant():
    from astad.front import activity as activity_module

    def f(x):
        k = 0.0
        for _ in range(3):
            k = x * 2.0  # a float from x: active
        return k * x
    # even if the analysis wrongly called k constant, the specialised code refuses it
    original = activity_module.Activity.scalar_inactive

    def wrong(self, node):
        return True if isinstance(node, gast.BinOp) else original(self, node)
    import gast
    activity_module.Activity.scalar_inactive = wrong
    try:
        entry = codegen.build(f)
    finally:
        activity_module.Activity.scalar_inactive = original
    assert entry.tapeless is None
    assert astad.reverse_diff(f).grad(1.5) == 4 * 1.5


# -- calls of global functions: resolved at transform time, rebuilt when they change --

CALLEES_MODULE = '''
import dataclasses


@dataclasses.dataclass
class Point:
    x: float
    y: float


def square(x):
    return x * x


def cube(x):
    return x * x * x


def through_square(x):
    return square(x)


def twice_square(x):
    return 2.0 * square(x)


def f(p):
    q = Point(p.x * 2.0, p.y)
    return through_square(q.x) + square(q.y)


def even(x, n):
    return x if n == 0 else odd(x * 1.5, n - 1)


def odd(x, n):
    return x if n == 0 else even(x * x, n - 1)


def depth(x, n):
    return x if n == 0 else depth(x * x, n - 1)
'''


@pytest.fixture
def callees(tmp_path, monkeypatch):
    (tmp_path / "astad_callees.py").write_text(CALLEES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import astad_callees
    yield astad_callees
    del __import__("sys").modules["astad_callees"]


def test_calls_of_global_functions_are_direct_and_follow_changes(callees):
    f = astad.reverse_diff(callees.f)
    p = callees.Point(1.5, 0.5)
    value, g = f.value_and_grad(p)
    # f = (2x)^2 + y^2
    assert value == pytest.approx(9.25) and (g.x, g.y) == pytest.approx((12.0, 1.0))
    source = codegen.transformed(f).source
    # called directly, each checked where it is called (a global rebound during the call)
    assert "(D_through_square if through_square is _through_square else " \
        "ad.rev(through_square))(_tape, " in source
    assert "(D_square if square is _square else ad.rev(square))(_tape, " in source
    assert "q = Point(" in source and source.count("ad.rev(") == source.count("else ad.rev(")

    callees.square = callees.cube  # a callee's callee rebound: f = (2x)^3 + y^3
    value, g = f.value_and_grad(p)
    assert value == pytest.approx(27.125) and (g.x, g.y) == pytest.approx((54.0, 0.75))

    # a callee's code replaced (as IPython's autoreload does): f = 2 (2x)^3 + y^3
    callees.through_square.__code__ = callees.twice_square.__code__
    value, g = f.value_and_grad(p)
    assert value == pytest.approx(54.125) and (g.x, g.y) == pytest.approx((108.0, 0.75))

    # a derivative registered for a callee after its first use is the one used
    astad.register_scalar(callees.cube, lambda x: 0.0)
    value, g = f.value_and_grad(p)
    assert value == pytest.approx(54.125) and (g.x, g.y) == (0.0, 0.0)


def test_recursion_and_mutual_recursion_through_global_functions(callees):
    even, depth = astad.reverse_diff(callees.even), astad.reverse_diff(callees.depth)
    x = 0.8
    # even(x, 3) = 1.5 (1.5 x)^2 = 3.375 x^2
    assert even.grad(x, 3)[0] == pytest.approx(6.75 * x)
    # depth(x, 3) = x^8
    assert depth.grad(x, 3)[0] == pytest.approx(8 * x ** 7)
    # the module's depth (not the decorated copy) calls itself directly
    assert "(D_depth if depth is _depth else ad.rev(depth))(_tape, " in codegen.transformed(
        callees.depth).source
    even_source = codegen.transformed(callees.even).source
    odd_source = codegen.transformed(callees.odd).source
    # one of the pair was still being built when the other was: found at run time
    assert ("D_odd if odd is _odd" in even_source) != ("D_even if even is _even" in odd_source)



def test_a_callees_new_defaults_rebuild_its_callers(tmp_path, monkeypatch):
    # D[f] copies f's defaults when it is built: new defaults must rebuild it and the
    # callers that call it directly, as a plain call would use them
    (tmp_path / "astad_defaults.py").write_text(
        "def scaled(x, c=2.0):\n    return c * x\n\n\n"
        "def uses_scaled(x):\n    return scaled(x) + x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import astad_defaults as module
    f = astad.reverse_diff(module.uses_scaled)
    assert f.value_and_grad(3.0) == (9.0, 3.0)
    module.scaled.__defaults__ = (5.0,)
    assert f(3.0) == 18.0
    assert f.value_and_grad(3.0) == (18.0, 6.0)
    assert f.vjp(3.0)[1](1.0) == 6.0
    del __import__("sys").modules["astad_defaults"]


def test_specialised_code_reads_an_element_slot_before_rebinding_its_index():
    # k = xs[k]: the element's tape slot uses the old k (an int), not the new float
    def hop(xs, x):
        k = 1
        for _ in range(1):
            k = xs[k]
        return k * x

    f = astad.reverse_diff(hop)
    assert "_floats(" in f.source
    xs = [3.0, 1.0]
    assert f.value_and_grad(xs, 2.0) == (2.0, ([0.0, 2.0], 1.0))
    assert f.vjp(xs, 2.0)[1](1.0) == ([0.0, 2.0], 1.0)


def test_specialised_code_calls_in_tests_only_what_the_user_calls(tmp_path, monkeypatch):
    # a test's call is written as the user wrote it into a function whose globals are the
    # rules' namespace: it must name the same function there, or the code is not used
    (tmp_path / "astad_test_calls.py").write_text(textwrap.dedent('''
        import math as m


        def gamma(x):  # the user's own, named like math.gamma
            return 2.0 * x


        def with_alias(x):
            t = x
            while m.sin(t) < 0.9:
                t = t * 1.1
            return t


        def with_own(x):
            t = x
            while gamma(t) < 5.0:
                t = t + x
            return t
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import astad_test_calls as module
    astad.register_scalar(module.gamma, lambda x: 2.0)
    for fn, x, expected in [(module.with_alias, 0.3, None), (module.with_own, 1.0, (3.0, 3.0))]:
        f = astad.reverse_diff(fn)
        value, grad = f.value_and_grad(x)
        assert value == fn(x)
        assert grad == f.vjp(x)[1](1.0)
        if expected is not None:
            assert (value, grad) == expected
    del __import__("sys").modules["astad_test_calls"]



def softplus(x):  # (globals: a call of a global is resolved at transform time)
    return math.log1p(math.exp(x))


def twice_softplus(x):
    return 2.0 * softplus(x)


def looped_softplus(x):
    s = 0.0
    for _ in range(2):
        s = s + softplus(x)
    return s


def test_a_derivative_registered_again_later_is_the_one_used():
    # a rule resolved at transform time is a dependency like a global: registering another
    # derivative for the same function afterwards rebuilds the functions that call it
    astad.register_scalar(softplus, lambda x: 1.0 / (1.0 + math.exp(-x)))
    f, g = astad.reverse_diff(twice_softplus), astad.reverse_diff(looped_softplus)
    sigmoid = 1.0 / (1.0 + math.exp(-0.5))
    assert f.grad(0.5) == pytest.approx(2.0 * sigmoid) and g.grad(0.5) == f.grad(0.5)
    astad.register_scalar(softplus, lambda x: 10.0)
    assert f.grad(0.5) == 20.0 and g.grad(0.5) == 20.0
    assert f.vjp(0.5)[1](1.0) == 20.0 and g.vjp(0.5)[1](1.0) == 20.0


def erf_line(x):
    y = math.erf(x) * 3.0
    return y


def erf_loop(x):
    s = 0.0
    for _ in range(3):
        s = s + math.erf(x)
    return s


def test_a_custom_vjp_given_later_to_a_builtin_rule_is_the_one_used():
    # the specialised float code (straight-line and loops) and the tape follow it too
    from astad.registry import RECORDS
    f, g = astad.reverse_diff(erf_line), astad.reverse_diff(erf_loop)
    assert "_floats(" in f.source and "_floats(" in g.source
    derf = 2.0 / math.sqrt(math.pi) * math.exp(-0.25)
    assert f.grad(0.5) == pytest.approx(3.0 * derf) and g.grad(0.5) == pytest.approx(3 * derf)
    before = RECORDS[math.erf]
    try:
        astad.custom_vjp(math.erf).defvjp(lambda x: (math.erf(x), None),
                                          lambda _, ct: (7.0 * ct,))
        assert f.grad(0.5) == 21.0 and g.grad(0.5) == 21.0
        assert f.vjp(0.5)[1](1.0) == 21.0 and g.vjp(0.5)[1](1.0) == 21.0
    finally:
        RECORDS[math.erf] = before
    assert f.grad(0.5) == pytest.approx(3.0 * derf)  # and back
