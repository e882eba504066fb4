"""The LICENSE file is the licence pyproject.toml declares."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_license_file_is_the_declared_mit_licence():
    declared = (ROOT / "pyproject.toml").read_text()
    assert 'license = { text = "MIT" }' in declared
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) the astad authors" in text
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
