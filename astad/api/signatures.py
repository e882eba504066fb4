"""The transforms as type checkers see them.

At run time ``astad.grad`` and its kin are classes (api/transforms.py, api/jacobians.py:
their objects pickle, cache and carry ``.source``); a type checker reads these signatures
instead (``astad/__init__.py`` imports them under ``TYPE_CHECKING``), so that
``astad.grad(f)`` is checked against ``f``'s own parameters, as ``@reverse_diff`` is
(api/methods.py). What a gradient holds mirrors the arguments' structure, so it is
``Any``, as in JAX's stubs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
Argnums = int | Sequence[int]


class Transformed(Protocol[P, R_co]):
    """What a transform gives: called as the function it transforms is."""

    __wrapped__: Callable[..., Any]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


class Gradient(Transformed[P, R_co], Protocol):
    """``astad.grad(f)``: also shows the code it runs."""

    @property
    def source(self) -> str: ...


def grad(fun: Callable[P, Any], argnums: Argnums = 0,
         has_aux: bool = False) -> Gradient[P, Any]: ...


def value_and_grad(fun: Callable[P, R], argnums: Argnums = 0,
                   has_aux: bool = False) -> Transformed[P, tuple[R, Any]]: ...


def jacfwd(fun: Callable[P, Any], argnums: Argnums = 0,
           has_aux: bool = False) -> Transformed[P, Any]: ...


def jacrev(fun: Callable[P, Any], argnums: Argnums = 0,
           has_aux: bool = False) -> Transformed[P, Any]: ...


def jacobian(fun: Callable[P, Any], argnums: Argnums = 0,
             has_aux: bool = False) -> Transformed[P, Any]: ...


def hessian(fun: Callable[P, Any], argnums: Argnums = 0,
            has_aux: bool = False) -> Transformed[P, Any]: ...


class Pullback(Protocol):
    """``vjp``'s function: a cotangent shaped like the result in, one per primal out."""

    tape_length: int

    def __call__(self, cotangent: Any, /) -> tuple[Any, ...]: ...


@overload
def vjp(fun: Callable[..., R], *primals: Any,
        has_aux: Literal[False] = False) -> tuple[R, Pullback]: ...
@overload
def vjp(fun: Callable[..., tuple[R, Any]], *primals: Any,
        has_aux: Literal[True]) -> tuple[R, Pullback, Any]: ...
def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any: ...


@overload
def jvp(fun: Callable[..., R], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[False] = False) -> tuple[R, Any]: ...
@overload
def jvp(fun: Callable[..., tuple[R, Any]], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[True]) -> tuple[R, Any, Any]: ...
def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> Any: ...
