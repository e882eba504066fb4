"""``argnums``, read as JAX reads it, for every entry point (``reverse_diff`` and the
function transforms): an int gives one gradient, a non-empty tuple of ints a tuple;
negative numbers count from the end of the positional arguments of the call; naming
an argument twice is an error (``(0, 0)`` and ``(0, -2)`` for two arguments alike)."""
from __future__ import annotations

from .errors import AstadError, InputError

ANY_COUNT = 1 << 30  # checking the form alone: no call, so no count of arguments yet


# (argnums, n_args, name) -> (positions, single), for argnums of exact ints: every
# transform made inline reads its argnums again (bounded: a program uses a few)
_READ: dict = {}


def argnums_positions(argnums, n_args: int, name: str = "argnums") -> tuple:
    """``(positions, single)``: the positional arguments ``argnums`` names for a call with
    ``n_args`` of them, as JAX reads it."""
    t = type(argnums)
    if t is int or (t is tuple and all(type(k) is int for k in argnums)):
        key = (argnums, n_args, name)  # (exact ints only: True == 1 as a key)
        found = _READ.get(key)
        if found is None:
            found = _read(argnums, n_args, name)  # (an error raises: nothing kept)
            if len(_READ) < 4096:
                _READ[key] = found
        return found
    return _read(argnums, n_args, name)


def _read(argnums, n_args: int, name: str) -> tuple:
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    numbers = (argnums,) if single else argnums
    try:
        numbers = tuple(numbers)
    except TypeError:
        raise AstadError(f"{name} must be an int or a tuple of ints, got {argnums!r}") from None
    if not numbers or not all(isinstance(k, int) and not isinstance(k, bool) for k in numbers):
        raise AstadError(f"{name} must be an int or a non-empty tuple of ints, got "
                         f"{argnums!r}")
    positions = tuple(k + n_args if k < 0 else k for k in numbers)
    for k, p in zip(numbers, positions):
        if not 0 <= p < n_args:
            raise InputError(
                f"{name} {argnums!r} refers to positional argument {k}, but the call passes "
                f"{n_args} positional arguments (keyword arguments are not differentiated; "
                "pass that argument positionally)")
    if len(set(positions)) != len(positions):
        raise AstadError(f"{name} {argnums!r} names an argument more than once (as in JAX, "
                         "each argument may be differentiated once)")
    return positions, single


def check_form(argnums, name: str = "argnums") -> None:
    """Refuse, when a function is decorated, an ``argnums`` no call could accept: not an
    int or a tuple of ints, or naming one non-negative position twice."""
    argnums_positions(argnums, ANY_COUNT, name)
