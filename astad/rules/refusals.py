"""What has no derivative, and how a refusal names it: the function as the user's code
calls it (``scipy.special.jv``), the argument by what its rule calls it or by what
``refuse_arguments`` says of it, and why."""
from __future__ import annotations

import inspect

import numpy as np

from ..errors import NotDifferentiableError, user_location
from ..registry import RECORDS, record
from ..runtime.array_dual import qualified_name


def require(fn, derivatives, k) -> None:
    """A differentiated value reached argument ``k``: its derivative must be given."""
    if k >= len(derivatives) or derivatives[k] is None:
        raise not_differentiable(fn, k)


def refuse_arguments(fn, refusals: dict, name: str | None = None) -> None:
    """How the error for a differentiated value reaching an argument of ``fn`` with no
    derivative names it, and why: ``{k: (what, why)}`` (``(0, ("its order v", "..."))``
    says "scipy.special.jv is not differentiable in its order v (argument 0): ...");
    ``name``: the function as users call it, when its own name is private."""
    record(fn).refusals = (name, dict(refusals))


def not_differentiable(fn, k) -> NotDifferentiableError:
    """The error for a differentiated value reaching argument ``k`` of ``fn``, which has
    no derivative: the function as the user's code names it (scipy.special.jv), the
    argument by what ``refuse_arguments`` calls it or else by the name its rule's
    derivatives give it."""
    found = RECORDS.get(fn)
    name, refusals = found.refusals if found is not None and found.refusals else (None, {})
    what, why = refusals.get(k, (_argument_name(found, k), None))
    name = name or _called_name(fn)
    where = f"{what} (argument {k})" if what else f"argument {k}"
    return NotDifferentiableError(f"{name} is not differentiable in {where}" +
                                  (f": {why}" if why else ""), *user_location())


def _called_name(fn) -> str:
    inner = getattr(fn, "__wrapped__", fn)  # (scipy's Python functions, as primitives)
    module = getattr(inner, "__module__", None) or ""
    if isinstance(inner, (np.ufunc, tuple)) or module.split(".")[0] in ("numpy", "scipy"):
        return qualified_name(inner)
    return getattr(inner, "__name__", None) or repr(inner)


def _argument_name(found, k) -> str | None:
    """"its argument c": argument ``k`` by the name the rule's derivatives give it."""
    if found is None:
        return None
    offset, derivatives = (0, found.partials) if found.partials is not None else (
        2, found.vjps or found.jvps or ())
    for derivative in derivatives:
        if derivative is None:
            continue
        try:
            parameters = [p for p in inspect.signature(derivative).parameters.values()
                          if p.kind is p.POSITIONAL_OR_KEYWORD]
        except (TypeError, ValueError):
            return None
        last = len(parameters) - (1 if offset == 0 else 0)  # (a partial's last: result)
        return f"its argument {parameters[offset + k].name}" if offset + k < last else None
    return None


def complex_result(fn) -> NotDifferentiableError:
    found = RECORDS.get(fn)
    name = found.refusals[0] if found is not None and found.refusals and \
        found.refusals[0] else _called_name(fn)  # (the name users call it by)
    return NotDifferentiableError(f"{name} returns a complex value here, and astad's "
                                  "derivative of it holds for real values only "
                                  "(docs/complex.md)", *user_location())
