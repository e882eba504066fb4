"""Every scalar rule at special and extreme arguments, on every path.

For each rule of astad's scalar table (``rules/scalar.py``: operators, every function of
``math`` with a rule, and the ones registered with ``register_scalar``), at 0, +-1,
tiny, huge and subnormal arguments and next to the edges of its domain, the derivative
astad computes must match a central finite difference taken in high precision (mpmath,
a relative step of 2^-100, and the precision raised until rounding is 2^-80 of the
result: truncation and rounding errors far below a float's),
to 1e-13 relative (or 1e-305 absolute, where the true value is subnormal); a true value
beyond the largest float must be an infinity of its sign. And every path gives the same
bits: the specialised straight-line code (``.grad``), the specialised loop code, the
template rule on the tape (``.vjp``), a fused rule (the same rule inside an expression),
``preaccumulate=False``, forward mode (``astad.jvp``) and the rules' general form
(a gradient taken inside forward mode, whose duals are nested: ``rules/scalar_general.py``).

Points where the function itself is not differentiable (a kink, a jump) are found by
comparing one-sided differences and left out: the choices there are documented and tested
in tests/test_robustness.py.
"""
from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile

import mpmath
import pytest

import astad
from astad.registry import RECORDS, formulas
from astad.rules.scalar import PRIMAL_ONLY_FUNCTIONS
from paths import check_every_path, decorated

TINY, SUB, HUGE = 1e-300, 5e-324, 1e300
ONE_MINUS = 1.0 - 2.0 ** -53   # the float just below 1
ONE_PLUS = 1.0 + 2.0 ** -52    # the float just above 1
GENERAL = [0.0, 1.0, -1.0, 0.5, -1.5, 3.0, TINY, -TINY, SUB, 1e-200, 1e154, 1e200, HUGE,
           -HUGE]

# rule name -> (expression in x (and y), mpmath function, points)
UNARY = {
    "neg": ("-x", lambda x: -x, GENERAL),
    "pos": ("+x", lambda x: +x, GENERAL),
    "abs": ("abs(x)", abs, GENERAL),
    "fabs": ("math.fabs(x)", abs, GENERAL),
    "sin": ("math.sin(x)", mpmath.sin, GENERAL + [1e22, 1e10]),
    "cos": ("math.cos(x)", mpmath.cos, GENERAL + [1e22, 1e10]),
    "tan": ("math.tan(x)", mpmath.tan, GENERAL + [1.5707963267948966, 1e10]),
    "asin": ("math.asin(x)", mpmath.asin, [0.0, 0.5, -0.5, ONE_MINUS, -ONE_MINUS, TINY, SUB,
                                           0.999999]),
    "acos": ("math.acos(x)", mpmath.acos, [0.0, 0.5, -0.5, ONE_MINUS, -ONE_MINUS, TINY, SUB]),
    "atan": ("math.atan(x)", mpmath.atan, GENERAL + [1e160, -1e160, 1e150]),
    "sinh": ("math.sinh(x)", mpmath.sinh, [0.0, 1.0, -1.0, TINY, SUB, 700.0, -700.0, 709.0]),
    "cosh": ("math.cosh(x)", mpmath.cosh, [0.0, 1.0, -1.0, TINY, SUB, 700.0, -700.0, 709.0]),
    "tanh": ("math.tanh(x)", mpmath.tanh, [0.0, 0.3, -0.3, 0.5, 1.0, -1.0, 5.0, 19.0, -20.0,
                                           40.0, 300.0, -400.0, 1000.0, TINY, SUB]),
    "asinh": ("math.asinh(x)", mpmath.asinh, GENERAL),
    "acosh": ("math.acosh(x)", mpmath.acosh, [ONE_PLUS, 1.5, 3.0, 1e154, 1e200, HUGE]),
    "atanh": ("math.atanh(x)", mpmath.atanh, [0.0, 0.5, -0.5, ONE_MINUS, -ONE_MINUS, TINY,
                                              SUB]),
    "exp": ("math.exp(x)", mpmath.exp, [0.0, 1.0, -1.0, 700.0, -700.0, -745.0, 709.0, TINY]),
    "expm1": ("math.expm1(x)", mpmath.expm1, [0.0, 1.0, -1.0, TINY, SUB, 1e-10, -40.0,
                                              -700.0, 700.0]),
    "log1p": ("math.log1p(x)", mpmath.log1p, [0.0, TINY, SUB, -0.5, -ONE_MINUS, 1.0, HUGE]),
    "log1": ("math.log(x)", mpmath.log, [1.0, 0.5, 2.0, TINY, SUB, 1e-200, HUGE]),
    "log2": ("math.log2(x)", lambda x: mpmath.log(x, 2), [1.0, 0.5, 2.0, TINY, 1e-200, HUGE]),
    "log10": ("math.log10(x)", mpmath.log10, [1.0, 0.5, 2.0, TINY, 1e-200, HUGE]),
    "sqrt": ("math.sqrt(x)", mpmath.sqrt, [4.0, 0.5, TINY, SUB, 1e-200, HUGE]),
    "erf": ("math.erf(x)", mpmath.erf, [0.0, 1.0, -1.0, 5.0, 27.0, -27.0, TINY, 1e200]),
    "erfc": ("math.erfc(x)", mpmath.erfc, [0.0, 1.0, -1.0, 5.0, 27.0, TINY, 1e10]),
    "degrees": ("math.degrees(x)", mpmath.degrees, GENERAL[:-3]),
    "radians": ("math.radians(x)", mpmath.radians, GENERAL),
    "gamma": ("math.gamma(x)", mpmath.gamma, [0.5, 1.0, 2.5, 10.0, 171.0, -0.5, -2.5, -100.5,
                                              1e-10, 1e-300, 30.5]),
    "lgamma": ("math.lgamma(x)", lambda x: mpmath.log(abs(mpmath.gamma(x))),
               [0.5, 1.0, 2.5, 10.0, 171.0, -0.5, -2.5, -100.5, 1e-10, 1e-300, 1e200]),
}
if hasattr(math, "exp2"):
    UNARY["exp2"] = ("math.exp2(x)", lambda x: mpmath.mpf(2) ** x,
                     [0.0, 1.0, -1.0, 1023.0, -1074.0, TINY])
if hasattr(math, "cbrt"):
    UNARY["cbrt"] = ("math.cbrt(x)", mpmath.cbrt, [8.0, -8.0, TINY, -TINY, SUB, 1e-200, HUGE])

PAIRS = [(0.5, 2.0), (-1.5, 3.0), (3.0, -0.75), (TINY, 3.0), (3.0, TINY), (HUGE, 0.5),
         (1e154, 1e154), (1e-200, 1e-200), (1e200, 1e200), (0.0, 1.0), (1.0, 0.0)]
BINARY = {
    "add": ("x + y", lambda x, y: x + y, PAIRS),
    "sub": ("x - y", lambda x, y: x - y, PAIRS),
    "mul": ("x * y", lambda x, y: x * y, PAIRS),
    "truediv": ("x / y", lambda x, y: x / y, PAIRS + [(TINY, 1e10), (1.0, 1e-200)]),
    "mod": ("x % y", lambda x, y: x - y * mpmath.floor(x / y),
            [(5.5, 2.0), (-5.5, 2.0), (7.0, -2.5), (1.0, 0.1), (TINY, 3.0), (0.3, 1e10)]),
    "atan2": ("math.atan2(x, y)", mpmath.atan2, PAIRS + [(1e-300, 1e-300), (-1.0, -TINY)]),
    "hypot2": ("math.hypot(x, y)", mpmath.hypot, PAIRS),
    "copysign": ("math.copysign(x, y)", lambda x, y: abs(x) if y > 0 else -abs(x),
                 [(2.0, -1.0), (-2.0, 3.0), (TINY, -1.0), (HUGE, 2.0)]),
    "fmod": ("math.fmod(x, y)", lambda x, y: x - y * (mpmath.floor(x / y) if x / y > 0 else
                                                      mpmath.ceil(x / y)),
             [(1.0, 0.1), (5.5, 2.0), (-5.5, 2.0),
                                              (7.0, -2.5), (TINY, 3.0)]),
    "log_base": ("math.log(x, y)", lambda x, y: mpmath.log(x) / mpmath.log(y),
                 [(8.0, 2.0), (TINY, 10.0), (HUGE, 2.0), (2.0, TINY), (0.5, 3.0)]),
    "remainder": ("math.remainder(x, y)", lambda x, y: x - y * mpmath.nint(x / y),
                  [(5.5, 2.0), (1.0, 0.1), (-7.0, 2.5)]),
}
POWERS = [(0.5, 2.0), (1e154, 2.0), (1e-120, 3.0), (2.0, 0.5), (2.0, -1.5), (TINY, 0.5),
          (3.0, 0.0), (0.0, 2.0), (0.0, 3.0), (-2.0, 3.0), (1.5, 100.0), (1e-170, 2.0),
          (4.0, -2.0)]
# (x ** n with an int n is fused and specialised differently from x ** y: both)
POWER_FORMS = {
    "pow": ("x ** y", lambda x, y: mpmath.power(x, y), POWERS),
    "math_pow": ("math.pow(x, y)", lambda x, y: mpmath.power(x, y), POWERS),
}
INT_POWERS = [(n, x) for n in (0, 2, 3, -1, -2) for x in (0.5, 1e154, 1e-120, 1e-170, -2.0,
                                                            3.0, 0.0, TINY)]


# -- the functions, written to a module file (astad reads their source) --------------------
def _module_source() -> str:
    lines = ["import math", ""]
    forms = [(name, expr, ("x",)) for name, (expr, _, _) in UNARY.items()]
    forms += [(name, expr, ("x", "y")) for name, (expr, _, _) in BINARY.items()]
    forms += [(name, expr, ("x", "y")) for name, (expr, _, _) in POWER_FORMS.items()]
    forms += [(f"ipow{n}".replace("-", "m"), f"x ** {n}", ("x",)) for n in (0, 2, 3, -1, -2)]
    for name, expr, params in forms:
        args = ", ".join(params)
        # the same rule inside a bigger expression: a fused rule (x + 0.0 is x)
        shifted = re.sub(r"\bx\b", "(x + 0.0)", expr)
        lines += [f"def plain_{name}({args}):", f"    return {expr}", "",
                  f"def fused_{name}({args}):", f"    return {shifted}", "",
                  f"def loop_{name}({args}):", "    for _ in range(1):",
                  f"        r = {expr}", "    return r", ""]
    return "\n".join(lines) + "\n"


_TMP = tempfile.TemporaryDirectory(prefix="astad_rule_edges_")


def _load():
    path = os.path.join(_TMP.name, "rule_edge_functions.py")
    with open(path, "w") as handle:
        handle.write(_module_source())
    spec = importlib.util.spec_from_file_location("rule_edge_functions", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["rule_edge_functions"] = module
    spec.loader.exec_module(module)
    return module


FUNCTIONS = _load()


# -- the reference: central differences in high precision ----------------------------------
def reference(mp_fn, args, k):
    """(derivative, differentiable) of ``mp_fn`` in argument ``k`` at ``args``, or None
    where mpmath cannot evaluate it (outside the domain). The working precision grows
    until the rounding error of the difference is below 2^-80 of it."""
    exponents = [math.frexp(a)[1] if a else -900 for a in args]
    bits = 400 + max(0, -exponents[k]) + max(0, *exponents)
    while True:
        found = _difference(mp_fn, args, k, bits)
        if found is None or found[2]:
            return None if found is None else found[:2]
        bits *= 2


def _difference(mp_fn, args, k, bits):
    with mpmath.workprec(bits):
        x = [mpmath.mpf(a) for a in args]
        h = abs(x[k]) * mpmath.mpf(2) ** -100 if x[k] else mpmath.mpf(2) ** -1000

        def at(delta):
            shifted = list(x)
            shifted[k] += delta
            value = mp_fn(*shifted)
            if isinstance(value, mpmath.mpc):
                if value.imag:
                    raise ValueError("complex")
                value = value.real
            return value

        try:
            values = [at(h), at(0), at(-h), at(h * 2 ** -20), at(-h * 2 ** -20)]
        except (ValueError, ZeroDivisionError):
            return None
        plus, centre, minus, near_plus, near_minus = values
        right, left = (plus - centre) / h, (centre - minus) / h
        step = h * mpmath.mpf(2) ** -20
        near_right, near_left = (near_plus - centre) / step, (centre - near_minus) / step
        derivative = (right + left) / 2
        rounding = mpmath.mpf(2) ** -bits * max(abs(v) for v in values) / step
        settled = rounding <= mpmath.mpf(2) ** -80 * abs(derivative) or bits > 20000
        # one-sided slopes differ by O(step) where the function is smooth, by a constant
        # at a kink, and more at a jump
        gap, near_gap = abs(right - left), abs(near_right - near_left)
        if settled and gap and near_gap > gap * mpmath.mpf(2) ** -10:
            return None, False, True  # a kink or a jump here: not differentiable
        return derivative, True, settled


def as_float(d) -> float:
    if abs(d) > mpmath.mpf(sys.float_info.max):
        return math.copysign(math.inf, float(mpmath.sign(d)))
    return float(d)


def close(got, want) -> bool:
    if math.isinf(want):
        return got == want
    return abs(got - want) <= 1e-13 * abs(want) + 1e-305


# -- the paths -----------------------------------------------------------------------------
def _grads(fn, args, **options):
    out = decorated(fn, **options).grad(*args)
    return out if isinstance(out, tuple) else (out,)


def paths(name, args):
    """The gradient by every path, {path: tuple of partials}."""
    plain, fused, loop = (getattr(FUNCTIONS, f"{kind}_{name}") for kind in
                          ("plain", "fused", "loop"))
    n = len(args)
    found = {
        "straight-line (.grad)": _grads(plain, args),
        "loop specialised (.grad)": _grads(loop, args),
        "template rule (.vjp)": decorated(plain).vjp(*args)[1](1.0),
        "fused rule (.vjp)": decorated(fused).vjp(*args)[1](1.0),
        "preaccumulate=False": _grads(plain, args, preaccumulate=False),
    }
    found["template rule (.vjp)"] = _tuple(found["template rule (.vjp)"], n)
    found["fused rule (.vjp)"] = _tuple(found["fused rule (.vjp)"], n)
    found["forward (jvp)"] = tuple(
        astad.jvp(plain, args, tuple(1.0 if j == k else 0.0 for j in range(n)))[1]
        for k in range(n))
    inner = astad.grad(plain, argnums=tuple(range(n)))
    found["general form (grad inside jvp)"] = tuple(
        astad.jvp(inner, args, (0.0,) * n)[0])
    return found


def _tuple(value, n):
    return value if n > 1 else (value,)


def same(a, b) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def check(name, mp_fn, args, float_fn):
    try:
        value = float_fn(*args)
    except (ValueError, OverflowError, ZeroDivisionError):
        return 0  # outside the function's domain: astad raises as Python does (elsewhere)
    if not math.isfinite(value):
        return 0
    found = paths(name, args)
    first = found["straight-line (.grad)"]
    for path, partials in found.items():
        assert all(same(float(a), float(b)) for a, b in zip(partials, first)), (
            f"{name}{args}: {path} gives {partials}, the straight-line code {first}")
    checked = 0
    for k in range(len(args)):
        ref = reference(mp_fn, args, k)
        if ref is None or not ref[1]:
            continue
        want = as_float(ref[0])
        got = float(first[k])
        assert close(got, want), (f"d {name} / d arg{k} at {args}: astad {got!r}, high "
                                  f"precision {want!r}")
        checked += 1
    return checked


def _float_fn(expr, params):
    return eval(f"lambda {', '.join(params)}: {expr}", {"math": math})


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rules_at_special_and_extreme_arguments(name):
    expr, mp_fn, points = UNARY[name]
    float_fn = _float_fn(expr, ("x",))
    assert sum(check(name, mp_fn, (x,), float_fn) for x in points) >= len(points) // 2


@pytest.mark.parametrize("name", sorted(BINARY) + sorted(POWER_FORMS))
def test_binary_rules_at_special_and_extreme_arguments(name):
    expr, mp_fn, points = {**BINARY, **POWER_FORMS}[name]
    float_fn = _float_fn(expr, ("x", "y"))
    assert sum(check(name, mp_fn, pair, float_fn) for pair in points) >= len(points) // 2


@pytest.mark.parametrize("n", [0, 2, 3, -1, -2])
def test_integer_powers_at_special_and_extreme_arguments(n):
    name = f"ipow{n}".replace("-", "m")
    for m, x in INT_POWERS:
        if m == n:
            check(name, lambda t: mpmath.power(t, n), (x,), lambda t: t ** n)


def test_the_documented_values_at_the_edges():
    """Where the function is not differentiable or the derivative is infinite, the
    documented choice, the same on every path."""
    cases = [("pow", (0.0, 0.0), (0.0, 0.0)),    # x ** 0 is 1 everywhere; 0 ** y: JAX's 0
             ("ipow0", (0.0,), (0.0,)), ("pow", (3.0, 0.0), (0.0, math.log(3.0))),
             ("sqrt", (0.0,), (math.inf,)), ("abs", (0.0,), (0.0,)),
             ("atan2", (0.0, 0.0), (0.0, 0.0)), ("hypot2", (0.0, 0.0), (0.0, 0.0)),
             ("asin", (1.0,), (math.inf,)), ("acos", (1.0,), (-math.inf,))]
    for name, args, want in cases:
        for path, partials in paths(name, args).items():
            assert all(same(float(a), b) for a, b in zip(partials, want)), (name, args, path)


def sumprod_of(x, y, z):
    return math.sumprod([x, y, 2.0], [z, x, y])  # x z + y x + 2 y


def fma_of(x, y, z):
    return math.fma(x, y, z * z)


@pytest.mark.skipif(not hasattr(math, "sumprod"), reason="math.sumprod: Python >= 3.12")
def test_sumprod_on_every_path():
    x, y, z = 1.5, -2.0, 3.0
    check_every_path(sumprod_of, (x, y, z), x * z + y * x + 2.0 * y, (z + y, x + 2.0, x))
    check_every_path(sumprod_of, (1e200, 1e-200, 1e-200), math.sumprod(
        [1e200, 1e-200, 2.0], [1e-200, 1e200, 1e-200]), (2e-200, 1e200 + 2.0, 1e200))


@pytest.mark.skipif(not hasattr(math, "fma"), reason="math.fma: Python >= 3.13")
def test_fma_on_every_path():
    x, y, z = 1.5, -2.0, 3.0
    check_every_path(fma_of, (x, y, z), math.fma(x, y, z * z), (y, x, 2.0 * z))


def test_every_scalar_rule_is_checked_here():
    """A rule added to the table must be added to this test."""
    covered = set(UNARY) | set(BINARY) | set(POWER_FORMS) | {"hypot", "floordiv", "divmod",
                                                                "log", "sum", "fsum", "prod",
                                                                "ldexp", "sumprod", "fma"}
    table = {name for name, _, _ in formulas()}
    assert table <= covered, table - covered
    registered = {found.name for fn, found in RECORDS.items() if found.name is not None and
                  (getattr(fn, "__module__", None) == "math" or fn in vars(math).values())}
    missing = {name for name in registered if name not in covered
               # (no derivative: they see the primal; custom_vjp rules, astad's own of
               # several values and tests' own: tests/test_functions.py)
               and name not in ("floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
                                "isclose") and not name.startswith("custom_")}
    assert not missing, missing


@pytest.mark.parametrize("coordinates", [(1e200, 1e200, 1e200), (1e-200, 2e-200, 2e-200),
                                         (1.0, 2.0, 2.0), (0.0, 3.0, 4.0)])
def test_hypot_of_three_at_extreme_arguments(coordinates):
    @astad.reverse_diff
    def h3(x, y, z):
        return math.hypot(x, y, z)
    got = h3.grad(*coordinates)
    for k in range(3):
        want = as_float(reference(lambda a, b, c: mpmath.sqrt(a * a + b * b + c * c),
                                  coordinates, k)[0])
        assert close(got[k], want)
    assert h3.vjp(*coordinates)[1](1.0) == got
    assert tuple(astad.jvp(h3, coordinates, tuple(float(j == k) for j in range(3)))[1]
                 for k in range(3)) == got


def test_ldexp_and_prod_at_extreme_arguments():
    @astad.reverse_diff(argnums=0)
    def scaled(x, e):
        return math.ldexp(x, e)
    assert scaled.grad(1.5, 1000) == 2.0 ** 1000 and scaled.grad(1.5, -1070) == 2.0 ** -1070

    @astad.reverse_diff
    def product(xs):
        return math.prod(xs)
    xs = [1e200, 1e-200, 0.0, 3.0]
    assert product.grad(xs) == [0.0, 0.0, 3.0, 0.0]  # the product of the others, no 0/0


def _readme_list(after: str) -> set:
    text = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    start = text.index(after) + len(after)
    listed = re.search(r"`([^`]*)`", text[start:]).group(1)
    return set(listed.split())


_RULE_TABLE = """
import math, astad
from astad.registry import RECORDS
print(" ".join(name for name, fn in vars(math).items()
               if callable(fn) and hash(fn) is not None and fn in RECORDS
               and RECORDS[fn].name is not None))
"""


def test_the_readme_lists_exactly_the_differentiable_math_functions():
    """The README's list of math functions is the rule table's, neither more nor less (the
    table as astad defines it, in a fresh process: tests here register rules of their own
    for math functions)."""
    found = subprocess.run([sys.executable, "-c", _RULE_TABLE], capture_output=True,
                           text=True, check=True)
    with_rules = set(found.stdout.split())
    primal_only = {fn.__name__ for fn in PRIMAL_ONLY_FUNCTIONS}
    listed = _readme_list("Every differentiable function of `math`:")
    assert {name for name in listed if hasattr(math, name)} == with_rules - primal_only
    assert _readme_list("`math.pi`/`math.e`;") == primal_only
