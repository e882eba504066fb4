"""astad.testing.check_grads: passes on correct gradients, names the wrong entries."""
from __future__ import annotations

import copy
import math
import re
from collections import namedtuple
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pytest

import astad
from astad.testing import GradCheck, check_grads


def _failing_paths(message: str) -> list:
    """The paths in the table of a check_grads failure message, after checking that the
    message leads with the table and that its first line counts the table's rows."""
    lines = message.splitlines()
    assert lines[1].split() == ["path", "astad", "finite", "difference", "rel.", "error"]
    paths = [line.split()[0] for line in lines[2:] if line.startswith("  ")
             and not line.startswith("  (")]
    entries = re.search(r"(\d+) of (\d+) (?:gradient entries|entries of J\^T w)", lines[0])
    expected = (int(entries.group(1)) if entries else 0) + lines[0].count("the value") + \
        lines[0].count("the check along a random direction")
    assert len(paths) == expected, message
    assert sum(path.startswith("args") for path in paths) == expected - \
        lines[0].count("the value") - lines[0].count("the check along a random direction")
    return paths


def _row(message: str, path: str) -> list:
    for line in message.splitlines():
        if line.split() and line.split()[0] == path:
            return line.split()[1:]
    raise AssertionError(f"no row {path} in\n{message}")


@astad.reverse_diff
def loss(w, b, xs, ys):
    total = 0.0
    for x, y in zip(xs, ys):
        err = math.tanh(w * x + b) - y
        total += err * err
    return total / len(xs)


# -- correct gradients pass -----------------------------------------------------------------
def test_decorated_function_passes_and_reports():
    result = check_grads(loss, 0.5, 0.1, [1.0, 2.0], [0.3, 0.8])
    assert isinstance(result, GradCheck)
    assert result.checked == 6  # w, b, two xs, two ys
    assert result.scalar_result
    assert result.max_rel_error < 1e-6
    assert str(result).startswith("OK: loss: 6 gradient entries match")


def test_plain_function_is_decorated():
    def f(x, y):
        return x * math.exp(y) + math.sqrt(x)
    assert check_grads(f, 1.5, -0.3).checked == 2


def test_preaccumulate_false_is_kept():
    def f(x, y):
        return math.sin(x * y) / (1.0 + x * x)
    g = astad.reverse_diff(f, preaccumulate=False)
    assert check_grads(g, 0.7, 1.3).checked == 2
    assert check_grads(g, 0.7, 1.3, argnums=1).checked == 1


def test_structures_paths_and_non_float_leaves():
    Pair = namedtuple("Pair", "a b")

    def f(p, d, t, n):
        return p.a * d["k"] + t[0] * p.b + n * t[1] + len(d["name"])
    result = check_grads(f, Pair(1.0, 2.0), {"k": 3.0, "name": "xy"}, (0.5, 4.0), 3)
    assert result.checked == 5  # ints and strings are not differentiated
    paths = [r.path for r in result.comparisons]
    assert paths[1:] == ["args[0].a", "args[0].b", "args[1]['k']", "args[2][0]",
                         "args[2][1]"]


def test_argnums_and_kwargs():
    def f(x, ys, scale=1.0):
        return scale * x * sum(y * y for y in ys)
    result = check_grads(f, 2.0, [1.0, 3.0], argnums=1, kwargs={"scale": 0.5})
    assert [r.path for r in result.comparisons][1:] == ["args[1][0]", "args[1][1]"]
    result = check_grads(f, 2.0, [1.0, 3.0], argnums=(0,))
    assert [r.path for r in result.comparisons][1:] == ["args[0]"]


def test_decorator_argnums_are_used():
    @astad.reverse_diff(argnums=(1,))
    def f(x, y, z):
        return x * y * z
    result = check_grads(f, 1.0, 2.0, 3.0)
    assert [r.path for r in result.comparisons][1:] == ["args[1]"]
    result = check_grads(f, 1.0, 2.0, 3.0, argnums=-1)
    assert [r.path for r in result.comparisons][1:] == ["args[2]"]


def test_single_parameter_function():
    def f(xs):
        return sum(math.sin(x) for x in xs)
    assert check_grads(f, [0.1, 0.2, 0.3]).checked == 3

    def g(x):
        return math.log(x) * x
    assert check_grads(g, 2.0).checked == 1


def test_arguments_are_not_modified():
    def f(xs, log):
        log.append(xs[0])
        xs.append(1.0)
        xs[0] = xs[0] * 2.0
        return sum(x * x for x in xs)
    xs, log = [1.0, 2.0], []
    check_grads(f, xs, log, argnums=0)
    assert xs == [1.0, 2.0] and log == []


# -- a deliberately wrong derivative is caught, at the right path ---------------------------
def test_wrong_scalar_derivative_names_the_argument():
    def twice_sq(x):
        return 2.0 * x * x
    astad.register_scalar(twice_sq, lambda x: 2.0 * x)  # wrong: should be 4x

    def f(x, y):
        return twice_sq(x) + math.sin(y)
    with pytest.raises(AssertionError) as info:
        check_grads(f, 1.5, 0.2)
    message = str(info.value)
    assert message.startswith("check_grads(")
    assert "1 of 2 gradient entries disagree" in message
    assert _failing_paths(message) == ["args[0]"]
    astad_value, fd, rel = _row(message, "args[0]")
    assert float(astad_value) == pytest.approx(3.0)
    assert float(fd) == pytest.approx(6.0, rel=1e-6)
    assert float(rel) == pytest.approx(0.5, rel=1e-3)


@dataclass
class Layer:
    weight: list
    bias: list


@dataclass
class Model:
    layers: list
    scale: float = 1.0
    name: str = "m"


def test_wrong_derivative_deep_in_a_dataclass():
    def soft(x):
        return math.log1p(math.exp(x))
    astad.register_scalar(soft, lambda x: 1.0 / (1.0 + math.exp(x)))  # wrong sign of x

    def predict(model, x):
        total = 0.0
        for k, layer in enumerate(model.layers):
            for w, b in zip(layer.weight, layer.bias):
                z = w * x + b
                total += soft(z) if (k == 1 and b > 0.35) else z * z
        return model.scale * total

    model = Model([Layer([0.1, 0.2], [0.3, 0.25]), Layer([0.5, -0.4, 0.3, 0.2],
                                                        [0.1, 0.2, 0.3, 0.4])])
    snapshot = copy.deepcopy(model)
    with pytest.raises(AssertionError) as info:
        check_grads(predict, model, 0.7)
    message = str(info.value)
    paths = _failing_paths(message)
    # only bias[3] of layer 1 goes through the wrong rule (and the weight paired with it,
    # and x, which every term depends on)
    assert "args[0].layers[1].bias[3]" in paths
    assert "args[0].layers[1].weight[3]" in paths
    assert set(paths) <= {"args[0].layers[1].bias[3]", "args[0].layers[1].weight[3]",
                          "args[1]", "args[0].scale"}
    assert not any(p.startswith("args[0].layers[0]") for p in paths)
    assert model == snapshot


# -- non-scalar results: the adjoint identity -----------------------------------------------
def test_vector_result_passes():
    def f(x, y):
        return [x * y, math.sin(x)], {"a": x + y, "n": 3}
    result = check_grads(f, 1.0, 2.0)
    assert not result.scalar_result
    assert result.checked == 2
    assert str(result).startswith("OK: f: 2 entries of J^T w")
    assert [r.path for r in result.comparisons] == [
        "<w, value>", "args[0]", "args[1]", "<J^T w, v> (random direction v)"]


def test_vector_result_with_wrong_derivative():
    def cube(x):
        return x ** 3
    astad.register_scalar(cube, lambda x: 3.0 * x)  # wrong: 3 x^2

    def f(x, y):
        return (cube(y) + x, x * y)
    with pytest.raises(AssertionError) as info:
        check_grads(f, 0.5, 2.0)
    message = str(info.value)
    assert message.startswith("check_grads(f): 1 of 2 entries of J^T w and the check along "
                              "a random direction disagree")
    paths = _failing_paths(message)
    assert paths == ["args[1]", "<J^T"]


def test_dataclass_result():
    @dataclass
    class Out:
        total: float
        parts: list = field(default_factory=list)

    def f(xs):
        return Out(sum(xs), [x * x for x in xs])
    assert check_grads(f, [1.0, -2.0, 0.5]).checked == 3


# -- numpy arrays ---------------------------------------------------------------------------
def test_array_arguments_and_sampling():
    rng = np.random.default_rng(3)
    W, b, x = rng.standard_normal((6, 5)), rng.standard_normal(6), rng.standard_normal(5)

    def mlp(W, b, x):
        return np.sum(np.tanh(W @ x + b) ** 2)
    result = check_grads(mlp, W, b, x)
    paths = [r.path for r in result.comparisons]
    # 30 elements of W: 20 sampled (fixed seed); all of b and x
    assert sum(p.startswith("args[0][") for p in paths) == 20
    assert sum(p.startswith("args[1][") for p in paths) == 6
    assert "args[0][0, 0]" in paths or any(re.fullmatch(r"args\[0\]\[\d, \d\]", p)
                                           for p in paths)
    assert paths[-1] == "<gradient, v> (random direction v)"
    assert result.checked == 31
    # the same seed samples the same elements
    again = check_grads(mlp, W, b, x)
    assert [r.path for r in again.comparisons] == paths
    assert check_grads(mlp, W, b, x, max_elements=100).checked == 41


def test_array_result():
    def f(x, A):
        return A @ np.sin(x)
    rng = np.random.default_rng(0)
    result = check_grads(f, rng.standard_normal(4), rng.standard_normal((3, 4)))
    assert not result.scalar_result and result.checked == 16


@pytest.fixture
def restore_array_rules():
    """Rules registered in a test for numpy's own functions are removed afterwards."""
    from astad.registry import RECORDS
    saved = dict(RECORDS)
    yield
    RECORDS.clear()
    RECORDS.update(saved)


def test_wrong_elementwise_derivative_on_arrays(restore_array_rules):
    # np.sinc reaches astad through numpy's dispatch, so its registered rule is used
    astad.register_elementwise(np.sinc, lambda x, r: np.cos(np.pi * x))  # wrong

    @dataclass
    class Params:
        w: np.ndarray
        bias: np.ndarray

    def f(p, x):
        return np.sum(np.sinc(p.w * x) + p.bias)
    p = Params(np.array([0.5, -1.5, 2.5]), np.array([0.1, 0.2, 0.3]))
    with pytest.raises(AssertionError) as info:
        check_grads(f, p, np.array([1.0, 0.5, -0.25]))
    paths = _failing_paths(str(info.value))
    assert {"args[0].w[0]", "args[0].w[1]", "args[0].w[2]", "args[1][0]"} <= set(paths)
    assert not any(path.startswith("args[0].bias") for path in paths)


@dataclass
class ArrayLayer:
    weight: np.ndarray
    bias: np.ndarray


@dataclass
class ArrayModel:
    layers: list


def test_wrong_derivative_at_one_array_element_in_a_dataclass():
    def smooth_abs(x):
        return math.sqrt(x * x + 1e-2)
    astad.register_scalar(smooth_abs, lambda x: x / smooth_abs(x) + 0.5)  # wrong

    def f(model, x):
        total = 0.0
        for layer in model.layers:
            total += np.sum(np.tanh(layer.weight @ x + layer.bias))
        return total + smooth_abs(model.layers[1].bias[3])
    rng = np.random.default_rng(7)
    model = ArrayModel([ArrayLayer(rng.standard_normal((5, 3)), rng.standard_normal(5)),
                        ArrayLayer(rng.standard_normal((5, 3)), rng.standard_normal(5))])
    with pytest.raises(AssertionError) as info:
        check_grads(f, model, rng.standard_normal(3))
    message = str(info.value)
    assert _failing_paths(message) == ["args[0].layers[1].bias[3]"]
    assert "1 of 43 gradient entries disagree" in message  # 15 + 5 + 15 + 5 + 3


def test_wrong_derivative_found_outside_the_sample():
    def spike(x):
        return x * x
    astad.register_scalar(spike, lambda x: 2.0 * x + 1.0)  # wrong

    def f(x):
        return np.sum(np.sin(x)) + spike(x[137])
    x = np.linspace(-1.0, 1.0, 200)
    with pytest.raises(AssertionError) as info:
        check_grads(f, x, max_elements=5)
    message = str(info.value)
    paths = _failing_paths(message)
    assert "args[0][137]" not in paths  # not sampled with seed 0...
    assert paths == ["<gradient,"]       # ...but the random direction finds it
    assert "large arrays were sampled" in message


def test_float32_arrays():
    def f(x):
        return np.sum(np.exp(x) * x)
    x = np.array([0.1, 0.5, -0.3], dtype=np.float32)
    assert check_grads(f, x, rtol=1e-2, atol=1e-3).checked == 3


def test_typed_namedtuple_of_arrays():
    class State(NamedTuple):
        pos: np.ndarray
        mass: float

    def energy(s):
        return 0.5 * s.mass * np.sum(s.pos * s.pos)
    result = check_grads(energy, State(np.array([1.0, 2.0]), 3.0))
    assert [r.path for r in result.comparisons][1:] == ["args[0].pos[0]", "args[0].pos[1]",
                                                        "args[0].mass"]


# -- errors ---------------------------------------------------------------------------------
def test_result_without_floats_is_an_error():
    def f(x):
        return [int(x), "a"]
    with pytest.raises(ValueError, match="holds no float"):
        check_grads(f, 1.0)


def test_argnums_out_of_range():
    def f(x):
        return x
    with pytest.raises((ValueError, astad.AstadError)):
        check_grads(f, 1.0, argnums=3)


def test_astad_errors_propagate():
    def f(x):
        return x
    with pytest.raises(astad.InputError):
        check_grads(f, 3)  # an int: nothing to differentiate


def test_a_float_result_is_checked_through_grad_and_vjp_alike():
    # .grad runs the specialised float code where there is one, .vjp always the tape:
    # check_grads checks the first against finite differences, and the second against it
    def f(x, y):
        s = 0.0
        for _ in range(3):
            s = s + x * y
        return s

    g = astad.reverse_diff(f)
    assert "_floats(" in g.source
    assert check_grads(g, 1.5, -0.5).checked == 2
    diff = g.grad.__self__
    entry = diff.entry  # (this test's own function: nothing else shares it)
    right = entry.tapeless

    def written(tapeless):  # (an entry of its own: the compiled checks read it once)
        made = copy.copy(entry)
        made.tapeless = tapeless
        diff.entry = made
    written(lambda x, y: (right(x, y)[0], (1.0, 1.0)))  # a wrong specialised code
    try:
        with pytest.raises(AssertionError, match=r"args\[0\]"):
            check_grads(g, 1.5, -0.5)
        # the same gradient as the tape's, written out: passes
        written(lambda x, y: (right(x, y)[0], (3 * y, 3 * x)))
        assert check_grads(g, 1.5, -0.5).checked == 2
        # a pullback that disagrees with .grad
        g.vjp = lambda *args: (f(*args), lambda cotangent: (0.0, 0.0))
        with pytest.raises(AssertionError, match=r"disagree at args\[0\]"):
            check_grads(g, 1.5, -0.5)
    finally:
        diff.entry = entry


def test_a_wrong_forward_value_is_named_apart_from_the_gradient():
    @astad.custom_vjp
    def doubled(x):
        return 2.0 * x
    doubled.defvjp(lambda x: (3.0 * x, None), lambda residuals, g: (2.0 * g,))  # fwd: wrong

    def f(x):
        return doubled(x) + 1.0
    with pytest.raises(AssertionError) as info:
        check_grads(f, 0.5)
    message = str(info.value)
    assert message.splitlines()[0] == (
        "check_grads(f): the value astad computes disagrees with the function's own; "
        "the gradient entry checked one by one agrees")
    assert _failing_paths(message) == ["value"]
    assert _row(message, "value")[:2] == ["2.5", "2"]


# -- in pytest: the failure is the table, not astad's source --------------------------------
FAILING_TESTS = '''
import math

import numpy as np

import astad
from astad.testing import check_grads


def cube(x):
    return x * x * x


astad.register_scalar(cube, lambda x: 2.0 * x * x)  # wrong on purpose: 3 x^2


def cube_all(w):
    return w * w * w


astad.register_vjp(cube_all, lambda g, result, w: g * 2.0 * w * w)  # wrong: 3 w^2


def test_scalar():
    check_grads(lambda x, y: cube(x) + math.sin(y), 2.0, -1.0)


def test_array_of_24():
    check_grads(lambda w: np.sum(cube_all(w)), np.linspace(0.5, 2.0, 24))


def test_array_of_12_and_a_float():
    check_grads(lambda w, s: s * np.sum(cube_all(w)), np.linspace(0.5, 2.0, 12), 1.5)
'''


@pytest.mark.slow
def test_pytest_shows_the_table_first_and_none_of_astads_source(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "test_failing_gradients.py").write_text(FAILING_TESTS)
    env = {**__import__("os").environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "-q", "test_failing_gradients.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    output = result.stdout
    assert result.returncode == 1 and "3 failed" in output, output + result.stderr
    # not one line of astad's own source is printed (nor its file, as a frame)
    source_lines = {line.strip() for path in (root / "astad").rglob("*.py")
                    for line in path.read_text().splitlines() if len(line.strip()) > 12}
    shown = [line for line in output.splitlines()
             if line.strip().lstrip(">").strip() in source_lines]
    assert not shown, shown
    assert str(root / "astad") not in output
    # each failure: the test's own line, then at once the message and its table, whose
    # first line counts exactly the rows of the table
    sections = output.split("_____ test_")[1:]
    assert len(sections) == 3
    for section in sections:
        lines = section.splitlines()
        call = next(k for k, line in enumerate(lines) if line.startswith(">"))
        assert "check_grads(" in lines[call]
        message = [line.removeprefix("E       ") for line in lines[call + 1:]
                   if line.startswith("E       ")]  # pytest's prefix of a message line
        assert message[0].startswith("AssertionError: check_grads(")
        message[0] = message[0].removeprefix("AssertionError: ")
        assert _failing_paths("\n".join(message))
    array = next(s for s in sections if s.startswith("array_of_24"))
    assert "20 of 20 gradient entries and the check along a random direction disagree" in \
        array  # 24 elements: 20 sampled one by one, and one direction over all 24
    both = next(s for s in sections if s.startswith("array_of_12"))
    assert "12 of 13 gradient entries disagree" in both  # 12 elements wrong, the float right
