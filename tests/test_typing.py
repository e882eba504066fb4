"""Type checkers see a decorated function's signature (mypy run on user files).

``reverse_diff`` is typed with ``ParamSpec``: calling the decorated function, and its
``.grad``, ``.value_and_grad`` and ``.vjp``, are checked against the user's parameters,
and through an instance a decorated method's first parameter is bound.
"""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMMON = """\
    import astad


    @astad.reverse_diff
    def loss(w: float, b: float, xs: list[float]) -> float:
        return w * b * sum(xs)


    class Model:
        def __init__(self, scale: float) -> None:
            self.scale = scale

        @astad.reverse_diff
        def energy(self, x: float) -> float:
            return self.scale * x * x


    m = Model(2.0)
"""

FILES = {
    "correct.py": """\
        value: float = loss(0.5, 0.1, [1.0])
        gradient = loss.grad(0.5, 0.1, [1.0])
        v, g = loss.value_and_grad(0.5, 0.1, [1.0])
        also: float = v
        out, pullback = loss.vjp(0.5, 0.1, [1.0])
        pullback(1.0)
        e: float = m.energy(1.0)
        m.energy.grad(1.0)
        Model.energy.grad(m, 1.0)
        Model.energy(m, 1.0)
        text: str = loss.source


        @astad.reverse_diff(argnums=0)
        def scaled(x: float, k: int = 2) -> float:
            return k * x


        scaled.grad(1.5, k=3)
        """,
    "mistakes.py": """\
        loss(0.5, "oops", [1.0])
        loss.grad(0.5, 0.1, ["a"])
        m.energy.grad("x")
        Model.energy.grad(1.0)
        bad: str = loss(0.5, 0.1, [1.0])
        """,
    "transforms.py": """\
        import numpy as np

        g = astad.grad(loss)
        dw = g(0.5, 0.1, [1.0])
        text2: str = g.source
        value2, grads = astad.value_and_grad(loss, argnums=(0, 1))(0.5, 0.1, [1.0])
        v2: float = value2
        out2, back = astad.vjp(loss, 0.5, 0.1, [1.0])
        o2: float = out2
        back(1.0)
        out3, tangent = astad.jvp(loss, (0.5, 0.1, [1.0]), (1.0, 0.0, [0.0]))
        o3: float = out3
        astad.jacfwd(loss)(0.5, 0.1, [1.0])
        astad.jacrev(loss, argnums=1)(0.5, 0.1, [1.0])
        astad.jacobian(loss)(0.5, 0.1, [1.0])
        astad.hessian(loss, argnums=(0, 1))(0.5, 0.1, [1.0])
        astad.grad(astad.grad(np.sin))(0.3)
        """,
    "transform_mistakes.py": """\
        astad.grad(loss)(0.5, "oops", [1.0])
        astad.hessian(loss)(0.5, 0.1)
        bad2: str = astad.value_and_grad(loss)(0.5, 0.1, [1.0])[0]
        astad.jvp(loss, 0.5, 1.0)
        """,
    "revealed.py": """\
        reveal_type(loss)
        reveal_type(loss.grad)
        reveal_type(m.energy)
        reveal_type(m.energy.value_and_grad)
        reveal_type(Model.energy)
        reveal_type(astad.grad(loss))
        reveal_type(astad.value_and_grad(loss))
        reveal_type(astad.hessian(loss))
        """,
}


def run_mypy(tmp_path):
    for name, body in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(COMMON) + "\n" + textwrap.dedent(body))
    # astad's own modules other than its API are not checked here (numpy's stubs alone
    # take seconds); what the user's files see of astad is api/methods.py's annotations
    (tmp_path / "mypy.ini").write_text("[mypy]\nfollow_imports = skip\n"
                                       "ignore_missing_imports = True\n"
                                       "[mypy-astad,astad.api,astad.api.methods,"
                                       "astad.api.signatures]\n"
                                       "follow_imports = silent\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini",
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", *FILES],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert not result.stderr, result.stderr
    found: dict = {name: [] for name in FILES}
    for line in result.stdout.splitlines():
        match = re.match(r"(\w+\.py):(\d+): (error|note): (.*)", line)
        assert match, line
        found[match.group(1)].append((int(match.group(2)), match.group(3), match.group(4)))
    return found


@pytest.mark.slow
def test_mypy_checks_calls_against_the_decorated_signature(tmp_path):
    found = run_mypy(tmp_path)
    assert found["correct.py"] == []
    assert found["transforms.py"] == []
    offset = len(textwrap.dedent(COMMON).splitlines()) + 1  # the user's lines start here
    errors: dict = {}
    for line, kind, message in found["mistakes.py"]:
        if kind == "error":
            errors[line - offset] = errors.get(line - offset, "") + message + "\n"
    assert sorted(errors) == [1, 2, 3, 4, 5]
    assert 'Argument 2 to "__call__" of "GradientFunction" has incompatible type "str"; ' \
           'expected "float"' in errors[1]
    assert 'List item 0 has incompatible type "str"; expected "float"' in errors[2]
    assert 'Argument 1 to "grad" of "GradientFunction" has incompatible type "str"; ' \
           'expected "float"' in errors[3]
    assert 'Missing positional argument "x" in call to "grad"' in errors[4]
    assert 'Incompatible types in assignment (expression has type "float", variable has ' \
           'type "str")' in errors[5]
    # (older mypy versions spell builtins.float)
    revealed = [message.replace("builtins.", "") for _, kind, message in found["revealed.py"]
                if kind == "note"]
    assert revealed == [
        'Revealed type is "astad.api.methods.GradientFunction[[w: float, b: float, '
        'xs: list[float]], float]"',
        'Revealed type is "def (w: float, b: float, xs: list[float]) -> Any"',
        'Revealed type is "astad.api.methods.GradientFunction[[x: float], float]"',
        'Revealed type is "def (x: float) -> tuple[float, Any]"',
        'Revealed type is "astad.api.methods.GradientFunction[[self: revealed.Model, x: float], '
        'float]"',
        'Revealed type is "astad.api.signatures.Gradient[[w: float, b: float, '
        'xs: list[float]], Any]"',
        'Revealed type is "astad.api.signatures.Transformed[[w: float, b: float, '
        'xs: list[float]], tuple[float, Any]]"',
        'Revealed type is "astad.api.signatures.Transformed[[w: float, b: float, '
        'xs: list[float]], Any]"',
    ]
    # the transforms are checked against the function's own parameters (the user's lines
    # start after COMMON's)
    errors = {}
    for line, kind, message in found["transform_mistakes.py"]:
        if kind == "error":
            errors[line - offset] = errors.get(line - offset, "") + message + "\n"
    assert sorted(errors) == [1, 2, 3, 4], errors
    assert 'Argument 2 to "__call__" of "Transformed" has incompatible type "str"; ' \
           'expected "float"' in errors[1]
    assert 'Missing positional argument "xs"' in errors[2]
    assert 'expression has type "float", variable has type "str"' in errors[3]
    assert 'No overload variant of "jvp" matches argument types' in errors[4]
