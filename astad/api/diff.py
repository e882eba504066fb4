"""The public API: ``@reverse_diff`` and the gradient functions it attaches.

Conventions follow JAX and autograd: ``argnums`` chooses positional arguments (an int
gives one gradient, a tuple a tuple; by default all positional parameters, and a
one-parameter function gives its gradient alone), and a gradient has exactly the
structure of its argument.
"""
from __future__ import annotations

import functools
import gc
import inspect
import threading
import types
from typing import Any


from ..compile import calls as compiled
from ..compile.entry import UNBUILT
from ..compile.numba_backend import check_backend, compiled_code
from ..compile.pipeline import compile_rules, front
from ..specialise.expressions import CannotSpecialise
from ..specialise.loops import write_scalar_loops
from ..transform.bindings import MISSING, unchanged

from .. import display
from . import pickling
from ..argnums import argnums_positions, check_form
from ..errors import AstadError, InputError, SignatureError, api_boundary
from ..runtime.duals import running
from ..runtime.tape import native
from ..data.tree import FUNCTIONS
from ..core.reverse_pass import (PLAIN, Pullback, ReversePass, RowsPullback, ScaledPullback,
                                 float_result_gradient, pause_gc, reverse_pass, scalable,
                                 snapshot)
from ..core.boundary import (refuse_functions)


_ARG_PATHS = [f"args[{k}]" for k in range(8)]
_finishing = threading.RLock()  # (DiffFunction.__getattr__)


class DiffFunction:
    """The gradient machinery of one decorated function.

    ``reverse_diff`` does not wrap the user's function in an object with a ``__call__``
    (which would cost extra Python stack per recursion level). It returns a plain function
    with the same code, globals and closure, carrying ``grad``, ``value_and_grad``,
    ``vjp`` and ``source`` as attributes; those are the bound methods of this object.
    """

    def __init__(self, fn, argnums=None, preaccumulate=True, backend=None):
        if not isinstance(fn, types.FunctionType):
            raise AstadError(f"reverse_diff needs a Python function, got {fn!r}")
        self.fn = fn
        self.__name__ = fn.__name__
        self._argnums = argnums
        self._preaccumulate = bool(preaccumulate)
        self.backend = check_backend(backend)  # compile=: None, or "numba"
        self._signature = None  # (inspect.signature(fn): read when a call does not fit)
        self._n_positional, self._has_varargs, self._min_args, self._max_args = \
            parameters_of(fn)
        self._positions_cache: dict = {}
        self._select: dict = {}  # n_args -> _selection(n_args), for the specialised code
        self.entry = None  # the transformed function, revalidated on every call
        self._super = None  # its version for a method using zero-argument super() (_rev)
        self.call = None  # how the user asks, for messages (astad.grad), if not f.grad
        if argnums is not None:
            check_form(argnums)  # (JAX's reading, as the function transforms: argnums.py)

    def decorated(self):
        """A function that runs ``fn``'s own code and carries the gradient attributes.

        Everything it carries pickles (``__reduce__``): with cloudpickle, a function from
        ``__main__`` or a notebook travels by value with its ``__dict__``."""
        fn = self.fn
        wrapper = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                     fn.__defaults__, fn.__closure__)
        functools.update_wrapper(wrapper, fn)
        wrapper.__kwdefaults__ = fn.__kwdefaults__
        wrapper.grad = specialised_call(self, True)
        wrapper.value_and_grad = specialised_call(self, False)
        wrapper.vjp = self.vjp  # (and .jvp: api/methods.py, above the transforms)
        # From now on the gradient follows the function callers see: if its __code__ is
        # replaced (IPython's autoreload), the transformation is rebuilt from the new code.
        self.fn = wrapper
        self.entry = compiled.transformed(wrapper, self._preaccumulate)  # now: errors show early
        self._rev(self.entry)
        wrapper.source = compiled.readable_source(wrapper, self.entry, self._preaccumulate)
        wrapper._astad_transformed = self._transformed
        # a notebook shows the original and generated code (display.html); a bound
        # method, not display.attach's closure over a weak reference, which cannot pickle
        wrapper._repr_html_ = self._repr_html_
        wrapper.__dask_tokenize__ = self.__dask_tokenize__  # (Dask reads it with getattr)
        return wrapper

    @classmethod
    def unfinished(cls, fn, argnums, preaccumulate: bool, backend=None) -> DiffFunction:
        """The machinery of decorated ``fn``, set up on first use (``__getattr__``): ``fn``
        may still be being unpickled, its defaults, closure and globals not yet there."""
        diff = cls.__new__(cls)
        diff.fn, diff._argnums, diff._preaccumulate = fn, argnums, bool(preaccumulate)
        diff.backend = backend
        return diff

    def __getattr__(self, name):
        # only an unfinished DiffFunction lacks attributes: finish it now (once, for all
        # threads: a Dask worker may run several tasks of one function at once)
        if name.startswith("__") and name != "__name__" or "fn" not in self.__dict__:
            raise AttributeError(name)
        with _finishing:
            if "_n_positional" not in self.__dict__:
                finished = DiffFunction(self.fn, self._argnums, self._preaccumulate,
                                        self.backend)
                finished.entry = compiled.transformed(self.fn, self._preaccumulate)
                state = dict(finished.__dict__)
                mark = state.pop("_n_positional")  # the mark of a finished one: set last
                self.__dict__.update(state)
                self._n_positional = mark
        return object.__getattribute__(self, name)

    def __reduce__(self):
        """The decorated function, its options and, when it travels by value, its
        source (api/pickling.py): rebuilt by ``machinery`` on the other side."""
        fn = self.fn
        return machinery, (fn, self._argnums, self._preaccumulate, pickling.bundle_for(fn),
                           self.backend)

    def __dask_tokenize__(self):
        return pickling.diff_token(self)

    def _repr_html_(self):
        try:
            return display.html(self.fn)
        except Exception:  # noqa: BLE001 (a display must not raise: plain text instead)
            return None

    # -- what generated code calls (calls.rev) -----------------------------------------
    def _transformed(self):
        entry = self.entry  # (one call per recursion level: keep it short)
        if entry.code is self.fn.__code__ and (not entry.dependencies or
                                               unchanged(entry.dependencies, MISSING)):
            return entry.taped if self._super is None else self._super
        entry = self.entry = compiled.transformed(self.fn, self._preaccumulate)
        return self._rev(entry)

    def _rev(self, entry):
        """``entry.taped``; for a method using zero-argument ``super()`` (which finds the
        object in the first argument), its version taking the tape second, called with the
        tape first."""
        if "__class__" not in self.fn.__code__.co_freevars or \
                "super" not in self.fn.__code__.co_names:
            self._super = None
            return entry.taped
        method = compiled.transformed(self.fn, self._preaccumulate, as_method=True).taped
        self._super = lambda tape, obj, *args, **kwargs: method(obj, tape, *args, **kwargs)
        return self._super

    # -- gradients ---------------------------------------------------------------------
    def _check_call(self, args, kwargs) -> None:
        """Raise the TypeError Python would give for a call that does not fit ``fn``."""
        if kwargs or not self._min_args <= len(args) <= self._max_args:
            if self._signature is None:
                self._signature = inspect.signature(self.fn)
            try:
                self._signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise SignatureError(f"{self.__name__}(): {exc}") from None

    def _positions(self, n_args: int) -> tuple:
        """Which positional arguments to differentiate (cached per argument count).

        As in JAX, only arguments passed positionally are differentiated; keyword
        arguments are passed through as constants.
        """
        cached = self._positions_cache.get(n_args)
        if cached is not None:
            return cached
        argnums = self._argnums
        if argnums is None:
            positions = tuple(range(n_args))
            single = self._n_positional == 1 and not self._has_varargs
        else:
            positions, single = argnums_positions(argnums, n_args)
        others = tuple(k for k in range(n_args) if k not in positions)
        self._positions_cache[n_args] = (positions, others, single)
        return positions, others, single

    def selection(self, n_args: int):
        """Which of the specialised code's gradients to return (``selection_of``)."""
        positions, _, single = self._positions(n_args)
        select = self._select[n_args] = selection_of(positions, single, n_args)
        return select

    def _no_float_error(self, args, positions):
        shown = ", ".join(repr(args[k]) for k in positions)
        hint = ""
        if len(positions) == 1 and isinstance(args[positions[0]], int) and \
                not isinstance(args[positions[0]], bool):
            hint = f"; pass {float(args[positions[0]])!r} instead of {args[positions[0]]!r}"
        return InputError(
            f"{self.__name__}: no argument chosen for differentiation holds a float "
            f"(got {shown or 'no positional arguments'}); astad differentiates with "
            f"respect to float values passed positionally{hint}")

    def _forward(self, args, kwargs) -> ReversePass:
        plan = None if kwargs else self._positions_cache.get(len(args))
        if plan is None:  # (checked once per argument count, then cached)
            self._check_call(args, kwargs)
            plan = self._positions(len(args))
        positions, others, single = plan
        entry = self.entry
        if entry is None or not entry.is_current(self.fn):
            entry = self.entry = compiled.transformed(self.fn, self._preaccumulate)
        return reverse_pass(self._rev(entry), args, kwargs, positions, others, single,
                            self._no_float_error)

    def _specialised(self, args, kwargs, rows_next: bool = False):
        """``(value, gradient)`` by the specialised float code (specialise/straight_line.py,
        specialise/loops.py), or None where it does not apply (``specialised``).
        ``rows_next``: the code for a Jacobian's rows is tried next (vjp)."""
        entry = self.entry
        if entry.tapeless is None and not rows_next:  # (with compile=: it says why)
            compiled_code(entry, self.fn, self.backend, "gradient", None)
        if kwargs or entry.tapeless is None or len(args) != entry.arity and \
                with_defaults(self.fn, args, entry.arity) is None:
            return None  # (before the selection, whose argnums may not fit this call)
        select = self._select.get(len(args))
        if select is None:
            select = self.selection(len(args))
        return specialised(entry, self.fn, args, select, backend=self.backend)

    @api_boundary
    def vjp(self, *args: Any, **kwargs: Any) -> tuple[Any, Pullback]:
        """Return ``(value, pullback)``; ``pullback(cotangent)`` gives the gradients."""
        values = self.__dict__.get("_values")  # (the checks compiled, as f.value_and_grad)
        if values is None:
            values = self._values = specialised_call(self, False, _unanswered)
        out = values(*args, **kwargs) if values is not False else \
            self._specialised(args, kwargs, rows_next=True)
        if out is not None and scalable(out[1]):
            return out[0], ScaledPullback(self, tuple(map(snapshot, args)), out[1])
        if out is None and not kwargs:  # (a tuple of floats: a pullback summing its rows)
            found = specialised_rows(self.entry, self.fn, args, self.backend)
            rows = None if found is None else \
                selected_rows(found[1], args, self.selection(len(args)))
            if rows is not None:
                return found[0], RowsPullback(self, tuple(map(snapshot, args)), found[0],
                                              rows)
        with pause_gc():
            forward = self._forward(args, kwargs)
        refuse_functions(forward.result, self.__name__, FUNCTIONS + (DiffFunction,))
        return forward.value(), Pullback(forward)

    @api_boundary
    def value_and_grad(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Return ``(value, gradient)`` of a float-valued function."""
        out = self._specialised(args, kwargs)
        if out is not None:
            return out
        return self._value_and_grad_general(*args, **kwargs)

    @api_boundary
    def _value_and_grad_general(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        out = self._omitting_defaults(args, kwargs)
        if out is not None:
            return out
        return self._value_and_grad_taped(args, kwargs)

    def _omitting_defaults(self, args, kwargs):
        """``_specialised`` of a call leaving parameters to their defaults, which the
        compiled call (runtime/_specialised.c) passes on untried, else None."""
        entry = self.entry
        if entry is None or len(args) >= entry.arity:
            return None
        return self._specialised(args, kwargs)

    def _value_and_grad_taped(self, args, kwargs, method: str = "value_and_grad"):
        paused = gc.isenabled()  # see pause_gc
        if paused:
            gc.disable()
        try:
            forward = self._forward(args, kwargs)
            return float_result_gradient(forward, forward.result, self.__name__,
                                         self.call or f"{self.__name__}.{method}")
        finally:
            if paused:
                gc.enable()

    @api_boundary
    def grad(self, *args: Any, **kwargs: Any) -> Any:
        """The gradient of a float-valued function with respect to ``argnums``."""
        out = self._specialised(args, kwargs)
        if out is not None:
            return out[1]
        return self._value_and_grad_taped(args, kwargs, "grad")[1]

    @api_boundary
    def _grad_general(self, *args: Any, **kwargs: Any) -> Any:
        """``grad`` by the general path (what a SpecialisedCall runs when its checks fail)."""
        out = self._omitting_defaults(args, kwargs)
        if out is not None:
            return out[1]
        return self._value_and_grad_taped(args, kwargs, "grad")[1]



def parameters_of(fn) -> tuple:
    """``(positional parameters, *args?, fewest positional arguments, most)`` of Python
    function ``fn``, as ``inspect.signature`` reads them, from its code and defaults as
    they are now (a replaced ``__code__`` or ``__defaults__`` is read again): a transform
    made inline makes a DiffFunction per call, and inspect.signature costs ~10 us."""
    wrapped = fn.__dict__.get("__wrapped__")  # (a decorated function's own: of its code)
    if "__signature__" in fn.__dict__ or wrapped is not None and not (
            getattr(wrapped, "__code__", None) is fn.__code__ and
            wrapped.__defaults__ is fn.__defaults__ and "__wrapped__" not in wrapped.__dict__
            and "__signature__" not in wrapped.__dict__):  # (inspect reads those instead)
        params = list(inspect.signature(fn).parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        fewest = sum(1 for p in positional if p.default is p.empty)
        return (len(positional), varargs, fewest,
                float("inf") if varargs else len(positional))
    code = fn.__code__
    n = code.co_argcount
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    fewest = max(0, n - len(fn.__defaults__ or ()))
    return n, varargs, fewest, float("inf") if varargs else n


def specialised_call(diff: DiffFunction, gradient_only: bool, general=None):
    """``f.grad`` (``gradient_only``) or ``f.value_and_grad`` of a decorated function:
    with the compiled runtime a ``SpecialisedCall`` (runtime/_specialised.c: the checks of
    ``DiffFunction._specialised``, compiled, around the specialised code, else the general
    path), else the DiffFunction's bound method. Pickles as this call. With ``general``
    (``vjp``'s first step), what answers where the specialised code does not; without the
    compiled runtime, False."""
    if native is None or diff.backend is not None:  # (a backend: its call, in Python)
        return False if general is not None else \
            diff.grad if gradient_only else diff.value_and_grad
    if general is None:
        general = diff._grad_general if gradient_only else diff._value_and_grad_general
    return native.SpecialisedCall(diff, general, running, MISSING, specialised_call,
                                   gradient_only)


def _unanswered(*args, **kwargs):
    return None  # (vjp: the specialised code did not answer; the rows or the tape next)


ALL_GRADIENTS = "all"  # (a marker: every gradient, in argument order)


def selection_of(positions: tuple, single: bool, n_args: int):
    """Which of the specialised code's gradients (one per argument) ``argnums`` asks
    for: ``ALL_GRADIENTS``, one index (a single ``argnums``) or a tuple of indices."""
    if single:
        return positions[0]
    return ALL_GRADIENTS if positions == tuple(range(n_args)) else positions


def specialised(entry, fn, args, select, current: bool = False, backend=None):
    """``(value, gradient)`` of ``fn`` by its entry's specialised float code
    (specialise/straight_line.py, specialise/loops.py), the gradients ``select`` names;
    None where it does not apply: other kinds of arguments, a result that is not a
    float, an enclosing differentiation, an error (the transformed code then runs and
    raises it at the user's line). ``current``: the caller knows the entry is.
    ``backend``: the specialised code compiled by it (compile/numba_backend.py), where
    it can be."""
    if entry.tapeless is None or running.stack or \
            not current and (entry.code is not fn.__code__ or (
                entry.dependencies and not unchanged(entry.dependencies, MISSING))):
        return None  # (entry.is_current and is_nested, inline: this is per call)
    full = with_defaults(fn, args, entry.arity)
    if full is None:
        return None
    tapeless = compiled_code(entry, fn, backend, "gradient", entry.tapeless)
    return run_specialised(tapeless, entry.tapes, full, select, len(args))


def with_defaults(fn, args: tuple, arity: int):
    """``args`` and, after them, the defaults of the parameters they leave out (``fn``'s
    as they are now, as a call fills them in); None if they do not fill ``arity``. The
    specialised code takes every parameter: a default is an argument like any other."""
    missing = arity - len(args)
    if missing == 0:
        return args
    defaults = fn.__defaults__
    if missing < 0 or defaults is None or missing > len(defaults):
        return None
    return tuple(args) + defaults[len(defaults) - missing:]


def run_specialised(tapeless, tapes: bool, args, select, given: int | None = None):
    """``(value, gradient)`` by the specialised code ``tapeless`` (``tapes``: it builds a
    tape), the gradients ``select`` names; None where it does not apply (``specialised``).
    ``given``: the arguments the user passed, when ``args`` adds defaults after them."""
    try:
        if tapes:  # specialise/loops.py: a tape of entries (see pause_gc)
            with pause_gc():
                out = tapeless(*args)
        else:  # specialise/straight_line.py: no tape at all
            out = tapeless(*args)
    except Exception:  # noqa: BLE001 (the specialised code only reads its arguments)
        return None
    if out is None:  # the arguments are not of the kinds it was written for
        return None
    if select is ALL_GRADIENTS:
        return out if given is None or given == len(args) else (out[0], out[1][:given])
    if type(select) is int:
        if type(args[select]) not in PLAIN:  # (else: the error no float gives)
            return out[0], out[1][select]
    elif not all(type(args[k]) in PLAIN for k in select):
        return out[0], tuple([out[1][k] for k in select])
    return None


def specialised_rows(entry, fn, args, backend=None):
    """``(values, rows)`` of ``fn``, a function returning a tuple (or list) of floats, by
    the code written for its rows (``entry.rows``, written when first asked for:
    specialise/loops.py with ``rows``; compiled by ``backend`` where it can be): its
    values and, for each, the gradients of all the arguments; None where that code does
    not apply (as ``specialised``)."""
    rows = entry.rows
    if rows is UNBUILT:
        rows = entry.rows = _rows_code(entry, fn)
    rows = compiled_code(entry, fn, backend, "rows", rows)  # (None: with compile=, why)
    full = None if rows is None or running.stack else with_defaults(fn, args, entry.arity)
    if full is None:
        return None
    out = run_specialised(rows, True, full, ALL_GRADIENTS)
    if out is None or full is args:
        return out
    return out[0], [row[:len(args)] for row in out[1]]


def selected_rows(rows: list, args, select):
    """Each output's gradients (``rows``, of every argument) as ``select`` chooses them
    (``selection_of``); None where an argument chosen holds no float (the general path
    raises that error)."""
    if select is ALL_GRADIENTS:
        return list(rows)
    if type(select) is int:
        if type(args[select]) in PLAIN:
            return None
        return [g[select] for g in rows]
    if all(type(args[k]) in PLAIN for k in select):
        return None
    return [tuple([g[k] for k in select]) for g in rows]


def _rows_code(entry, fn):
    """The code of ``fn`` for a Jacobian's rows, compiled; None where it cannot be
    written. The bindings it was written for join the entry's (as Hessian code's do)."""
    try:
        parsed, node, local_names, _ = front(fn)
        found: list = []
        written = write_scalar_loops(node, fn, local_names, parsed.filename, found,
                                     rows=True)
    except (AstadError, CannotSpecialise):
        return None
    if written is None:
        return None
    function, _ = written
    entry.dependencies.extend(found)
    compiled = compile_rules([(function.name, function)], parsed.filename)[function.name]
    compiled.astad_tree, compiled.astad_of = function, fn  # (a compiled backend's)
    return compiled


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def machinery(fn, argnums, preaccumulate: bool, sources=None, backend=None):
    """The ``DiffFunction`` behind decorated ``fn`` in this process: its own when ``fn``
    was imported, else a new one, finished on first use (``fn`` may still be being
    unpickled: cloudpickle fills in its globals, closure and attributes afterwards)."""
    pickling.install_sources(sources)
    own = getattr(fn.__dict__.get("_astad_transformed"), "__self__", None)
    if isinstance(own, DiffFunction) and own._argnums == argnums \
            and own._preaccumulate == preaccumulate and own.backend == backend:
        return own
    return DiffFunction.unfinished(fn, argnums, preaccumulate, backend)


pickling.register_refusals(Pullback, ScaledPullback, RowsPullback)
