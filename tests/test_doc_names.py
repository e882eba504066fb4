"""Every module path and name the docs and the docstrings cite exists, so that the map
(docs/design.md) and the texts that point into the code cannot go stale."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md",
                                               ROOT / "benchmarks" / "README.md"]
SOURCES = sorted((ROOT / "astad").rglob("*.py")) + sorted((ROOT / "astad").rglob("*.[ch]"))
FILES = {p.name for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts and
         "build" not in p.parts}

PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.(?:py|c|h|md|json))\b")
BARE = re.compile(r"(?<![\w./-])([A-Za-z_]\w*\.(?:py|c|h))\b")
# names of files that are not astad's: C headers, and the user's files of the examples
NOT_OURS = {"Python.h", "math.h", "fenv.h", "stddef.h", "structmember.h", "FILE.py", "model.py"}
DOTTED = re.compile(r"\bastad(?:\.[A-Za-z_]\w*)+")
MODULE_NAME = re.compile(r"`((?:[a-z_]+/)+[a-z_]+)\.([A-Za-z_]\w*)`")
ELSEWHERE = ("jax/", "autograd/", "tangent/", "numpy/", "gast/", "dask/", "torch/",
             "site-packages/",
             "_src/", "shared/", "seeds/", "ctape/", "/tmp", "results/", "notebooks/",
             "path/to/")


def _texts():
    for path in DOCS:
        yield path, path.read_text()
    for path in SOURCES:
        yield path, path.read_text()


def _exists(cited: str, where: Path) -> bool:
    bases = [ROOT, ROOT / "astad", where.parent, ROOT / "docs"]
    return any((base / cited).exists() for base in bases)


def test_every_file_path_cited_exists():
    assert missing_paths() == []


def missing_paths() -> list:
    missing = []
    for path, text in _texts():
        for cited in PATH.findall(text):
            if any(cited.startswith(e) or e in cited for e in ELSEWHERE):
                continue
            if not _exists(cited, path):
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
        for cited in BARE.findall(text):
            if cited not in FILES and cited not in NOT_OURS:
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
    return missing


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attribute in parts[k:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_every_dotted_name_cited_exists():
    pytest.importorskip("scipy")  # (astad.rules.scipy_special imports it)
    assert missing_dotted() == []


def missing_dotted() -> list:
    missing = []
    for path, text in _texts():
        for match in DOTTED.finditer(text):
            if text[match.start() - 1] in "\"'":  # (a string in code: a tag, not a name)
                continue
            dotted = match.group(0).rstrip(".")
            if dotted.endswith((".py", ".c", ".h", ".md")) or "._native" in dotted:
                continue
            if not _resolves(dotted):
                missing.append(f"{path.relative_to(ROOT)}: {dotted}")
    return missing


def test_every_module_and_name_cited_by_path_exists():
    """``core/reverse_pass.reverse_pass``: the module's file and the name in it."""
    assert missing_by_path() == []


def missing_by_path() -> list:
    missing = []
    for path, text in _texts():
        for module, name in MODULE_NAME.findall(text):
            if name in ("py", "c", "h", "md", "json", "txt"):  # (a file: the test above)
                continue
            file = ROOT / "astad" / f"{module}.py"
            if not file.exists():
                if not any(e in module + "/" for e in ELSEWHERE):
                    missing.append(f"{path.relative_to(ROOT)}: {module}.{name}")
                continue
            dotted = "astad." + module.replace("/", ".") + "." + name
            if not _resolves(dotted):
                missing.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    return missing
