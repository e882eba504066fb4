"""Rules registered on first use: scipy.special's (rules/scipy_special.py), so that
``import astad`` neither needs scipy nor pays for importing it.

The registry asks ``load_rules_for`` when a callable has no record (``on_missing``).
"""
from __future__ import annotations

import sys

from ..registry import on_missing

pending = True  # scipy.special's rules not registered yet


def load_rules_for(f) -> bool:
    """Register scipy.special's rules if ``f`` may be one of its callables (a ufunc or a
    function of scipy.special) and they are not registered yet. True if it registered
    them now."""
    global pending
    if not pending or "scipy.special" not in sys.modules:
        return False
    module = getattr(f, "__module__", None) or ""
    if not (module.startswith("scipy.special") or type(f).__name__ == "ufunc"):
        return False
    pending = False
    from . import scipy_special
    scipy_special.register_all()
    from . import catalogue
    catalogue.record_scipy_rules()
    return True


on_missing(load_rules_for)
