"""Tracebacks show the user's code: astad's own frames are hidden from an exception that
leaves a public entry point (as JAX hides its own), ASTAD_TRACEBACK_FILTERING=off shows
them, and a crash inside astad keeps them (what a bug report needs). Checked in this
process, in a script run as Python runs it, and in a notebook kernel."""
import math
import os
import re
import struct
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import astad
from astad.errors import ASTAD_DIR

# Python 3.10 re-raises the traceback an entry point caught, whose first entry is the
# entry point's own frame: that one stays (errors.hide_own_frames)
ALLOWED = 0 if sys.version_info >= (3, 11) else 1


def astad_frames(error: BaseException) -> list:
    return [frame for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename.startswith(ASTAD_DIR + os.sep)]


def user_lines(error: BaseException) -> list:
    return [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == __file__]


def packed(x):  # a C function without a rule, on a differentiated value
    return struct.unpack("d", struct.pack("d", x))[0] * x


def calls_packed(x):
    y = 2.0 * x
    return packed(y) + math.sin(y)


def raises_its_own(x):
    if x > 0.0:
        raise ValueError("the user's own error")
    return x


def generator(x):
    yield x


def array_packed(v):
    return np.sum(v * packed(float(v[0])))


CALLS = {
    "grad": lambda: astad.grad(calls_packed)(0.5),
    "value_and_grad": lambda: astad.value_and_grad(calls_packed)(0.5),
    "decorated .grad": lambda: astad.reverse_diff(calls_packed).grad(0.5),
    "decorated .value_and_grad": lambda: astad.reverse_diff(calls_packed).value_and_grad(0.5),
    "decorated .vjp": lambda: astad.reverse_diff(calls_packed).vjp(0.5),
    "decorated .jvp": lambda: astad.reverse_diff(calls_packed).jvp((0.5,), (1.0,)),
    "jvp": lambda: astad.jvp(calls_packed, (0.5,), (1.0,)),
    "vjp": lambda: astad.vjp(calls_packed, 0.5),
    "jacfwd": lambda: astad.jacfwd(calls_packed)(0.5),
    "jacrev": lambda: astad.jacrev(calls_packed)(0.5),
    "jacobian": lambda: astad.jacobian(calls_packed)(0.5),
    "hessian": lambda: astad.hessian(calls_packed)(0.5),
    "grad of grad": lambda: astad.grad(astad.grad(calls_packed))(0.5),
    "check_grads": lambda: astad.testing.check_grads(calls_packed, 0.5),
    "arrays": lambda: astad.grad(array_packed)(np.array([0.5, 1.0])),
}


@pytest.mark.parametrize("call", list(CALLS), ids=list(CALLS))
def test_a_refusal_at_run_time_shows_the_users_frames_only(call):
    with pytest.raises(astad.NotDifferentiableError) as caught:
        CALLS[call]()
    error = caught.value
    assert len(astad_frames(error)) <= ALLOWED, astad_frames(error)
    # the user's lines remain: the call here, and the line in packed that was refused
    lines = user_lines(error)
    assert packed.__code__.co_firstlineno + 1 in lines


@pytest.mark.parametrize("call", ["grad", "decorated .grad", "jvp", "vjp", "jacrev"])
def test_the_users_own_exception_keeps_its_frames_without_astads(call):
    runs = {"grad": lambda: astad.grad(raises_its_own)(0.5),
            "decorated .grad": lambda: astad.reverse_diff(raises_its_own).grad(0.5),
            "jvp": lambda: astad.jvp(raises_its_own, (0.5,), (1.0,)),
            "vjp": lambda: astad.vjp(raises_its_own, 0.5),
            "jacrev": lambda: astad.jacrev(raises_its_own)(0.5)}
    with pytest.raises(ValueError, match="the user's own error$") as caught:
        runs[call]()
    assert len(astad_frames(caught.value)) <= ALLOWED
    assert raises_its_own.__code__.co_firstlineno + 2 in user_lines(caught.value)


def test_a_refusal_at_decoration_shows_the_users_frames_only():
    with pytest.raises(astad.UnsupportedSyntaxError) as caught:
        astad.reverse_diff(generator)
    assert len(astad_frames(caught.value)) <= ALLOWED
    # no frame of the standard library astad called (ast.py's visitors) either
    assert not [frame for frame in traceback.extract_tb(caught.value.__traceback__)
                if frame.filename.endswith(os.sep + "ast.py")]


def test_the_switch_shows_astads_frames(monkeypatch):
    monkeypatch.setenv("ASTAD_TRACEBACK_FILTERING", "off")
    with pytest.raises(astad.NotDifferentiableError) as caught:
        astad.grad(calls_packed)(0.5)
    assert len(astad_frames(caught.value)) > 3


def test_a_crash_inside_astad_keeps_astads_frames(monkeypatch):
    """A bug of astad's (an exception that is not an AstadError, raised in astad's code)
    keeps the frames that locate it."""
    from astad.compile import pipeline
    monkeypatch.setattr(pipeline, "front", int)  # int(fn): a TypeError raised inside astad
    with pytest.raises(TypeError) as caught:
        astad.reverse_diff(lambda x: 2.0 * x)
    assert any(frame.filename.endswith(os.path.join("compile", "pipeline.py"))
               for frame in astad_frames(caught.value))


SCRIPT = """\
import struct
import astad


def packed(x):
    return struct.unpack("d", struct.pack("d", x))[0] * x


@astad.reverse_diff
def model(x):
    return packed(2.0 * x)


model.grad(0.5)
"""


@pytest.mark.parametrize("filtering", ["on", "off"])
def test_a_script_prints_the_users_frames_only(tmp_path, filtering):
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, ASTAD_TRACEBACK_FILTERING=filtering)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 1
    printed = run.stderr
    assert printed.startswith("Traceback (most recent call last):")
    frames = [line.strip() for line in printed.splitlines() if line.startswith('  File "')]
    own = [line for line in frames if ASTAD_DIR in line]
    user = [line for line in frames if str(script) in line]
    assert [line.rsplit(" in ", 1)[1] for line in user] == ["<module>", "model", "packed"]
    if filtering == "on":
        assert len(own) <= ALLOWED, printed
    else:
        assert len(own) > 3, printed
    assert "astad.errors.NotDifferentiableError: a differentiated value is passed to 'pack'" \
        in printed
    assert f"at {script}:6" in printed  # (and its column, where Python keeps columns)


def test_the_interactive_prompt_says_what_to_do():
    """Python's plain prompt before 3.13 keeps no source: the error says where to put the
    function instead."""
    typed = "import astad\ndef f(x):\n    return x * x\n\nastad.grad(f)(1.0)\n"
    run = subprocess.run([sys.executable, "-i", "-q"], input=typed, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHON_BASIC_REPL="1"))
    if sys.version_info >= (3, 13) and "SourceUnavailableError" not in run.stderr:
        pytest.skip("this Python's prompt keeps the source of what is typed")
    assert "SourceUnavailableError" in run.stderr
    assert "put the function in a file" in run.stderr and "notebook" in run.stderr
    frames = [line for line in run.stderr.splitlines() if line.startswith('  File "')]
    assert not [line for line in frames if ASTAD_DIR in line][ALLOWED:], run.stderr


NOTEBOOK_CELLS = [
    "import struct\nimport astad",
    textwrap.dedent("""\
        def packed(x):
            return struct.unpack("d", struct.pack("d", x))[0] * x"""),
    "astad.grad(packed)(0.5)",
    textwrap.dedent("""\
        def generator(x):
            yield x
        astad.reverse_diff(generator)"""),
]


@pytest.mark.slow
def test_a_notebook_shows_cells_by_their_names_and_no_astad_frames(
        tmp_path, python3_kernel_is_this_interpreter):
    nbclient = pytest.importorskip("nbclient")
    import nbformat
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS])
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=120,
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = {k: output for k, cell in enumerate(notebook.cells)
              for output in cell.get("outputs", []) if output.output_type == "error"}
    assert sorted(errors) == [2, 3]
    for k, error in errors.items():
        shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))  # (no colours)
        own = [line for line in shown.splitlines()
               if line.startswith("File ") and ASTAD_DIR in line]
        assert len(own) <= ALLOWED, shown
        assert f"Cell In[{k + 1}], line" in shown  # the frame of the cell that called
    assert errors[2].ename == "NotDifferentiableError"
    assert "at Cell In[2], line 2" in errors[2].evalue  # the cell of the refused call
    assert errors[3].ename == "UnsupportedSyntaxError"
    assert "at Cell In[4], line 2, column 5" in errors[3].evalue
