"""The code base stays ruff clean (the rules are in pyproject.toml)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is in the test extras: pip install -e '.[test]'")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
