"""The package builds into a wheel that ships its type hints (PEP 561) and its version."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import astad

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_has_py_typed_and_the_version(tmp_path):
    source = tmp_path / "src"  # built from a copy: nothing is written into the checkout
    shutil.copytree(ROOT / "astad", source / "astad",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    # with build isolation, as `pip install .` builds: the venv's own setuptools may be
    # too old to build a wheel without the `wheel` package
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                             "-q", str(source), "-w",
                             str(tmp_path / "dist")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    wheel, = (tmp_path / "dist").glob("astad-*.whl")
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


def test_version_is_written_once():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and "\nversion =" not in text.split(
        "[tool.setuptools.dynamic]")[0]
