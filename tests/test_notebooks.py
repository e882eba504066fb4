"""Every notebook under ``notebooks/`` runs cell by cell in a fresh ``python3`` kernel with
nbclient, so that none goes stale, and is committed without outputs."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"tour.ipynb", "sum_types.ipynb",
                                           "performance.ipynb"}


def execute(path: Path):
    import nbclient  # the test extra: pip install -e '.[test]'
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name}: a cell raised an error:\n{error}")
    return notebook


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path, python3_kernel_is_this_interpreter):
    notebook = execute(path)
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


@pytest.mark.slow
def test_performance_notebook_without_peers_or_matplotlib(tmp_path, monkeypatch,
                                                           python3_kernel_is_this_interpreter):
    # packages that fail to import, first on the kernel's path: as if not installed
    blocked = tmp_path / "blocked"
    for name in ("autograd", "jax", "torch", "matplotlib"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ImportError('{name} is blocked for this test')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(blocked), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    notebook = execute(ROOT / "notebooks" / "performance.ipynb")
    text = "".join(output.get("text", "") for cell in notebook.cells
                   if cell.cell_type == "code" for output in cell.outputs)
    assert "peers: none" in text
    assert "matplotlib is not installed: the table above is the result" in text
    table = [line.split() for line in text.splitlines() if line.split()[:1] in
             (["10"], ["30"], ["100"], ["300"])]
    assert [row[0] for row in table] == ["10", "30", "100", "300"]
    assert all(len(row) == 3 for row in table)  # n, primal, astad
    assert not any(output.get("data", {}).get("image/png") for cell in notebook.cells
                   if cell.cell_type == "code" for output in cell.outputs)


@pytest.mark.slow
def test_display_in_a_kernel_names_cells_as_ipython_does(python3_kernel_is_this_interpreter):
    # a real kernel: cells are compiled from temporary files (ipykernel_<pid>/<hash>.py);
    # IPython's tracebacks call them "Cell In[2], line 1", and so must the display
    import nbclient
    import nbformat
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source
                                               in ("import astad",
                                                   "@astad.reverse_diff\n"
                                                   "def loss(x):\n"
                                                   "    y = x * x\n"
                                                   "    return y",
                                                   "loss",
                                                   "astad.show(loss)")])
    nbclient.NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    page = notebook.cells[2].outputs[0]["data"]["text/html"]
    assert "loss (Cell In[2], line 1)" in page and "ipykernel_" not in page
    printed = "".join(output.get("text", "") for output in notebook.cells[3].outputs)
    assert printed.startswith("original: loss (Cell In[2], line 1)")
    assert "ipykernel_" not in printed
    assert "2  def loss(x):" in printed and "def loss(_tape, x):" in printed
