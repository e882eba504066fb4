"""The compiled backend (``compile="numba"``): the code astad writes for float arguments,
compiled by numba (``compiled_code``). Four codes are compiled, each from its tree: the
gradient's code with a flat tape (specialise/loops.py), forward mode's code
(specialise/forward.py), the Hessian-vector code, reverse mode's code over forward
mode's (api/hvp.py), and the code for a Jacobian's rows (specialise/loops.py with
``rows``).

Each written function has parts, and each runs where it belongs:

- its checks of the arguments' kinds (and, for a gradient, the layout of their slots on
  the tape) stay Python, a prologue: they read Python objects;
- the rest becomes a numba kernel (numba_translate.py): for a gradient, the tape is two
  typed arrays (parent slots, partials) kept per thread between calls (a call they are
  too short for counts what it needs and runs again), and each
  ``return ad.tape_gradient_of(...)`` sweeps it, in numba;
- a gradient is rebuilt from the arguments' adjoints by the same layout as the Python
  code's.

A call the kernel does not take (an argument of another kind, a raise inside it: see
numba_kernels) runs the Python code, which gives Python's answer. What cannot be
compiled is said once, by a CompileWarning naming the function and the construct; the
function then runs the Python code.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

from ..errors import AstadError, CompileWarning
from .entry import UNBUILT
from ..specialise.value_kinds import gradient_by_plan
from .numba_translate import (FULL, ROW_KINDS, VALUE, CannotCompile, translate,
                              translate_forward)

MISSING = object()

BACKENDS = ("numba",)


def check_backend(backend) -> str | None:
    """``compile=``'s value, checked: None or one of ``BACKENDS``."""
    if backend is None or backend in BACKENDS:
        return backend
    raise AstadError(f"compile={backend!r}: astad compiles with {', '.join(BACKENDS)} "
                     f"(or None, the Python code)")


def python_function_of(fn):
    """A function compiled by ``numba.njit``, as its Python function (whose source astad
    reads); anything else as it is."""
    if type(fn).__module__.startswith("numba.") and \
            isinstance(getattr(fn, "py_func", None), type(python_function_of)):
        return fn.py_func
    return fn


def compiled_code(entry, fn, backend, role: str, python_code):
    """What runs for ``role`` of ``fn``'s entry: ``python_code``, or with ``backend`` (not
    None) its compiled version where one can be made, kept on the entry (which is
    rebuilt when a binding it was written for changes). Where none can, or where there is
    no ``python_code`` to compile (None), a ``CompileWarning`` says why, once per entry
    and role. The roles: "gradient" (``entry.tapeless``: ``grad``), "forward"
    (``entry.forward``: ``jvp``), "hvp" (api/hvp.py: reverse mode's code with a flat tape
    over forward mode's code, ``jvp(grad(f))`` and ``hessian``) and "rows" (``entry.rows``:
    a Jacobian's rows, api/diff.specialised_rows)."""
    if backend is None:
        return python_code
    found = entry.compiled.get((backend, role))
    if found is None:
        try:
            found = _compiled(entry, fn, role)
        except CannotCompile as refusal:
            line = refusal.line or fn.__code__.co_firstlineno
            warnings.warn(f"{fn.__code__.co_filename}:{line}: {fn.__qualname__} runs as "
                          f"Python code, not compiled by numba ({role}): {refusal.reason}",
                          CompileWarning, stacklevel=4)
            found = False
        entry.compiled[backend, role] = found
    return found or python_code


def _compiled(entry, fn, role: str):
    try:
        import numba  # noqa: F401
    except ImportError:
        raise CannotCompile("numba is not installed (pip install numba)") from None
    python_code, of = entry.tapeless if role == "gradient" else entry.forward, fn
    tree = entry.tapeless_tree if role == "gradient" else entry.forward_tree
    if role in ("hvp", "rows"):  # (written when first asked for: api/hvp.py, api/diff.py)
        python_code = entry.hvp[0] if role == "hvp" else entry.rows
        python_code = None if python_code is UNBUILT else python_code
        tree, of = getattr(python_code, "astad_tree", None), \
            getattr(python_code, "astad_of", None)
    if tree is None and role == "hvp":
        raise CannotCompile("its Hessian-vector code is not written with a flat tape (a "
                            "helper that recurses: reverse mode's general path runs it)")
    if tree is None:
        raise CannotCompile("astad writes no code for floats for it, so it runs on duals "
                            "(docs/compiled.md says which code that is)")
    parts = getattr(tree, "astad_numba", None)
    if parts is None:  # (kept on the tree, which every function of its code shares)
        try:
            parts = translate_forward(tree) if role == "forward" else translate(tree)
        except CannotCompile as refusal:
            parts = refusal
        tree.astad_numba = parts
    if isinstance(parts, CannotCompile):
        raise parts
    from .pipeline import compile_as
    prologue, _ = compile_as(parts.prologue, of, of.__code__.co_filename, keep_name=True)
    if role == "forward":
        return CompiledForward(parts, prologue, python_code, fn)
    return (CompiledRows if role == "rows" else CompiledGradient)(parts, prologue,
                                                                   python_code, fn)


def _kernel(parts):
    """The kernel's numba dispatcher (compiled per argument types when first called)."""
    if parts.kernel is None:
        from .numba_kernels import njit
        namespace = dict(parts.namespace)
        exec(compile(parts.kernel_text, "<astad numba kernel>", "exec"), namespace)
        for name in parts.functions:  # (bound before typing: a recursive one finds itself)
            namespace[name] = njit(namespace[name])
        parts.kernel = njit(namespace["kernel"])
    return parts.kernel


class _Compiled:
    """The code written for floats (``python_code``) compiled: its prologue (Python),
    then its kernel, or the Python code where the kernel does not take the call."""

    def __init__(self, parts, prologue, python_code, fn):
        self.parts, self.prologue, self.python_code = parts, prologue, python_code
        self.kinds = parts.kinds
        self.kernel = _kernel(parts)
        self.checked = set()  # the signatures whose types were checked
        self.name = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}: " \
            f"{fn.__qualname__}"

    def run(self, values, *more):
        """The kernel's result, or MISSING where the Python code is to answer (it
        raised, or numba cannot compile it, or its types differ from Python's)."""
        kernel = self.kernel
        known = len(kernel.overloads)
        try:
            out = kernel(*values, *more)
        except Exception as error:  # noqa: BLE001 (a raise: the Python code answers)
            if _is_numba_error(error):
                self.refuse(f"numba cannot compile it: {_first_line(error)}")
            return MISSING
        if len(kernel.overloads) != known and not self.types_hold(kernel):
            return MISSING
        return out

    def types_hold(self, kernel) -> bool:
        """Does each new signature return the types Python returns? numba gives one type
        to a name Python binds to an int on one path and a float on another: a value
        returned that may be an int where the code needs a float (a gradient's value),
        or that is an int on one path and a float on another, is refused."""
        for signature in kernel.signatures:
            if signature in self.checked:
                continue
            self.checked.add(signature)
            typemap = kernel.overloads[signature].type_annotation.typemap
            for name, source in self.parts.returned:
                kinds = {_kind_of(t) for key, t in typemap.items()
                         if key == name or source and key.split(".")[0] == source}
                if kinds - {"float"} and (self.floats_only or "float" in kinds):
                    self.refuse(f"it returns {source or 'a value'}, which may hold an int "
                                "where Python keeps it an int")
                    return False
        return True

    def refuse(self, reason: str) -> None:
        warnings.warn(f"{self.name} runs as Python code, not compiled by numba: {reason}",
                      CompileWarning, stacklevel=6)
        self.kernel = None


class CompiledGradient(_Compiled):
    """``tapeless(*args)`` by the kernel: ``(value, gradients)``, or None as the Python
    code gives it."""

    floats_only = True  # (a gradient's value is a float)

    def __init__(self, parts, prologue, python_code, fn):
        super().__init__(parts, prologue, python_code, fn)
        self.local = threading.local()  # the tape's arrays, per thread

    def __call__(self, *args):
        if self.kernel is None:  # (refused for the argument types of an earlier call)
            return self.python_code(*args)
        found = self.prologue(*args)
        if found is None:
            return None  # not the kinds the code was written for
        raw, layout = found
        values = _converted(raw, self.kinds)
        if values is None:  # kinds numba would compute otherwise (an int, None)
            return self.python_code(*args)
        local = self.local
        arrays = getattr(local, "arrays", None)
        local.arrays = None  # (a call from inside this one makes its own)
        sink = values[self.parts.sink_at]
        if arrays is None or len(arrays[2]) < sink + 1 + len(arrays[0]):
            arrays = _tape_arrays(len(arrays[0]) if arrays else 4096, sink)
        out = self.run(values, *arrays)
        if out is not MISSING and out[3] == FULL:  # (once per larger tape: kept after)
            arrays = _tape_arrays(out[2] + out[2] // 4, sink)
            out = self.run(values, *arrays)
        local.arrays = arrays
        if out is MISSING:
            return self.python_code(*args)
        value, adjoint, _, status, kind = out
        if status != VALUE:
            return None
        return self.finish(value, adjoint, kind, layout)

    def finish(self, value, adjoint, kind, layout):
        return value, tuple([_gradient_of(adjoint, plan) for plan in layout])


class CompiledRows(CompiledGradient):
    """``rows(*args)`` (the code for a Jacobian's rows) by the kernel: ``(values, rows)``,
    each row the arguments' gradients of one output, as value_kinds.tape_rows_of gives
    them."""

    def finish(self, values, rows, kind, layout):
        container = ROW_KINDS[kind]
        values = values.tolist() if container == "list" else values.copy() \
            if container == "array" else tuple(values.tolist())
        return values, [tuple([_gradient_of(row, plan) for plan in layout]) for row in rows]


class CompiledForward(_Compiled):
    """``forward(*primals, *tangents)`` by the kernel: ``(value, tangent)``, or None as
    the Python code gives it."""

    floats_only = False  # (an int returned stays an int, as Python returns it)

    def __call__(self, *args):
        if self.kernel is None:
            return self.python_code(*args)
        raw = self.prologue(*args)
        if raw is None:
            return None
        values = _converted(raw, self.kinds)
        out = MISSING if values is None else self.run(values)
        return self.python_code(*args) if out is MISSING else out


def _tape_arrays(size: int, sink: int) -> tuple:
    """The tape's slots and partials, ``size`` items each, and room for the sweep's
    adjoints. The partials start 64 bytes past a page's offset of the slots: two arrays
    at the same offset in their pages make the processor take a write to one for a read
    of the other (4K aliasing), a fifth of the kernel's time measured."""
    return (np.empty(size, np.int64), np.empty(size + 8, np.float64)[8:],
            np.empty(sink + 1 + size + 16, np.float64)[16:])


def _kind_of(numba_type) -> str:
    from numba.core import types
    if isinstance(numba_type, types.Float):
        return "float"
    if isinstance(numba_type, (types.Integer, types.Boolean, types.IntegerLiteral,
                               types.BooleanLiteral)):
        return "int"
    return "other"


def _is_numba_error(error) -> bool:
    from numba.core.errors import NumbaError
    return isinstance(error, NumbaError)


def _first_line(error) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("During:", "File", "^"))]
    return (useful or lines or ["?"])[0][:300]


def _gradient_of(adjoint, plan):
    """``value_kinds.gradient_by_plan`` of the kernel's adjoints, an array: an array argument's
    gradient sliced from it, the rest from its floats."""
    start, n = plan[0], plan[1]
    if type(n) is int and n >= 0:
        part = adjoint[start:start + n]
        if len(plan) == 2 or type(plan[2]) is list and _all_floats(plan[2]):
            return part.tolist()
        if type(plan[2]) is np.ndarray:  # (disjoint views of the adjoints of this call)
            return part if plan[2].dtype == np.float64 else part.astype(plan[2].dtype)
    return gradient_by_plan(adjoint.tolist(), plan)


def _all_floats(items) -> bool:
    return all(type(v) is float for v in items)


_BIG = 2 ** 53


def _converted(raw: tuple, kinds: tuple):
    """The kernel's arguments: a list (tuple, 1-d array) of floats as a float64 array, a
    list of lists (2-d array) as a 2-d one, floats (numpy.float64 as float), ints below
    2**53 (an int where a float is taken stays an int, as in Python), bools; None where one
    is of another kind."""
    out = []
    for value, kind in zip(raw, kinds):
        t = type(value)
        if kind == "float" and t is np.float64:  # (the same value; see docs/compiled.md)
            value = float(value)
        elif kind == "vector":
            if t is np.ndarray:
                value = np.ascontiguousarray(value)
            else:
                value = np.array(value, dtype=np.float64)
            if value.ndim != 1:
                return None
        elif kind == "matrix":
            try:
                value = np.array(value, dtype=np.float64)
            except ValueError:  # rows of different lengths
                return None
            if value.ndim != 2 or not len(value):
                return None
        elif t is float or t is bool:
            pass
        elif t is int:
            if not -_BIG < value < _BIG:
                return None
        elif t is list and all(type(v) is int for v in value):  # slots of rows
            value = np.array(value, dtype=np.int64)
        else:
            return None
        out.append(value)
    return out
