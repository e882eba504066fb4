"""The examples and notebooks run as users would run them.

``examples/quickstart.py`` runs in a subprocess of this interpreter; every notebook under
``notebooks/`` is executed cell by cell in a fresh ``python3`` kernel with nbclient.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart.py"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_quickstart_runs_and_checks_its_gradient():
    result = subprocess.run([sys.executable, str(QUICKSTART)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    out = result.stdout
    assert "energy = " in out
    assert "finite-d" in out and "largest difference from finite differences" in out
    assert "operations recorded on the tape:" in out
    # the generated source is printed, exactly as .source gives it
    spec = importlib.util.spec_from_file_location("quickstart", QUICKSTART)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)  # defines the functions; main() is not run
    assert "def rope_energy(" in quickstart.rope_energy.source
    assert quickstart.rope_energy.source in out


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.fixture
def python3_kernel_is_this_interpreter(tmp_path, monkeypatch):
    """Make the ``python3`` kernelspec run ``sys.executable``, whatever else is installed.

    In a fresh virtualenv ``python3`` already resolves to the environment's own ipykernel
    (its kernelspec is installed under ``sys.prefix``, and jupyter_client runs
    ``sys.executable`` for a kernelspec whose command is plain ``python``). A kernelspec in
    the user's or the system's Jupyter paths could still name another interpreter, one
    without this checkout of astad; a spec first on ``JUPYTER_PATH`` rules that out.
    """
    from ipykernel.kernelspec import write_kernel_spec
    write_kernel_spec(tmp_path / "kernels" / "python3")  # its argv[0] is sys.executable
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path, python3_kernel_is_this_interpreter):
    import nbclient  # the test extra: pip install -e '.[test]'
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name}: a cell raised an error:\n{error}")
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors, f"{path.name}: cells produced errors: {errors}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_notebook_has_no_outputs(path):
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name}: clear the outputs before committing"
