"""The package builds into a wheel that ships its type hints (PEP 561) and its version,
with the compiled sweep where a C compiler is available and without it where not."""
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import astad

ROOT = Path(__file__).resolve().parent.parent


def _build_wheel(tmp_path, env=None):
    """The wheel `pip install .` would build, from a copy of the checkout (nothing is
    written into it), with build isolation as pip builds: the venv's own setuptools may
    be too old to build a wheel without the `wheel` package."""
    source = tmp_path / "src"
    shutil.copytree(ROOT / "astad", source / "astad",  # not an extension built in place
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(ROOT / name, source / name)
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                             "-q", str(source), "-w",
                             str(tmp_path / "dist")], capture_output=True, text=True,
                            timeout=120, env=None if env is None else {**os.environ, **env})
    assert result.returncode == 0, result.stderr
    wheel, = (tmp_path / "dist").glob("astad-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_has_py_typed_and_the_version(tmp_path):
    wheel = _build_wheel(tmp_path)
    assert wheel.name.startswith(f"astad-{astad.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    assert "astad/py.typed" in names
    assert "astad/testing.py" in names and "astad/__main__.py" in names
    # every module of every subpackage (front, reverse, forward, runtime, rules) ships
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "astad").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules <= set(names), sorted(modules - set(names))
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = sorted(line.split(":", 1)[1].strip() for line in metadata.splitlines()
                      if line.startswith("Requires-Dist:") and "extra ==" not in line)
    assert [r.split(">")[0].split("=")[0] for r in requires] == ["gast", "numpy"]
    # the compiled sweep, where the install of this checkout could build it
    if importlib.util.find_spec("astad.runtime._native") is not None:
        assert any(n.startswith("astad/runtime/_native.") and n.endswith((".so", ".pyd"))
                   for n in names), names


@pytest.mark.slow
def test_without_a_compiler_the_wheel_builds_and_runs_the_python_sweep(tmp_path):
    # CC=false: every compile fails, as where no C compiler is installed; the extension
    # is optional, so the wheel still builds, without it, and astad runs pure Python
    wheel = _build_wheel(tmp_path, {"CC": "false", "CXX": "false"})
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))], names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = tmp_path / "use_astad.py"  # astad reads the source of what it differentiates
    script.write_text("import astad\nfrom astad.runtime import tape\n\n\n"
                      "@astad.reverse_diff\ndef f(xs):\n    s = 0.0\n    for x in xs:\n"
                      "        s = s + x * x\n    return s\n\n\n"
                      "print(astad.__file__, tape.RUNTIME, f.grad([1.5, -2.0]))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("ASTAD_RUNTIME", None)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    path, runtime, gradient = result.stdout.split(maxsplit=2)
    assert path.startswith(str(site)) and runtime == "python"
    assert gradient.strip() == "[3.0, -4.0]"
    # asking for the compiled sweep there is an error that says what to do
    result = subprocess.run([sys.executable, "-c", "import astad"], capture_output=True,
                            text=True, cwd=tmp_path, env={**env, "ASTAD_RUNTIME": "native"},
                            timeout=60)
    assert result.returncode != 0 and "was not built" in result.stderr


def test_version_is_written_once():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and "\nversion =" not in text.split(
        "[tool.setuptools.dynamic]")[0]
