"""IPython's ``%autoreload 2``: editing a module on disk, lines added or removed above a
decorated function, must not break its next gradient, and the gradient must be the new
code's.

Each test runs a real IPython session (``InteractiveShell``, in a subprocess so that the
shell's global state stays out of this test process) that imports a module, differentiates
its functions, edits the file and differentiates again. IPython 9 reloads in two ways:
"deduperreload" (the default of ``%autoreload 2``) recompiles only the definitions whose
text changed, from re-printed text, so unchanged functions keep code objects naming their
old lines and changed ones name lines of the re-printed text; ``--full`` re-executes the
module and patches the old functions' code. Both are checked where the IPython installed
has them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("IPython")

ROOT = Path(__file__).resolve().parent.parent

MODULE = '''\
import astad


def helper(x):
    return x * 2.0


class Spring:
    def __init__(self, k):
        self.k = k

    def energy(self, x):
        return 0.5 * self.k * x * x


@astad.reverse_diff
def f(x):
    return (x
            * helper(x) + Spring(3.0).energy(x))


@astad.reverse_diff
def g(x):
    scale = 2.0
    return sum(map(lambda t: t * scale, [x, x * x]))
'''

# (what to replace in the file, by what) for each step; after each, f.grad(3.0) and
# g.grad(3.0) from the new code, derived by hand. (f spans two lines: deduperreload
# compiles its edited version from text re-printed on one line, whose instructions differ
# from the file's on Python 3.13: the two loads of x are not on one line in the file.)
EDITS = [
    # a line inserted in the helper above f: f = 3 x^2 + 1.5 x^2, f' = 9 x
    ("    return x * 2.0\n", "    y = 3.0\n    return x * y\n"),
    # three lines removed above f (and above Spring.energy): f = 2 x^2 + 1.5 x^2
    ("    y = 3.0\n    return x * y\n\n\n", "    return x * 2.0\n"),
    # f and g themselves changed: f = 2 x^3 + 1.5 x^2, g = 4 (x + x^2)
    ("            * helper(x) + ", "            * x * helper(x) + "),
    ("t * scale,", "t * scale * scale,"),
    # a line inserted in the method: f = 2 x^3 + 3 x^2
    ("        return 0.5 * self.k * x * x\n",
     "        half = 1.0\n        return half * self.k * x * x\n"),
]
EXPECTED = [(7 * 3.0, 2 + 4 * 3.0),        # before any edit: 4 x + 3 x, 2 + 4 x
            (9 * 3.0, 2 + 4 * 3.0),
            (7 * 3.0, 2 + 4 * 3.0),
            (6 * 9.0 + 3 * 3.0, 2 + 4 * 3.0),
            (6 * 9.0 + 3 * 3.0, 4 + 8 * 3.0),
            (6 * 9.0 + 6 * 3.0, 4 + 8 * 3.0)]

SESSION = '''\
import json, os, sys
from IPython.core.interactiveshell import InteractiveShell

mode, path, edits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
shell = InteractiveShell.instance()


def run(cell):
    result = shell.run_cell(cell)
    if not result.success:
        raise SystemExit(f"cell failed: {cell!r}: {result.error_in_exec!r}")


def record():
    run("import linecache\\n"
        "first, lines = astad.front.source.definition_lines(f)\\n"
        "_step = {'grads': [f.grad(3.0), g.grad(3.0)],\\n"
        "         'definition': [first, lines[0], lines[-1]],\\n"
        "         'file': [linecache.getline(f.__code__.co_filename, first).rstrip()]}")
    print(json.dumps(shell.user_ns["_step"]), flush=True)


run("%load_ext autoreload")
run(f"%autoreload {mode}")
run("import astad\\nimport astad.front.source\\nfrom shifting import f, g")
record()
run("pass")  # (deduperreload learns a module's text on the cell after its import)
mtime = os.stat(path).st_mtime
for k, (old, new) in enumerate(edits):
    with open(path) as file:
        text = file.read()
    assert old in text, old
    with open(path, "w") as file:
        file.write(text.replace(old, new, 1))
    os.utime(path, (mtime + 10 * (k + 1), mtime + 10 * (k + 1)))  # seen as newer
    record()
'''


def _modes():
    from IPython.extensions import autoreload
    deduper = hasattr(autoreload, "DeduperReloader")
    return ["2", "2 --full"] if deduper else ["2"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", _modes())
def test_gradients_follow_edits_above_and_inside_decorated_functions(tmp_path, mode):
    path = tmp_path / "shifting.py"
    path.write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-c", SESSION, mode, str(path),
                             json.dumps(EDITS)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = [json.loads(line) for line in result.stdout.splitlines()
             if line.startswith("{")]
    assert len(steps) == len(EXPECTED), result.stdout + result.stderr
    for k, (step, (df, dg)) in enumerate(zip(steps, EXPECTED)):
        assert step["grads"] == [pytest.approx(df), pytest.approx(dg)], (k, step)
        # the definition astad read is f's, where the file has it now
        first, decorator, last = step["definition"]
        assert decorator == "@astad.reverse_diff" == step["file"][0]
        assert last.endswith("helper(x) + Spring(3.0).energy(x))")
    final = path.read_text().splitlines()
    assert final[steps[-1]["definition"][0] - 1] == "@astad.reverse_diff"


def test_a_file_edited_without_reload_is_an_error_not_a_silent_mismatch(tmp_path):
    # the code that runs is the old one; the file's text is new: astad must not
    # differentiate the new text as if it were the code that runs
    import importlib.util

    import astad
    path = tmp_path / "edited_module.py"
    path.write_text(textwrap.dedent('''\
        def loss(x):
            return x * x
        '''))
    spec = importlib.util.spec_from_file_location("edited_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.write_text(textwrap.dedent('''\
        # a line above moves the function


        def loss(x):
            return x * x * x
        '''))
    os.utime(path, (path.stat().st_mtime + 10,) * 2)
    with pytest.raises(astad.SourceUnavailableError, match="no longer matches the code"):
        astad.reverse_diff(module.loss)
    # once the module is loaded again, its new code is differentiated
    spec.loader.exec_module(module)
    assert astad.reverse_diff(module.loss).grad(2.0) == 12.0
