"""The bindings generated code is written for, and the one check that they still hold.

Code astad writes resolves some names when it is written: a global (``math``, a helper it
calls directly), a callable's rule (its record in the registry), an attribute of a
callee (its ``__code__``, its ``__defaults__``). Each such decision is a *dependency*
``(namespace, name, value)``: the namespace is a dict (a module's globals, the
registry's records) or a weak reference to an object whose attribute is read, and
``value`` is what was found (``MISSING`` for nothing). The code is current while every
dependency still holds (``unchanged``, compiled in runtime/_native.c where it is built);
when one does not, it is written again.
"""
from __future__ import annotations

import builtins
import types
import weakref

from ..runtime.tape import native

MISSING = object()  # the value of a dependency on a name that was not bound


def global_value(namespace: dict, name: str, dependencies: list):
    """The value global ``name`` of ``namespace`` has now (a builtin when the module does
    not bind it), or MISSING; the module's binding is recorded as a dependency."""
    value = namespace.get(name, MISSING)
    dependencies.append((namespace, name, value))
    if value is MISSING:
        builtins_ns = namespace.get("__builtins__", builtins)
        if isinstance(builtins_ns, types.ModuleType):
            builtins_ns = vars(builtins_ns)
        value = builtins_ns.get(name, MISSING)
    return value


def unchanged(dependencies: list, missing=MISSING) -> bool:
    """Is every dependency ``(namespace, name, value)`` still bound so?"""
    for namespace, name, value in dependencies:
        if type(namespace) is weakref.ref:
            obj = namespace()
            if (missing if obj is None else getattr(obj, name, missing)) is not value:
                return False
        elif namespace.get(name, missing) is not value:
            return False
    return True


python_unchanged = unchanged  # (the reference the compiled one is tested on)
if native is not None:
    unchanged = native.unchanged


def distinct(dependencies: list) -> list:
    """``dependencies`` with each one once, in order."""
    seen, out = set(), []
    for namespace, name, value in dependencies:
        key = (id(namespace), id(name), id(value))  # (one weak reference per object)
        if key not in seen:
            seen.add(key)
            out.append((namespace, name, value))
    return out
