"""The package's layers: every import points down (the contract in pyproject.toml, checked
by import-linter), no module imports another's private names, and there is no import
circle, so that each concept lives in one place a reader can find by the layout."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "astad"


def _modules() -> dict:
    """module name -> path, for every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path):
    """``(module imported, names imported from it)`` of every import of astad's own, at
    any depth (an import inside a function counts)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] == "astad":
                yield module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "astad":
                    yield a.name, []


@pytest.mark.slow
def test_every_import_points_down_the_layers():
    pytest.importorskip("importlinter", reason="import-linter is in the test extras")
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "lint-imports not found beside this Python"
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_no_module_imports_another_modules_private_names():
    """A name starting with an underscore is its module's own. (The compiled extension,
    astad/runtime/_native, is a module of the runtime: the runtime imports it.)"""
    modules = _modules()
    offences = []
    for name, path in modules.items():
        for module, names in _imports(name, path):
            for imported in names:
                full = f"{module}.{imported}"
                private = imported.startswith("_") and not imported.startswith("__")
                if private and module != name and not (
                        full == "astad.runtime._native" and name.startswith("astad.runtime")):
                    offences.append(f"{name} imports {imported} from {module}")
    assert offences == []


def test_no_import_circle():
    """Tarjan's strongly connected components of the module graph are single modules."""
    modules = _modules()
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        for module, names in _imports(name, path):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules] or \
                [module]
            edges[name] |= {t for t in targets if t in modules and t != name}
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    counter = [0]

    def visit(v):  # (iterative would be longer; the graph is a hundred modules)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))
    for v in sorted(modules):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_compiled_jvp_checks_what_it_reads_when_it_is_made():
    """The C runtime reads a gradient's HvpKnown by position (runtime/_native.h): a record
    with other fields is refused when the CompiledJvp is made, not silently slow later."""
    from collections import namedtuple

    from astad.api import transforms
    from astad.api.hvp import HvpKnown
    from astad.compile.entry import CACHE
    from astad.runtime import duals, tape
    from astad.transform.bindings import MISSING
    if tape.native is None:
        pytest.skip("the compiled runtime is not built")
    renamed = namedtuple("HvpKnown", "function entry floats_code arity code dependencies "
                                     "positions single")
    with pytest.raises(TypeError, match="HvpKnown"):
        tape.native.CompiledJvp(transforms.jvp, CACHE, transforms.grad, duals.running,
                                MISSING, renamed)
    made = tape.native.CompiledJvp(transforms.jvp, CACHE, transforms.grad, duals.running,
                                   MISSING, HvpKnown)
    assert made(lambda x: x * x, (3.0,), (1.0,)) == (9.0, 6.0)
