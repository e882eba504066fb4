"""The README's set-up commands, as the README writes them, in a fresh copy of the checkout
(a folder named astad, as `git clone` makes) with fresh virtual environments: the install
and quickstart, then the test extra and pytest. Slow (minutes: two installs, pip's cache or
the network), so run only with `pytest -m install`, as CI does once.

The editable install of the second command is also checked the way a type checker sees
it: mypy, from the test extra, finds astad through the static .pth entry
(tests/test_packaging.py::test_an_editable_install_is_a_plain_path_entry is the cheap
check of the same)."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_packaging import copy_checkout

ROOT = Path(__file__).resolve().parent.parent

# What the nested pytest runs, appended to the README's `python -m pytest -q`: the
# README's command runs the whole suite (minutes), and this module is in it; the quickstart's
# test proves the test extra, the editable install and pytest work together. The nested run
# reads the copy's pyproject.toml, whose addopts deselect the install tests anyway, so it
# cannot reach this test again.
NESTED_PYTEST_ARGS = " tests/test_examples.py -k quickstart"


def setup_commands() -> list[str]:
    """The set-up commands of the README's Set-up section (those that make a fresh virtual
    environment), in order; the section's other commands use the environment they make."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Set-up\n", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
            for line in block.splitlines() if line.startswith("python3 -m venv ")]


def test_the_readme_has_the_two_commands():
    install, test = setup_commands()
    assert install.startswith("python3 -m venv .venv && ") and "examples/quickstart.py" in install
    assert test.startswith("python3 -m venv .venv && ") and test.endswith("-m pytest -q")
    assert "pip install -e '.[test]'" in test


@pytest.mark.slow
@pytest.mark.install  # (minutes, and pip: run by `-m install`, as CI does once)
def test_the_readme_commands_run_as_written(tmp_path):
    checkout = copy_checkout(tmp_path / "astad")
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "ASTAD_RUNTIME", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def sh(command, timeout=1200):
        result = subprocess.run(["bash", "-c", command], cwd=checkout, env=env,
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, (f"$ {command}\n{result.stdout[-4000:]}\n"
                                        f"{result.stderr[-4000:]}")
        return result.stdout

    install, test = setup_commands()
    quickstart = sh(install)
    assert "largest difference from finite differences" in quickstart
    assert "print(rope_energy.source)" in quickstart
    nested = sh(test + NESTED_PYTEST_ARGS)
    assert re.search(r"\b1 passed\b", nested), nested

    python = str(checkout / ".venv" / "bin" / "python")
    # the venv imports the copy's astad (editable), with the compiled sweep built there
    where = sh(f"{python} -c 'import astad; print(astad.__file__)'", timeout=120)
    assert where.strip() == str(checkout / "astad" / "__init__.py")
    info = sh(f"{python} -m astad info", timeout=120)
    assert "  build: " in info and "no build record" not in info
    if shutil.which("cc") or shutil.which("gcc"):
        assert "runtime: native" in info and "  build: built" in info, info
    # mypy follows the editable install's .pth entry: no "Cannot find implementation or
    # library stub" and no "missing library stubs or py.typed marker"
    outside = tmp_path / "user"
    outside.mkdir()
    (outside / "use.py").write_text("import astad\n\nreveal_type(astad.grad)\n")
    checked = subprocess.run([python, "-m", "mypy", "--no-incremental", "use.py"],
                             cwd=outside, env=env, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # (typed by the function it transforms: api/signatures.py)
    assert 'Revealed type is "def [P] (fun: def (*P.args, **P.kwargs)' in checked.stdout, \
        checked.stdout
