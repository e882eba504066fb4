"""The package builds into a wheel that ships its type hints (PEP 561) and its version,
with the compiled sweep where a C compiler is available and without it where not (and
says so: the build record); the sdist holds what its tests need; an editable install is a
plain path entry; pyproject's extras and cibuildwheel table agree with what the README and
requires-python say. The README's commands in a fresh environment: tests/test_install.py."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import astad

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli on 3.10
    tomllib = pytest.importorskip("tomli")

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def committed_files() -> list[str]:
    """The files a commit of this checkout holds (new files not yet added included,
    ignored ones not), as git lists them; the test is skipped outside a git checkout (in
    an unpacked sdist, say)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return sorted(name for name in listed if name and (ROOT / name).is_file())


def copy_checkout(destination: Path) -> Path:
    """The committed files copied to ``destination``: what a clone would hold."""
    for name in committed_files():
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination / name)
    return destination


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
        # and the build says so (astad/runtime/build_record.py reads it)
        record = zipfile.ZipFile(wheel).read("astad/runtime/_build.json").decode()
        assert '"native": "built"' in record


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


# -- the build record -------------------------------------------------------------------
def test_a_wheel_built_without_a_compiler_says_so_once(tmp_path):
    wheel = _build_wheel(tmp_path, {"CC": "false", "CXX": "false"})
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    record = (site / "astad" / "runtime" / "_build.json").read_text()
    assert '"native": "failed: ' in record and "false" in record  # the failed command
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("ASTAD_RUNTIME", None)
    # imported twice and used: one warning, naming the fix and how to silence it
    script = ("import astad, importlib, astad.runtime.tape\n"
              "importlib.import_module('astad'); print(astad.grad(abs)(-2.0))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 0 and result.stdout.split() == ["-1.0"], result.stderr
    assert result.stderr.count("NativeBuildWarning") == 1, result.stderr
    for words in ("failed to build", "C compiler", "reinstall", "ASTAD_RUNTIME=python"):
        assert words in result.stderr
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           cwd=tmp_path, env={**env, "ASTAD_RUNTIME": "python"}, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == ""
    info = subprocess.run([sys.executable, "-m", "astad", "info"], capture_output=True,
                          text=True, cwd=tmp_path, env={**env, "ASTAD_RUNTIME": "python"},
                          timeout=60)
    assert "runtime: python" in info.stdout and "build: failed: " in info.stdout


# -- the sdist --------------------------------------------------------------------------
def _build_sdist(tmp_path) -> Path:
    """The sdist of the committed files, as `python -m build --sdist` makes it (setuptools'
    own hook, without build isolation: no download). Stray files a checkout gathers are
    planted first, to check that MANIFEST.in leaves them out."""
    source = copy_checkout(tmp_path / "src")
    for stray in ("astad/runtime/_native.cpython-399-x.so", "astad/runtime/_build.json",
                  "tests/__pycache__/paths.cpython-399.pyc", "build/lib/astad/x.py"):
        (source / stray).parent.mkdir(parents=True, exist_ok=True)
        (source / stray).write_text("stray")
    pytest.importorskip("setuptools", reason="setuptools is in the test extra")
    result = subprocess.run([sys.executable, "-c", "import sys, setuptools.build_meta as b; "
                             "print(b.build_sdist(sys.argv[1]))", str(tmp_path / "dist")],
                            cwd=source, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return tmp_path / "dist" / result.stdout.split()[-1]


def test_the_sdist_holds_every_committed_file_and_no_stray_one(tmp_path):
    sdist = _build_sdist(tmp_path)
    top = f"astad-{astad.__version__}/"
    members = {m.name[len(top):] for m in tarfile.open(sdist).getmembers() if m.isfile()}
    committed = set(committed_files())
    # the test helpers, the data the tests read, the examples and notebooks they run
    assert committed <= members, sorted(committed - members)
    made = {"PKG-INFO", "setup.cfg"}  # written by setuptools into every sdist
    extra = {m for m in members - committed if m not in made and
             not m.startswith("astad.egg-info/")}
    assert not extra, sorted(extra)


@pytest.mark.slow
@pytest.mark.install  # (minutes: run by `-m install`, as CI does once)
def test_the_tests_run_from_the_unpacked_sdist(tmp_path):
    """What the sdist is for: unpacked, every test module collects (a missing helper or
    data file fails here) and the tests that read docs/, examples/, notebooks/ and
    benchmarks/ pass. Run on the pure-Python sweeps: the sdist holds no built extension."""
    sdist = _build_sdist(tmp_path)
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked")
    unpacked = tmp_path / "unpacked" / f"astad-{astad.__version__}"
    env = {**os.environ, "PYTHONPATH": str(unpacked), "ASTAD_RUNTIME": "python"}
    pytest_ = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    collect = subprocess.run(pytest_ + ["--collect-only"], cwd=unpacked, env=env,
                             capture_output=True, text=True, timeout=600)
    assert collect.returncode == 0 and " collected" in collect.stdout, collect.stdout[-3000:]
    run = subprocess.run(pytest_ + ["tests/test_examples.py", "tests/test_docs.py",
                                    "tests/test_doc_names.py", "tests/test_license.py"],
                         cwd=unpacked, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and re.search(r"\d+ passed", run.stdout), run.stdout[-5000:]


# -- editable installs ------------------------------------------------------------------
def test_an_editable_install_is_a_plain_path_entry(tmp_path):
    """`pip install -e .` (the README's test command) writes a .pth line naming the
    checkout, which mypy and other static tools follow, not setuptools' import hook
    (package-dir in pyproject.toml); the build record goes into the checkout."""
    source = copy_checkout(tmp_path / "src")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                             "-e", str(source), "--target", str(tmp_path / "site")],
                            capture_output=True, text=True, timeout=180,
                            env={**os.environ, "ASTAD_BUILD_NATIVE": "0"})
    assert result.returncode == 0, result.stderr
    installed = sorted(p.name for p in (tmp_path / "site").iterdir())
    assert not [name for name in installed if "finder" in name], installed
    pth, = (tmp_path / "site").glob("*.pth")
    assert pth.read_text().split() == [str(source)]
    record = (source / "astad" / "runtime" / "_build.json").read_text()
    assert '"native": "skipped (ASTAD_BUILD_NATIVE=0)"' in record


# -- what pyproject.toml declares -------------------------------------------------------
def test_the_bench_extra_holds_the_peers_the_readme_names():
    readme = (ROOT / "README.md").read_text()
    sentence = re.search(r"The peers used for\s+benchmarks and cross-checks \(([^)]*)\) "
                         r"are optional\s+\(`pip install -e '\.\[bench\]'`\)", readme)
    assert sentence, "the README's sentence on the peers and the bench extra moved"
    named = re.findall(r"`([^`]+)`", sentence.group(1))
    assert "torch==2.13.0" in named  # the build kept on the machine: others are gigabytes
    bench = PYPROJECT["project"]["optional-dependencies"]["bench"]
    assert set(named) <= set(bench), sorted(set(named) - set(bench))


def _declared_minors() -> list[int]:
    """The CPython 3.N versions requires-python admits, up to 3.13 (the newest this
    project builds wheels for)."""
    declared = re.fullmatch(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert declared, PYPROJECT["project"]["requires-python"]
    return list(range(int(declared.group(1)), 14))


def test_cibuildwheel_builds_every_declared_python_and_tests_the_wheel():
    config = PYPROJECT["tool"]["cibuildwheel"]
    assert sorted(config["build"]) == [f"cp3{minor}-*" for minor in _declared_minors()]
    assert set(PYPROJECT["tool"]["cibuildwheel"]["linux"]["archs"]) >= {"x86_64"}
    command = " && ".join(config["test-command"])
    assert "python -m astad info" in command and "RUNTIME == 'native'" in command
    # the tests the wheel runs exist and need nothing beyond pytest and astad's own deps
    for path in re.findall(r"\{project\}/(tests/\S+\.py)", command):
        text = (ROOT / path).read_text()
        imports = set(re.findall(r"^(?:from|import) (\w+)", text, re.MULTILINE))
        assert imports <= set(sys.stdlib_module_names) | {"astad", "numpy", "pytest"}, path
    assert config["test-requires"] == ["pytest"]
    cibuildwheel = shutil.which("cibuildwheel")
    if cibuildwheel is None:
        return  # the table was read; its build identifiers need cibuildwheel itself
    listed = subprocess.run([cibuildwheel, "--platform", "linux",
                             "--print-build-identifiers", str(ROOT)],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert {i.split("-")[0] for i in listed.stdout.split()} == {
        f"cp3{minor}" for minor in _declared_minors()}
