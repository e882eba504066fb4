"""Random programs in the subset the specialised code takes (every loop form, branches,
conditional expressions, tuples, helpers inlined or called as nested functions, sums of
generators and list comprehensions over helpers, lists built and written, recursion,
int arguments, a matrix read by rows; ints and lists of numpy.float64 where floats are
taken), each checked against the ordinary code with one tape entry per
primitive operation (``preaccumulate=False``: the rules' own partials, no specialised
code) and against forward mode (``astad.jvp``). Deterministic: ``ASTAD_SPECIALISED_FUZZ``
programs (default 40) from seed ``ASTAD_SPECIALISED_SEED`` (default 0)."""
import importlib.util
import math
import os
import random
import sys

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen

COUNT = int(os.environ.get("ASTAD_SPECIALISED_FUZZ", "40"))
SEED = int(os.environ.get("ASTAD_SPECIALISED_SEED", "0"))

pytestmark = pytest.mark.slow

HELPERS = '''
import math


def _square(a):
    return a * a


def _mix(a, b, t=0.25):
    u = a + (b - a) * t
    return u * math.cos(b) + t


def _pair(a, b):
    return a * b, a - b


def _soft(a, lo, hi):
    if a < lo:
        return lo + 0.1 * (a - lo)
    if a > hi:
        return hi + 0.1 * (a - hi)
    return a


def _power(a, k):
    if k == 0:
        return 1.0
    return a * _power(a, k - 1)


def _smooth_list(vs, w):
    ys = []
    for v in vs:
        ys.append(math.tanh(w * v))
    out = [0.0] * len(ys)
    for i in range(len(ys)):
        out[i] = ys[i] * ys[-1 - i] + out[i - 1]
    return sum(out)


def _norm(vs):
    total = 0.0
    for v in vs:
        total += v * v
    return math.sqrt(1.0 + total)
'''


class Program:
    """Writes one random function ``f(x, y, xs, n)`` over the helpers above."""

    def __init__(self, rng):
        self.rng = rng
        self.floats = ["x", "y", "s"]
        self.depth = 0
        self.lines = []
        self.counter = 0

    def expr(self, depth=0):
        r = self.rng.random()
        if depth > 2 or r < 0.3:
            return self.atom()
        if r < 0.55:
            op = self.rng.choice(["+", "-", "*"])
            return f"({self.expr(depth + 1)} {op} {self.expr(depth + 1)})"
        if r < 0.62:
            return f"({self.expr(depth + 1)} / (1.5 + {self.expr(depth + 1)} ** 2))"
        if r < 0.72:
            fn = self.rng.choice(["math.sin", "math.cos", "math.tanh", "math.atan"])
            return f"{fn}({self.expr(depth + 1)})"
        if r < 0.76:  # (and powers of a variable exponent: a float, the int n)
            return self.rng.choice([
                f"math.sqrt(1.0 + {self.expr(depth + 1)} ** 2)",
                f"(1.0 + math.tanh({self.expr(depth + 1)}) ** 2) ** {self.atom()}",
                f"(1.5 + math.sin({self.expr(depth + 1)})) ** n"])
        if r < 0.8:
            return f"{self.rng.choice(['min', 'max'])}({self.atom()}, {self.atom()})"
        if r < 0.85:
            return f"({self.expr(depth + 1)} if {self.test()} else {self.expr(depth + 1)})"
        if r < 0.9:
            return self.rng.choice([f"_square({self.expr(depth + 1)})",
                                    f"_mix({self.atom()}, {self.atom()})",
                                    f"_mix({self.atom()}, {self.atom()}, t=0.5)",
                                    f"_soft({self.expr(depth + 1)}, -0.5, 0.75)",
                                    f"_power({self.atom()}, 3)", "_norm(xs)",
                                    f"sum(_square(v) * {self.atom()} for v in xs)",
                                    f"sum((v * {self.atom()} for v in xs if v > 0.0), "
                                    f"{self.atom()})",
                                    f"sum([_mix(v, {self.atom()}) for v in xs])",
                                    "sum(_soft(v * w, -0.5, 0.5) for v in xs for w in xs)",
                                    f"_smooth_list(xs, {self.atom()})"])
        if r < 0.95:
            return f"_pair({self.atom()}, {self.atom()})[{self.rng.randint(0, 1)}]"
        return f"abs({self.expr(depth + 1)})"

    def atom(self):
        r = self.rng.random()
        if r < 0.55:
            return self.rng.choice(self.floats)
        if r < 0.75:
            return f"xs[{self.rng.choice(['0', '1', '-1', 'len(xs) - 2'])}]"
        if r < 0.82:
            return repr(round(self.rng.uniform(-2, 2), 2))
        if r < 0.85:  # a call whose value carries no tangent
            return self.rng.choice(["math.exp(0.3)", "abs(-0.5)", "math.sqrt(1.2)",
                                    "max(0.25, 0.5)"])
        return "n"

    def test(self):
        return f"{self.atom()} {self.rng.choice(['<', '>', '<=', '>='])} {self.atom()}"

    def emit(self, text):
        self.lines.append("    " * (self.depth + 1) + text)

    def new_float(self):
        name = f"v{self.counter}"
        self.counter += 1
        return name

    def statements(self, count, in_loop=False):
        for _ in range(count):
            self.statement(in_loop)

    def statement(self, in_loop):
        r = self.rng.random()
        if self.depth >= 2:
            r = r * 0.5
        if r < 0.25:
            target = self.rng.choice(self.floats[2:] + [self.new_float()])
            self.emit(f"{target} = {self.expr()}")
            if target not in self.floats:
                self.floats.append(target)
        elif r < 0.4:
            self.emit(f"s += {self.expr()}")
        elif r < 0.45:
            a, b = self.new_float(), self.new_float()
            self.emit(f"{a}, {b} = _pair({self.atom()}, {self.atom()})")
            self.emit(f"{a}, {b} = {b}, {a}")
            self.floats += [a, b]
        elif r < 0.5 and in_loop:
            self.emit(f"if {self.test()}:")
            self.depth += 1
            self.emit(self.rng.choice(["break", "continue", f"return {self.expr()}"]))
            self.depth -= 1
        elif r < 0.65:
            self.emit(f"if {self.test()}:")
            self.block(1, in_loop)
            self.emit("else:")
            self.block(1, in_loop)
        else:
            self.loop()

    def block(self, count, in_loop):
        self.depth += 1
        saved = list(self.floats)
        self.statements(count, in_loop)
        self.floats = saved  # (names first bound here may be unbound after)
        self.depth -= 1

    def loop(self):
        form = self.rng.randrange(7)
        e, i = self.new_float(), f"i{self.counter}"
        self.counter += 1
        if form == 0:
            self.emit(f"for {i} in range(n):")
        elif form == 1:
            self.emit(f"for {e} in xs:")
        elif form == 2:
            self.emit(f"for {i}, {e} in enumerate(xs):")
        elif form == 3:
            self.emit(f"for {e}, {e}b in zip(xs, reversed(xs)):")
        elif form == 4:
            self.emit(f"for {e} in reversed(xs):")
        elif form == 5:
            self.emit(f"{i} = 0")
            self.emit(f"while {i} < len(xs):")
        else:
            self.emit(f"for {e}r in m:")
        self.depth += 1
        saved = list(self.floats)
        if form == 6:
            self.emit(f"{e} = {e}r[0] * {e}r[-1] + {self.atom()}")
        if form in (1, 2, 3, 4, 6):
            self.floats.append(e)
        if form == 3:
            self.floats.append(f"{e}b")
        if form in (0, 2, 5):
            self.emit(f"s += xs[{i} % len(xs)] * {self.expr()}")
        if form == 5:
            self.emit(f"{i} += 1")
        self.statements(self.rng.randint(1, 2), in_loop=True)
        self.floats = saved
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        self.emit(f"s = s * 0.5 + {self.atom()}")
        self.depth -= 1

    def source(self):
        self.statements(self.rng.randint(2, 4))
        body = "\n".join(self.lines)
        return (f"{HELPERS}\n\ndef f(x, y, xs, m, n):\n    s = 0.0\n{body}\n"
                f"    return s + {self.expr()} + xs[0] * y + m[0][0]\n")  # (every argument used)


def _load(source, tmp_path, k):
    path = tmp_path / f"specialised_fuzz_{k}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _program(rng, tmp_path, name):
    """A random program (its source and module) and arguments for it:
    ``(x, y, xs, m, n)``."""
    source = Program(rng).source()
    module = _load(source, tmp_path, name)
    xs = [rng.uniform(-1.5, 1.5) for _ in range(rng.randint(2, 5))]
    m = [[rng.uniform(-1.5, 1.5) for _ in range(2)] for _ in range(rng.randint(1, 3))]
    return source, module, (rng.uniform(-1.5, 1.5), rng.uniform(-1.5, 1.5), xs, m,
                            rng.randint(1, 4))


def _finite_value(f, args):
    """``f(*args)``; the test is skipped where it raises or is not a finite float."""
    try:
        value = f(*args)
    except (ZeroDivisionError, OverflowError, ValueError):
        pytest.skip("the program raises at these arguments")
    if not isinstance(value, float) or not math.isfinite(value):
        pytest.skip("not a finite float")
    return value


def _flat(gradient):
    x, y, xs, m, n = gradient
    return [0.0 if x is None else x, y, *xs, *(v for row in m for v in row)]


@pytest.mark.parametrize("k", range(COUNT))
def test_random_programs_agree_with_the_primitive_tape_and_forward_mode(k, tmp_path):
    rng = random.Random(SEED * 100003 + k)
    source, module, args = _program(rng, tmp_path, k)
    xs, m = args[2], args[3]
    # one program in three also takes other numbers where it takes floats: an int (a
    # constant, its gradient None) or lists of numpy.float64 (gradients of that type)
    variant = k % 3
    if variant == 1:
        args = (rng.randint(-2, 2),) + args[1:]
    elif variant == 2:
        args = args[:2] + ([np.float64(v) for v in xs],) + args[3:]
    want_value = _finite_value(module.f, args)
    entry = codegen.build(module.f)
    assert entry.tapeless is not None, source  # the subset is the specialised code's
    assert entry.tapeless(*args) is not None, source
    f = astad.reverse_diff(module.f)
    value, gradient = f.value_and_grad(*args)
    plain_value, plain_gradient = astad.reverse_diff(
        module.f, preaccumulate=False).value_and_grad(*args)
    assert value == want_value == plain_value, source
    assert gradient[4] is None and plain_gradient[4] is None  # (an int: not differentiated)
    if variant == 1:
        assert gradient[0] is None and plain_gradient[0] is None
    assert [type(g) for g in _flat(gradient)] == [type(g) for g in _flat(plain_gradient)]
    scale = max(1.0, *map(abs, _flat(plain_gradient)))
    assert _flat(gradient) == pytest.approx(_flat(plain_gradient), rel=1e-9,
                                            abs=1e-11 * scale), source
    # forward mode along a random direction, against the gradient dotted with it: the
    # specialised tangent code (entry.forward, and astad.jvp, which runs it) and the
    # general path (forward duals through the transformed code, from a lambda)
    direction = (0.0 if variant == 1 else rng.uniform(-1, 1), rng.uniform(-1, 1),
                 [rng.uniform(-1, 1) for _ in xs], [[rng.uniform(-1, 1) for _ in row]
                                                     for row in m], None)
    expected = math.fsum(float(g) * d for g, d in zip(_flat(gradient), _flat(direction)))
    assert entry.forward is not None, source
    if variant == 0:
        forward = entry.forward(*args, *direction)
        assert forward is not None, source
        assert forward[0] == want_value
        assert forward[1] == pytest.approx(expected, rel=1e-9, abs=1e-11 * scale), source
    for fun in (module.f, lambda *a: module.f(*a)):
        value, tangent = astad.jvp(fun, args, direction)
        assert value == want_value, source
        assert tangent == pytest.approx(expected, rel=1e-9, abs=1e-11 * scale), source


@pytest.mark.parametrize("k", range(COUNT))
def test_random_programs_hessian_vector_products_written_out(k, tmp_path):
    """``jvp(grad(f))`` by reverse mode over forward mode's code for floats
    (api/hvp.py) against the general path (forward duals through the reverse
    transform) and against finite differences of the gradient."""
    rng = random.Random(SEED * 100003 + k + 7919)
    source, module, args = _program(rng, tmp_path, f"hvp_{k}")
    xs, m = args[2], args[3]
    direction = (rng.uniform(-1, 1), rng.uniform(-1, 1), [rng.uniform(-1, 1) for _ in xs],
                 [[rng.uniform(-1, 1) for _ in row] for row in m], None)
    _finite_value(module.f, args)
    grad = astad.grad(module.f, argnums=(0, 1, 2, 3))
    fast = grad.hessian_vector(args, direction)
    if "_power(" not in source:  # (a recursive helper: nested functions, the general path)
        assert fast is not None, source
    gradient, product = astad.jvp(grad, args, direction)
    general_gradient, general_product = astad.jvp(lambda *a: grad(*a), args, direction)
    flat = _flat(gradient + (None,))
    scale = max(1.0, *map(abs, flat))
    assert flat == pytest.approx(_flat(general_gradient + (None,)), rel=1e-9,
                                 abs=1e-11 * scale), source
    assert _flat(product + (None,)) == pytest.approx(
        _flat(general_product + (None,)), rel=1e-8, abs=1e-10 * scale), source
    h = 1e-5

    def moved(step):
        return (args[0] + step * direction[0], args[1] + step * direction[1],
                [x + step * d for x, d in zip(xs, direction[2])],
                [[v + step * d for v, d in zip(r, s)] for r, s in zip(m, direction[3])],
                args[4])
    try:
        ahead, behind = _flat(grad(*moved(h)) + (None,)), _flat(grad(*moved(-h)) + (None,))
    except (ZeroDivisionError, OverflowError, ValueError):
        return
    fd = [(a - b) / (2 * h) for a, b in zip(ahead, behind)]
    if any(a != pytest.approx(b, rel=1e-3) for a, b in zip(ahead, behind)):
        return  # (a branch taken differently a step away: no derivative there to compare)
    assert _flat(product + (None,)) == pytest.approx(fd, rel=1e-4, abs=1e-5 * scale), source
