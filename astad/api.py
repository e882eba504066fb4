"""The public API: ``@reverse_diff`` and the gradient functions it attaches.

Conventions follow JAX and autograd: ``argnums`` chooses positional arguments (an int
gives one gradient, a tuple a tuple; by default all positional parameters, and a
one-parameter function gives its gradient alone), and a gradient has exactly the
structure of its argument.
"""
from __future__ import annotations

import functools
import inspect
import types

from . import codegen
from .errors import AstadError, InputError
from .runtime import Dual, contains_dual, contains_float, interleave, primal, rebuild, \
    seed, sweep


class Pullback:
    """The backward half of ``.vjp``: maps a result cotangent to argument gradients.

    It keeps the tape, so it can be called any number of times; ``tape_length`` is the
    number of operations recorded (tape entries other than the inputs' slots).
    """

    def __init__(self, tape, n_inputs, result, args, dual_args, positions, single):
        self._tape = tape
        self._n_inputs = n_inputs
        self._result = result
        self._args = args
        self._dual_args = dual_args
        self._positions = positions
        self._single = single
        self.tape_length = len(tape) - n_inputs

    def __call__(self, cotangent):
        adjoint = [0.0] * len(self._tape)
        seed(self._result, cotangent, adjoint)
        sweep(self._tape, adjoint, self._n_inputs)
        grads = tuple(rebuild(self._args[k], self._dual_args[k], adjoint)
                      for k in self._positions)
        return grads[0] if self._single else grads


class DiffFunction:
    """The gradient machinery of one decorated function.

    ``reverse_diff`` does not wrap the user's function in an object with a ``__call__``
    (which would cost extra Python stack per recursion level). It returns a plain function
    with the same code, globals and closure, carrying ``grad``, ``value_and_grad``,
    ``vjp`` and ``source`` as attributes; those are the bound methods of this object.
    """

    def __init__(self, fn, argnums=None):
        if not isinstance(fn, types.FunctionType):
            raise AstadError(f"reverse_diff needs a Python function, got {fn!r}")
        self._fn = fn
        self.__name__ = fn.__name__
        self._argnums = argnums
        self._signature = inspect.signature(fn)
        params = list(self._signature.parameters.values())
        self._positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
        self._has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        if argnums is not None:
            for k in (argnums,) if isinstance(argnums, int) else argnums:
                if not isinstance(k, int) or isinstance(k, bool):
                    raise AstadError(f"argnums must be an int or a tuple of ints, got {argnums!r}")

    def decorated(self):
        """A function that runs ``fn``'s own code and carries the gradient attributes."""
        fn = self._fn
        wrapper = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                     fn.__defaults__, fn.__closure__)
        functools.update_wrapper(wrapper, fn)
        wrapper.__kwdefaults__ = fn.__kwdefaults__
        wrapper.grad = self.grad
        wrapper.value_and_grad = self.value_and_grad
        wrapper.vjp = self.vjp
        wrapper.source = codegen.transformed(fn).source  # transformed now: errors show early
        wrapper._astad_transformed = self._transformed
        return wrapper

    # -- what generated code calls (calls.rev) -----------------------------------------
    def _transformed(self):
        return codegen.transformed(self._fn).rev

    # -- gradients ---------------------------------------------------------------------
    def _positions(self, args, kwargs):
        """Which positional arguments to differentiate.

        As in JAX, only arguments passed positionally are differentiated; keyword
        arguments are passed through as constants.
        """
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.__name__}(): {exc}") from None
        argnums = self._argnums
        if argnums is None:
            positions = tuple(range(len(args)))
            single = len(self._positional) == 1 and not self._has_varargs
        else:
            single = isinstance(argnums, int)
            positions = (argnums,) if single else tuple(argnums)
            positions = tuple(k + len(args) if k < 0 else k for k in positions)
            for k in positions:
                if not 0 <= k < len(args):
                    raise InputError(
                        f"argnums {argnums!r} refers to positional argument {k}, but the call "
                        f"passes {len(args)} positional arguments (keyword arguments are not "
                        "differentiated; pass that argument positionally)")
        return list(args), kwargs, positions, single

    def _forward(self, args, kwargs):
        args, kwargs, positions, single = self._positions(args, kwargs)
        if not any(contains_float(args[k]) for k in positions):
            shown = ", ".join(repr(args[k]) for k in positions)
            hint = ""
            if len(positions) == 1 and isinstance(args[positions[0]], int) and \
                    not isinstance(args[positions[0]], bool):
                hint = f"; pass {float(args[positions[0]])!r} instead of {args[positions[0]]!r}"
            raise InputError(
                f"{self.__name__}: no argument chosen for differentiation holds a float "
                f"(got {shown or 'no positional arguments'}); astad differentiates with "
                f"respect to float values passed positionally{hint}")
        for where, value in [(f"args[{k}]", v) for k, v in enumerate(args)
                             if k not in positions] + list(kwargs.items()) + [
                ("a closure variable", c.cell_contents) for c in (self._fn.__closure__ or ())
                if _cell_filled(c)]:
            if contains_dual(value):
                raise InputError(
                    f"{where} of {self.__name__} is being differentiated by an enclosing "
                    "gradient call; astad does not compute higher-order derivatives")
        tape: list = []
        dual_args = list(args)
        for k in positions:
            dual_args[k] = interleave(args[k], tape, f"args[{k}]")
        n_inputs = len(tape)
        rev = codegen.transformed(self._fn).rev
        result = rev(tape, *dual_args, **kwargs)
        return tape, n_inputs, result, args, dual_args, positions, single

    def vjp(self, *args, **kwargs):
        """Return ``(value, pullback)``; ``pullback(cotangent)`` gives the gradients."""
        tape, n_inputs, result, args, dual_args, positions, single = self._forward(args, kwargs)
        return primal(result), Pullback(tape, n_inputs, result, args, dual_args, positions,
                                        single)

    def value_and_grad(self, *args, **kwargs):
        """Return ``(value, gradient)`` of a float-valued function."""
        tape, n_inputs, result, args, dual_args, positions, single = self._forward(args, kwargs)
        if type(result) is not Dual and (isinstance(result, bool) or
                                         not isinstance(result, float)):
            raise InputError(
                f"{self.__name__} returned {type(result).__name__} "
                f"{_short(primal(result))}; .grad needs a float result. Use "
                f"{self.__name__}.vjp(...) and call the pullback with a cotangent shaped "
                "like the result")
        adjoint = [0.0] * len(tape)
        if type(result) is Dual:
            adjoint[result.i] = 1.0
            sweep(tape, adjoint, n_inputs)
        grads = tuple(rebuild(args[k], dual_args[k], adjoint) for k in positions)
        return primal(result), (grads[0] if single else grads)

    def grad(self, *args, **kwargs):
        """The gradient of a float-valued function with respect to ``argnums``."""
        return self.value_and_grad(*args, **kwargs)[1]


def _cell_filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def reverse_diff(fn=None, *, argnums=None):
    """Decorate ``fn`` so that ``fn.grad``, ``fn.value_and_grad``, ``fn.vjp`` and
    ``fn.source`` are available; calling ``fn`` still runs the original code.

    Use bare (``@reverse_diff``) or with options (``@reverse_diff(argnums=(0, 2))``).
    The function is transformed at decoration, so unsupported syntax is reported at once.
    """
    if fn is None:
        return lambda f: DiffFunction(f, argnums).decorated()
    return DiffFunction(fn, argnums).decorated()
