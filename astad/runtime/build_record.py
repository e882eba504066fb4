"""What the install built: setup.py's record of the compiled sweep, and the one warning when
its build failed.

setup.py writes ``_build.json`` beside this module at every build (plain and editable):
``{"native": "built" | "failed: REASON" | "skipped (ASTAD_BUILD_NATIVE=0)", "python": ...}``.
pip shows a build's output only with -v, so a failed compile would otherwise go unseen and
astad would be silently slower: astad warns about it once, when it is first imported.
A checkout used through PYTHONPATH has no record (nothing was installed); nothing is said.
"""
from __future__ import annotations

import json
import os
import warnings

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build.json")


class NativeBuildWarning(RuntimeWarning):
    """astad's compiled sweep failed to build when astad was installed."""


def read(path: str | None = None) -> dict | None:
    """The build record (at PATH by default), or None where there is none (or it cannot be
    read)."""
    try:
        with open(PATH if path is None else path) as file:
            record = json.load(file)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def failure(record: dict | None) -> str | None:
    """The reason the compiled sweep failed to build, or None when it did not fail."""
    status = str((record or {}).get("native", ""))
    return status[len("failed:"):].strip() if status.startswith("failed") else None


def warn_if_failed(record: dict | None) -> None:
    """Called once, from astad.runtime.tape when the compiled sweep is not there and the
    user did not choose the Python one (ASTAD_RUNTIME=python silences this)."""
    reason = failure(record)
    if reason is None:
        return
    if len(reason) > 300:  # a compiler's whole command line, say
        reason = reason[:300] + " ..."
    warnings.warn(
        "astad's compiled sweep (astad.runtime._native) failed to build when astad was "
        f"installed ({reason}), so astad runs its pure-Python sweeps: the same results, "
        "slower. To build it, install a C compiler and Python's headers (e.g. apt-get "
        "install gcc python3-dev) and reinstall astad; to use the Python sweeps without "
        "this warning, set ASTAD_RUNTIME=python. `python -m astad info` shows the "
        "details.", NativeBuildWarning, stacklevel=2)
