"""`python -m astad info`, and the one warning astad gives when its compiled sweep failed to
build (setup.py's build record, astad/runtime/build_record.py). A real failed build, a
wheel built with no C compiler: tests/test_packaging.py."""
import json
import os
import shutil
import subprocess
import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

import astad
from astad.__main__ import main
from astad.runtime import build_record

ROOT = Path(__file__).resolve().parent.parent
FAILED = {"native": "failed: CompileError: command 'gcc' failed: No such file or directory",
          "python": "3.11.7"}


def run(*args, env=None, cwd=ROOT):
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=120)


def test_info_names_versions_runtime_and_peers():
    result = run("-m", "astad", "info", env={"ASTAD_RUNTIME": ""})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"astad {astad.__version__}: {ROOT / 'astad'}"
    assert lines[1] == f"Python {sys.version.split()[0]}: {sys.executable}"
    import gast
    import numpy
    gast_version = getattr(gast, "__version__", None) or \
        __import__("importlib.metadata").metadata.version("gast")
    assert lines[2] == f"numpy {numpy.__version__}, gast {gast_version}"
    # (the child runs the compiled sweep where it was built, whatever this process runs)
    built = importlib.util.find_spec("astad.runtime._native")
    assert lines[3].startswith(f"runtime: {'native' if built else 'python'}, ")
    if built:
        assert f"  module: {built.origin}" in lines
    assert any(line.startswith("  build: ") for line in lines)
    peers = lines[-1]
    assert peers.startswith("peers: ")
    for name in ("scipy", "jax", "autograd", "torch", "numba"):
        assert name in peers


def test_info_says_why_the_python_runtime_runs():
    result = run("-m", "astad", "info", env={"ASTAD_RUNTIME": "python"})
    assert result.returncode == 0, result.stderr
    assert "runtime: python, the pure-Python sweeps (ASTAD_RUNTIME=python)" in result.stdout
    assert "  module: " not in result.stdout


def test_info_reports_a_failed_build_and_its_fix(monkeypatch, capsys):
    monkeypatch.setattr(build_record, "read", lambda path=None: dict(FAILED))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"  build: {FAILED['native']} (built for Python 3.11.7)" in out
    assert "install a C compiler and Python's headers" in out
    assert "ASTAD_RUNTIME=python" in out


def test_the_record_is_read_and_a_failure_recognised(tmp_path):
    path = tmp_path / "_build.json"
    assert build_record.read(str(path)) is None  # none: a checkout on the path
    path.write_text("not json")
    assert build_record.read(str(path)) is None
    for status, reason in (("built", None), ("skipped (ASTAD_BUILD_NATIVE=0)", None),
                           (FAILED["native"], FAILED["native"][len("failed: "):])):
        path.write_text(json.dumps({"native": status}))
        assert build_record.failure(build_record.read(str(path))) == reason


def test_the_warning_names_the_fix_and_the_silencer():
    with pytest.warns(build_record.NativeBuildWarning) as caught:
        build_record.warn_if_failed(FAILED)
    message = str(caught[0].message)
    for words in ("failed to build", "No such file or directory", "C compiler",
                  "Python's headers", "reinstall", "ASTAD_RUNTIME=python",
                  "python -m astad info"):
        assert words in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_record.warn_if_failed({"native": "built"})
        build_record.warn_if_failed(None)


# A failed build, simulated: a copy of the package without the extension, and the record
# setup.py writes when the compile fails.
SCRIPT = """
import astad
import astad  # imported again: no second warning
from astad.runtime import tape


def square(x):
    return x * x


print(tape.RUNTIME, astad.grad(square)(3.0), astad.grad(square)(1.5), astad.grad(abs)(-2.0))
"""


def simulate(tmp_path, record, runtime):
    site = tmp_path / "site"
    shutil.copytree(ROOT / "astad", site / "astad",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "_build.json"))
    if record is not None:
        (site / "astad" / "runtime" / "_build.json").write_text(json.dumps(record))
    script = tmp_path / "simulate.py"  # a file: astad reads the source of square
    script.write_text(SCRIPT)
    return run(str(script), env={"ASTAD_RUNTIME": runtime, "PYTHONPATH": str(site)},
               cwd=tmp_path)


@pytest.mark.parametrize("runtime, warned", [("", 1), ("python", 0)])
def test_a_failed_build_warns_once_at_import(tmp_path, runtime, warned):
    result = simulate(tmp_path, FAILED, runtime)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["python", "6.0", "3.0", "-1.0"]
    assert result.stderr.count("NativeBuildWarning") == warned, result.stderr
    if warned:
        assert "ASTAD_RUNTIME=python" in result.stderr


def test_no_record_no_warning(tmp_path):
    result = simulate(tmp_path, None, "")
    assert result.returncode == 0 and result.stderr == "", result.stderr
