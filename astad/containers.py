"""The containers astad walks besides lists, tuples, dicts and dataclasses, and how each is
copied and made again with its own class (structure.py walks them; a gradient keeps the
argument's class).

- subclasses of list and tuple (not named tuples), and ``collections.deque``: sequences;
- subclasses of dict: mappings of their own class (the copy is made without running the
  subclass's code: ``dict.__new__``, ``dict.update``);
- ``types.MappingProxyType``: a read-only view of a mapping, made again over a copy;
- ``collections.UserList``, ``UserDict``, ``ChainMap`` and ``types.SimpleNamespace``: objects
  whose attributes are walked, as a dataclass's are.

Anything else that holds floats is refused (an ``InputError`` naming its path), never
taken as a constant: a plain object, a class with ``__slots__``, ``array.array``, a
subclass of numpy's ndarray such as ``numpy.matrix``.
"""
from __future__ import annotations

import collections
import types

_SEQUENCE_KINDS: dict = {}  # class -> is it a sequence walked here (not list or tuple)?


def other_sequence(cls) -> bool:
    """A subclass of list or tuple (not a named tuple), or a deque."""
    known = _SEQUENCE_KINDS.get(cls)
    if known is None:
        known = _SEQUENCE_KINDS[cls] = (
            issubclass(cls, (list, tuple)) and not hasattr(cls, "_fields")
        ) or issubclass(cls, collections.deque)
    return known


def is_sequence(value) -> bool:
    """A list, a tuple (named tuples included), a subclass of either, or a deque."""
    t = type(value)
    return t is list or t is tuple or isinstance(value, (list, tuple, collections.deque))


def empty_like(value):
    """An empty instance of ``value``'s class, made without running its code, with the
    instance attributes of ``value`` (a list subclass's own fields); None for a tuple
    subclass or a deque, which are made whole (``make_sequence``)."""
    cls = type(value)
    if issubclass(cls, list):
        obj = list.__new__(cls)
        _copy_attributes(value, obj)
        return obj
    return None


def make_sequence(cls, items: list, original, target=None):
    """A sequence of class ``cls`` holding ``items``: ``target`` (an ``empty_like``
    instance) filled, or a new tuple subclass or deque; ``original`` gives the instance
    attributes and a deque's ``maxlen``."""
    if cls is list:
        return items
    if cls is tuple:
        return tuple(items)
    if issubclass(cls, list):
        obj = target if target is not None else empty_like(original)
        list.extend(obj, items)
        return obj
    if issubclass(cls, tuple):
        obj = tuple.__new__(cls, items)
    else:  # a deque
        obj = cls.__new__(cls)
        collections.deque.__init__(obj, items, original.maxlen)
    _copy_attributes(original, obj)
    return obj


def instance_attributes(value) -> dict:
    """A container's own attributes (a subclass's fields), or {}."""
    return getattr(value, "__dict__", None) or {}


def _copy_attributes(source, target) -> None:
    attributes = getattr(source, "__dict__", None)
    if attributes:
        target.__dict__.update(attributes)


def set_items(original, items: list) -> None:
    """Make the mutable sequence ``original`` hold ``items`` (the base class's methods:
    a subclass's own ``__setitem__`` is not run)."""
    if isinstance(original, list):
        list.__setitem__(original, slice(None), items)
    else:
        collections.deque.clear(original)
        collections.deque.extend(original, items)


# -- mappings -------------------------------------------------------------------------------
def copy_mapping(value):
    """A copy of the dict (or dict subclass) ``value``, of its class: its own ``copy``
    where that keeps the class (OrderedDict, defaultdict, Counter), else made by dict's
    methods with the instance attributes copied (no code of the subclass runs)."""
    cls = type(value)
    if cls is dict:
        return value.copy()
    if cls.copy is not dict.copy:
        copy = value.copy()
        if type(copy) is cls:
            return copy
    copy = dict.__new__(cls)
    dict.update(copy, value)
    _copy_attributes(value, copy)
    return copy


def empty_mapping(value):
    """An empty mapping of ``value``'s class (a dict subclass), its attributes kept."""
    copy = copy_mapping(value)
    dict.clear(copy)
    return copy


def set_entries(original, items) -> None:
    """Make the dict ``original`` hold ``items`` (dict's own methods)."""
    dict.clear(original)
    dict.update(original, items)


# -- objects whose attributes are walked ------------------------------------------------------
WALKED_OBJECTS = (collections.UserList, collections.UserDict, collections.ChainMap,
                  types.SimpleNamespace)


_WALKED_KINDS: dict = {}  # class -> is it one of WALKED_OBJECTS (or a subclass)?


def is_walked_object(value) -> bool:
    """A standard-library container kept in its attributes: walked as a dataclass is."""
    cls = type(value)
    known = _WALKED_KINDS.get(cls)
    if known is None:  # (abc's isinstance is slow: once per class)
        known = _WALKED_KINDS[cls] = issubclass(cls, WALKED_OBJECTS)
    return known
