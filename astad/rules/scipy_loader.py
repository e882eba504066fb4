"""Rules registered on first use: scipy.special's (rules/scipy_special.py),
scipy.stats' distributions' (rules/scipy_stats.py) and scipy.linalg's
(rules/scipy_linalg.py), so that ``import astad`` neither
needs scipy nor pays for importing it.

The registry asks ``load_rules_for`` when a callable has no record (``on_missing``);
``ad.rev`` asks it too for a method of a scipy.stats distribution (``stats_call``).
"""
from __future__ import annotations

import sys
import types

from ..registry import on_missing

pending = True  # scipy.special's rules not registered yet
stats_pending = True  # scipy.stats' rules not registered yet
linalg_pending = True  # scipy.linalg's rules not registered yet
# module -> the loader of its rules, for rules that live in a layer above this one (they
# differentiate the user's function inside them: astad/api/integrate.py registers its own)
ABOVE: dict = {}


def load_rules_for(f) -> bool:
    """Register scipy.special's rules if ``f`` may be one of its callables (a ufunc or a
    function of scipy.special), scipy.stats' if ``f`` is one of its distributions or a
    method of one, scipy.linalg's if ``f`` is a function of scipy.linalg, when they are
    not registered yet. True if it registered them now."""
    if stats_pending and "scipy.stats" in sys.modules and is_stats_distribution(f):
        return _load_stats()
    module = getattr(f, "__module__", None)
    module = module if type(module) is str else ""  # (a class's __module__ slot: not str)
    if linalg_pending and "scipy.linalg" in sys.modules and module.startswith("scipy.linalg"):
        return _load_linalg()
    for name in list(ABOVE):
        if module.startswith(name) and name in sys.modules:
            ABOVE.pop(name)()
            return True
    global pending
    if not pending or "scipy.special" not in sys.modules:
        return False
    if not (module.startswith("scipy.special") or type(f).__name__ == "ufunc"):
        return False
    pending = False
    from . import scipy_special
    scipy_special.register_all()
    from . import catalogue
    catalogue.record_scipy_rules()
    return True


def _load_stats() -> bool:
    global stats_pending
    stats_pending = False
    import scipy.special
    load_rules_for(scipy.special.gammaln)  # (the functions the distributions are made of)
    from . import scipy_stats
    scipy_stats.register_all()
    return True


def _load_linalg() -> bool:
    global linalg_pending
    linalg_pending = False
    from . import scipy_linalg, scipy_matrix_functions
    scipy_matrix_functions.register_all(scipy_linalg.REGISTERED)
    scipy_linalg.register_all()
    return True


def _is_stats_object(obj) -> bool:
    module = getattr(type(obj), "__module__", None)
    return type(module) is str and module.startswith("scipy.stats")


def is_stats_distribution(f) -> bool:
    """Is ``f`` a distribution of scipy.stats (``scipy.stats.norm``, frozen or not) or a
    method of one (``scipy.stats.norm.logpdf``)?"""
    owner = f.__self__ if type(f) is types.MethodType else f
    return _is_stats_object(owner) and (hasattr(owner, "logpdf") or hasattr(owner, "logpmf"))


def stats_call(f):
    """D of a method of a scipy.stats distribution (``f``) that has no rule of its own:
    astad's function for a frozen distribution of scipy's whose family astad knows,
    otherwise None (the caller refuses it, naming it as the user calls it)."""
    if stats_pending:
        _load_stats()
    from . import scipy_stats
    return scipy_stats.frozen_method(f) if type(f) is types.MethodType else None


def stats_name(f) -> str:
    """``scipy.stats.weibull_min.logpdf``: a distribution's method as the user names it."""
    from . import scipy_stats
    if type(f) is types.MethodType:
        owner = scipy_stats.stats_name(f.__self__)
        return f"{owner}.{f.__name__}" if owner else repr(f)
    return scipy_stats.stats_name(f) or repr(f)


on_missing(load_rules_for)
