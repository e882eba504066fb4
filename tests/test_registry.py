"""The rule registry (astad/registry.py) as a table: one record per callable, one formula
per derivative, and properties checked over every record, not per function."""
from __future__ import annotations

import ast
import math
import subprocess
import sys

import numpy as np
import pytest

import astad
from astad import registry
from astad.registry import RECORDS
from astad.rules import catalogue
from astad.rules.array import SAME_AS_MATH
from astad.rules.from_scalar import NUMPY_FUNCTIONS, _NAMESPACE

# numpy's scalar functions in place of math's: the scalar text evaluated with them on each
# element is what the element-wise partial must give, bit for bit
_NUMPY_SCALAR = {**_NAMESPACE, **NUMPY_FUNCTIONS}


def _domain(name):
    rng = np.random.default_rng(7)
    if name in ("asin", "acos", "atanh"):
        return rng.uniform(-0.99, 0.99, 200)
    if name in ("log1", "log2", "log10", "sqrt", "cbrt"):
        return rng.uniform(1e-3, 50.0, 200)
    if name == "acosh":
        return rng.uniform(1.001, 50.0, 200)
    if name == "log1p":
        return rng.uniform(-0.99, 50.0, 200)
    return np.concatenate([rng.normal(0.0, 3.0, 190), [0.0, -0.0, 0.3, -1.7, 2.0, -2.0, 25.0,
                                                       1e-300, 400.0, -400.0]])


def _scalar_partials(name, args, r):
    """The scalar rule's partial texts evaluated on one element, with numpy's functions."""
    _, partials, parameters = registry.named(name).formula
    names = [p.strip() for p in parameters.split(",")]
    values = dict(zip(names, args), r=r)
    with np.errstate(all="ignore"):
        return [eval(compile(ast.parse(text, mode="eval"), "<text>", "eval"),  # noqa: S307
                     dict(_NUMPY_SCALAR), values) for text in partials]


@pytest.mark.parametrize("ufunc", list(SAME_AS_MATH), ids=lambda u: u.__name__)
def test_numpy_functions_math_has_take_the_scalar_rules_formula(ufunc):
    """One formula per derivative: the element-wise partials of np.tanh are tanh's text,
    read element by element (rules/from_scalar.py), bit for bit."""
    name = SAME_AS_MATH[ufunc]
    if registry.named(name) is None:
        pytest.skip(f"math.{name} needs a newer Python")
    if catalogue.overridden(ufunc):
        pytest.skip("a rule registered by other code replaces astad's in this process")
    found = RECORDS[ufunc]
    _, texts, _ = registry.named(name).formula
    assert [p.text for p in found.partials] == list(texts)
    x = _domain(name)
    args = (x,) if ufunc.nin == 1 else (x, np.roll(x, 3) + 0.25)
    with np.errstate(all="ignore"):
        r = ufunc(*args)
        partials = [np.broadcast_to(p(*args, r), r.shape) for p in found.partials]
    for j in range(r.size):
        expected = _scalar_partials(name, [a[j] for a in args], r[j])
        for got, want in zip(partials, expected):
            assert got[j] == want or (np.isnan(got[j]) and np.isnan(want)), (j, args)


@pytest.mark.parametrize("ufunc", list(SAME_AS_MATH), ids=lambda u: u.__name__)
def test_large_arrays_give_the_same_partials_and_keep_their_inputs(ufunc):
    """On a large array the partial writes into its own temporaries (rules/from_scalar.py):
    the same values, bit for bit, as element by element in small pieces, and the
    arguments and the result it is given are left as they were."""
    name = SAME_AS_MATH[ufunc]
    if registry.named(name) is None or catalogue.overridden(ufunc):
        pytest.skip("no scalar rule here, or another rule replaces astad's")
    found = RECORDS[ufunc]
    x = np.tile(_domain(name), 30)  # 6000 elements: above the size that reuses
    args = (x,) if ufunc.nin == 1 else (x, np.roll(x, 3) + 0.25)
    with np.errstate(all="ignore"):
        r = ufunc(*args)
        kept = [a.copy() for a in args] + [r.copy()]
        whole = [np.broadcast_to(p(*args, r), r.shape) for p in found.partials]
        pieces = [np.concatenate([np.broadcast_to(p(*[a[k:k + 100] for a in args],
                                                    r[k:k + 100]), (100,))
                                  for k in range(0, r.size, 100)]) for p in found.partials]
    for got, want in zip(whole, pieces):
        np.testing.assert_array_equal(got, want)
    for before, now in zip(kept, list(args) + [r]):
        np.testing.assert_array_equal(before, now)


def tanh_of_math(x):
    return math.tanh(x)


def tanh_of_numpy(x):
    return np.tanh(x)


def test_math_and_numpy_tanh_differ_only_where_their_functions_do():
    """grad(math.tanh) and grad(np.tanh) are one formula: equal bit for bit wherever the
    C library's and numpy's tanh (the primal) and exp agree, at most points."""
    g_math, g_numpy = astad.grad(tanh_of_math), astad.grad(tanh_of_numpy)
    equal = checked = 0
    for x in np.linspace(-4.0, 4.0, 801):
        x = float(x)
        same_primal = math.tanh(x) == float(np.tanh(x))
        same_exp = math.exp(-2.0 * abs(x)) == float(np.exp(-2.0 * abs(x)))
        near = -3.0 < x < 3.0
        if same_primal and (near or same_exp):
            checked += 1
            equal += g_math(x) == float(g_numpy(np.float64(x)))
    assert checked > 400 and equal == checked


def test_the_compiled_rule_computes_the_same_formula():
    """np.tanh and np.sqrt on arrays near and far from 0, through the compiled rule where
    it is built: the element-wise partial of the scalar text, bit for bit."""
    x = np.concatenate([np.linspace(-6.0, 6.0, 61), [0.0, -0.0, 2.0, -2.0, 1.999]])

    def through(ufunc):
        def f(v):
            return np.sum(ufunc(v))
        return astad.grad(f)
    for ufunc, v in ((np.tanh, x), (np.sqrt, np.abs(x))):
        if catalogue.overridden(ufunc):
            continue
        with np.errstate(all="ignore"):
            expected = RECORDS[ufunc].partials[0](v, ufunc(v))
        np.testing.assert_array_equal(through(ufunc)(v), expected)


def test_one_record_per_callable_and_no_table_beside_it():
    """The tables the registry replaced are gone, and every registered callable's rule
    is reachable from its record."""
    import astad.rules.array as array_rules
    import astad.rules.scalar as scalar_rules
    import astad.runtime.array_dual as array_dual
    for module, names in ((array_rules, ["ELEMENTWISE", "VJPS", "JVPS", "BATCHED_VJPS",
                                         "BATCHED_JVPS", "RESULT_KIND", "SHAPES_ONLY",
                                         "PRIMAL_ONLY", "FINITE_PARTIALS"]),
                          (scalar_rules, ["PRIMITIVES", "UNARY_RULES", "BINARY_RULES",
                                          "TOTAL_RULES"]),
                          (array_dual, ["ARRAY_RULES", "PREPARE", "WRITERS", "VIEWS"])):
        for name in names:
            assert not hasattr(module, name), f"{module.__name__}.{name}"
    named = [found for found in set(RECORDS.values()) if found.name is not None]
    assert named and all(getattr(registry.ad, found.name) is found.call for found in named)


def test_a_name_in_ad_is_given_once():
    with pytest.raises(RuntimeError, match="published twice"):
        registry.publish("mixed", lambda *args: None)


def test_a_users_rule_renews_the_record_and_code_follows_it():
    """Registering a rule gives the callable a new record (holding what the old one
    held), and code transformed before depends on the record it found."""
    def cube(x):
        return x * x * x
    astad.register_scalar(cube, lambda x: 3.0 * x * x)
    first = RECORDS[cube]

    def f(x):
        return cube(x) + x
    assert astad.grad(f)(2.0) == 13.0
    astad.register_scalar(cube, lambda x: 0.0)
    assert RECORDS[cube] is not first
    assert astad.grad(f)(2.0) == 1.0


@pytest.mark.slow
def test_the_ad_namespace_and_registry_survive_a_fresh_process():
    """No import order is load-bearing: every name of ad is published once, whatever
    module is imported first."""
    code = ("import astad.rules.array_writes, astad; from astad import registry; "
            "print(len(vars(registry.ad)))")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout
    code2 = "import astad; from astad import registry; print(len(vars(registry.ad)))"
    second = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True,
                            check=True).stdout
    assert first == second
