"""Fixtures shared by the test modules."""
import pytest


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
