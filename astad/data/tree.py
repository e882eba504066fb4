"""The user's data as a tree: what is a leaf, what is a container, and how each container
is taken apart and made again.

D maps every data type homomorphically (paper section 9): astad sees the user's values as
trees whose leaves are floats, float arrays and constants, and whose inner nodes are
containers. This module is the one place that says which is which:

- ``is_float`` and ``is_float_array``: the leaves that carry derivatives;
- ``node_of(cls)``: the container table. A ``Node`` lists a container's children with
  their keys and makes the container again from new children, without running the
  user's code (no ``__init__``, no ``__post_init__``, no ``__setitem__`` of a subclass);
- ``register_pytree_node``: users add their own containers to the table, as in JAX;
- ``leaves``, ``leaf_paths``, ``replace_leaves`` and ``tree_map``: walks over a whole
  value, driven by an explicit stack (a linked list of 10^5 cells needs no raised
  recursion limit), each container reached twice walked once (sharing and cycles kept).

Every walk of the user's data in astad (interleave, seed, rebuild, primal, write-back,
the Jacobians' layout, ``check_grads``) reads this table, so every tool sees the leaves
``astad.grad`` differentiates.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import re
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, api_boundary

__all__ = ["Node", "node_of", "is_float", "is_float_array", "COMPLEX_SCALARS",
           "register_pytree_node",
           "register_pytree_node_class", "leaves", "leaf_paths", "replace_leaves",
           "tree_map", "tree_leaves", "format_path", "run"]


# -- leaves ---------------------------------------------------------------------------------
def is_float(value) -> bool:
    """A float leaf: a float, a subclass of float (numpy.float64, the user's own) or another
    numpy float scalar (numpy.float32). Read from the real type: a dual answers
    ``isinstance(x, float)`` as its primal does, but is not a leaf of the user's data."""
    t = type(value)
    return t is float or (t is not bool and (issubclass(t, float) or issubclass(t, np.floating)))


def is_float_array(value) -> bool:
    """A numpy array of real or complex floats (exactly ``numpy.ndarray``: a subclass such
    as ``numpy.matrix`` may give its operators other meanings and is refused where it is
    differentiated)."""
    return type(value) is np.ndarray and value.dtype.kind in "fc"


COMPLEX_SCALARS = frozenset({complex, np.complex128, np.complex64})


def is_differentiable(value) -> bool:
    """A leaf that carries a derivative: a float, a complex number, or an array of
    either."""
    return is_float(value) or is_float_array(value) or type(value) in COMPLEX_SCALARS


# -- objects made without running their code ---------------------------------------------------
def new_object(cls):
    """An instance of ``cls`` made without running its ``__init__``."""
    return object.__new__(cls) if cls.__new__ is object.__new__ else cls.__new__(cls)


_SLOTS: dict = {}  # class -> the names of its (and its bases') slots


def slot_names(cls) -> tuple:
    names = _SLOTS.get(cls)
    if names is None:
        names = []
        for klass in cls.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in ("__dict__", "__weakref__") and name not in names:
                    names.append(name)
        names = _SLOTS[cls] = tuple(names)
    return names


def record_attributes(obj) -> list:
    """All instance attributes of ``obj``: its ``__dict__`` and every filled slot."""
    slots = slot_names(type(obj))
    if not slots:  # (the common case: no class scan per call)
        return [(name, getattr(obj, name)) for name in getattr(obj, "__dict__", ())]
    names = list(getattr(obj, "__dict__", {}))
    for name in slots:
        if name not in names and hasattr(obj, name):
            names.append(name)
    return [(name, getattr(obj, name)) for name in names]


def instance_attributes(value) -> dict:
    """A container's own attributes (a subclass's fields), or {}."""
    return getattr(value, "__dict__", None) or {}


def _copy_attributes(source, target) -> None:
    attributes = getattr(source, "__dict__", None)
    if attributes:
        target.__dict__.update(attributes)


_setattr = object.__setattr__


_FROZEN: dict = {}  # class -> is it a frozen dataclass?


def is_frozen(cls) -> bool:
    """A frozen dataclass: its instances are never changed (``object.__setattr__`` aside)."""
    frozen = _FROZEN.get(cls)
    if frozen is None:
        frozen = _FROZEN[cls] = bool(getattr(getattr(cls, "__dataclass_params__", None),
                                             "frozen", False))
    return frozen


_PLAIN_RECORDS: dict = {}  # class -> MUTABLE, FROZEN, or 0: not a plain dataclass
MUTABLE, FROZEN = 1, 2


def plain_record(cls) -> int:
    """Is ``cls`` a dataclass whose instances keep every attribute in their ``__dict__``,
    read and written as stored (no slots, properties or other data descriptors, no
    ``__getattribute__`` of its own)? Then its ``__dict__`` is its record_attributes.
    ``MUTABLE`` or ``FROZEN`` if it is, 0 if not."""
    kind = _PLAIN_RECORDS.get(cls)
    if kind is not None:
        return kind
    kind = 0
    if dataclasses.is_dataclass(cls) and not slot_names(cls) and \
            cls.__getattribute__ is object.__getattribute__ and not any(
                hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
                for klass in cls.__mro__ for name, attr in vars(klass).items()
                if not (name.startswith("__") and name.endswith("__"))):
        kind = FROZEN if is_frozen(cls) else MUTABLE
    _PLAIN_RECORDS[cls] = kind
    return kind


# -- the container table -----------------------------------------------------------------------
class Node:
    """How one kind of container is walked.

    ``flatten(value)`` gives ``(keys, children, aux)``: its children in order, the key of
    each (an index, a dict key, an attribute name) and what else making it again needs;
    ``unflatten(aux, keys, children)`` makes a new container of the same kind. A *mutable*
    kind can also be made empty first (``shell(aux)``) and filled afterwards (``fill``),
    which keeps cycles through it. ``step(key)`` is a key as a path writes it (``[0]``,
    ``['k']``, ``.x``); ``child(value, key)`` reads one child.
    """

    kind = "node"
    mutable = False

    def flatten(self, value) -> tuple:
        raise NotImplementedError

    def unflatten(self, aux, keys: list, children: list):
        shell = self.shell(aux)
        self.fill(shell, keys, children)
        return shell

    def shell(self, aux):
        raise NotImplementedError

    def fill(self, shell, keys: list, children: list) -> None:
        raise NotImplementedError

    def step(self, key) -> str:
        return f"[{key}]"

    def child(self, value, key):
        return value[key]


class _List(Node):
    kind, mutable = "list", True

    def flatten(self, value):
        return range(len(value)), list(value), None

    def unflatten(self, aux, keys, children):
        return list(children)

    def shell(self, aux):
        return []

    def fill(self, shell, keys, children):
        shell.extend(children)


class _Tuple(Node):
    kind = "tuple"

    def flatten(self, value):
        return range(len(value)), list(value), None

    def unflatten(self, aux, keys, children):
        return tuple(children)


class _NamedTuple(Node):
    kind = "namedtuple"

    def flatten(self, value):
        return type(value)._fields, list(value), type(value)

    def unflatten(self, aux, keys, children):
        return tuple.__new__(aux, children)

    def step(self, key):
        return f".{key}"

    def child(self, value, key):
        return getattr(value, key)


class _Sequence(Node):
    """A subclass of list or tuple (not a named tuple), or a deque: made again of its own
    class with its own instance attributes (a deque keeps its ``maxlen``); ``aux`` is the
    original, which gives them."""
    kind = "sequence"

    def __init__(self, cls):
        self.mutable = issubclass(cls, list)

    def flatten(self, value):
        return range(len(value)), list(value), value

    def unflatten(self, aux, keys, children):
        return make_sequence(type(aux), list(children), aux)

    def shell(self, aux):
        return empty_like(aux)

    def fill(self, shell, keys, children):
        list.extend(shell, children)


class _Mapping(Node):
    """A dict or a subclass of dict, made with dict's own methods (a subclass's code does
    not run; OrderedDict, defaultdict and Counter keep what makes them theirs); ``aux`` is
    the original, which gives the class and its attributes."""
    kind, mutable = "dict", True

    def flatten(self, value):
        return list(value), list(value.values()), value

    def shell(self, aux):
        return empty_mapping(aux)

    def fill(self, shell, keys, children):
        for key, child in zip(keys, children):
            dict.__setitem__(shell, key, child)

    def step(self, key):
        return f"[{key!r}]"


class _Proxy(Node):
    """``types.MappingProxyType``: a read-only view, made again over a new dict."""
    kind = "proxy"

    def flatten(self, value):
        return list(value), list(value.values()), None

    def unflatten(self, aux, keys, children):
        return types.MappingProxyType(dict(zip(keys, children)))

    def step(self, key):
        return f"[{key!r}]"


class _Record(Node):
    """A dataclass (plain, frozen, slotted), or a standard container kept in its
    attributes (UserList, UserDict, ChainMap, SimpleNamespace): walked attribute by
    attribute, made again with ``object.__new__`` and ``object.__setattr__``; ``aux`` is
    the class."""
    kind, mutable = "record", True

    def flatten(self, value):
        attributes = record_attributes(value)
        return [name for name, _ in attributes], [v for _, v in attributes], type(value)

    def shell(self, aux):
        return new_object(aux)

    def fill(self, shell, keys, children):
        for name, child in zip(keys, children):
            _setattr(shell, name, child)

    def step(self, key):
        return f".{key}"

    def child(self, value, key):
        return getattr(value, key)


class _PlainRecord(_Record):
    """A dataclass whose attributes are its ``__dict__`` (``plain_record``): read and
    made again through the ``__dict__`` at once."""

    def flatten(self, value):
        attributes = value.__dict__
        return list(attributes), list(attributes.values()), type(value)

    def shell(self, aux):
        return object.__new__(aux)

    def fill(self, shell, keys, children):
        shell.__dict__.update(zip(keys, children))


class Registered(Node):
    """A container registered by the user (``register_pytree_node``): its flatten and
    unflatten functions, as JAX's pytree registry takes them."""
    kind = "registered"

    def __init__(self, cls, flatten: Callable, unflatten: Callable):
        self.cls, self.flatten_func, self.unflatten_func = cls, flatten, unflatten

    def flatten(self, value):
        try:
            children, aux = self.flatten_func(value)
            children = list(children)
        except (TypeError, ValueError) as error:
            raise InputError(
                f"the flatten function registered for {self.cls.__qualname__} must return "
                f"(children, aux_data): {error}") from error
        return range(len(children)), children, aux

    def unflatten(self, aux, keys, children):
        return self.unflatten_func(aux, list(children))

    def child(self, value, key):
        return self.flatten(value)[1][key]


_LIST, _TUPLE, _NAMEDTUPLE = _List(), _Tuple(), _NamedTuple()
_MAPPING, _PROXY, _RECORD, _PLAIN_RECORD = _Mapping(), _Proxy(), _Record(), _PlainRecord()
RECORD = _RECORD  # (also how astad copies another object's attributes)

# standard containers kept in their attributes, walked as a dataclass is
WALKED_OBJECTS = (collections.UserList, collections.UserDict, collections.ChainMap,
                  types.SimpleNamespace)

_REGISTERED: dict = {}    # class -> Registered (the user's containers)
_NODES: dict = {list: _LIST, tuple: _TUPLE, dict: _MAPPING,
                types.MappingProxyType: _PROXY}  # class -> Node or None, filled on demand


def node_of(cls) -> Node | None:
    """The container kind of the class ``cls``, or None for a leaf (a number, a string,
    an array, a function, any other object)."""
    try:
        return _NODES[cls]
    except KeyError:
        pass
    except TypeError:  # (an unhashable class)
        return None
    node = _classify(cls)
    _NODES[cls] = node
    return node


def _classify(cls) -> Node | None:
    for klass in cls.__mro__:  # (a subclass of a registered class is walked as it is)
        if klass in _REGISTERED:
            return _REGISTERED[klass]
    if issubclass(cls, type):
        return None
    if issubclass(cls, tuple):
        return _NAMEDTUPLE if hasattr(cls, "_fields") else _Sequence(cls)
    if issubclass(cls, (list, collections.deque)):
        return _Sequence(cls)
    if issubclass(cls, dict):
        return _MAPPING
    if dataclasses.is_dataclass(cls) or issubclass(cls, WALKED_OBJECTS):
        return _PLAIN_RECORD if plain_record(cls) else _RECORD
    return None


def node_for(value) -> Node | None:
    """The container kind of ``value`` (None for a leaf)."""
    return node_of(type(value))


@api_boundary
def register_pytree_node(nodetype: type, flatten_func: Callable[[Any], tuple],
                         unflatten_func: Callable[[Any, list], Any]) -> None:
    """Make instances of ``nodetype`` containers astad walks, as ``jax.tree_util`` does.

    ``flatten_func(obj)`` returns ``(children, aux_data)``: the values astad walks into
    (floats, arrays and other containers among them), and anything else needed to make
    the object again; ``unflatten_func(aux_data, children)`` makes it again from new
    children. A gradient with respect to such an object is an object of the same type
    made by ``unflatten_func`` with the children's gradients, and so are tangents,
    Jacobian blocks and ``check_grads``' perturbations. Registered containers are taken
    as values: a function that mutates one changes its own copy only.
    """
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node needs a class, got {nodetype!r}")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise TypeError("register_pytree_node needs flatten_func(obj) -> (children, aux) and "
                        "unflatten_func(aux, children) -> obj")
    _REGISTERED[nodetype] = Registered(nodetype, flatten_func, unflatten_func)
    _NODES.clear()  # (subclasses classified before may now be walked differently)
    _NODES.update({list: _LIST, tuple: _TUPLE, dict: _MAPPING,
                   types.MappingProxyType: _PROXY})


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: register ``cls`` with its ``tree_flatten()`` method and its
    ``tree_unflatten(aux_data, children)`` class method (as ``jax.tree_util``)."""
    register_pytree_node(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten)
    return cls


# -- sequences and mappings of the user's classes ---------------------------------------------
def is_sequence(value) -> bool:
    """A list, a tuple (named tuples included), a subclass of either, or a deque."""
    t = type(value)
    return t is list or t is tuple or isinstance(value, (list, tuple, collections.deque))


def other_sequence(cls) -> bool:
    """A subclass of list or tuple (not a named tuple), or a deque."""
    return type(node_of(cls)) is _Sequence


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


def set_items(original, items: list) -> None:
    """Make the mutable sequence ``original`` hold ``items`` (the base class's methods:
    a subclass's own ``__setitem__`` is not run)."""
    if isinstance(original, list):
        list.__setitem__(original, slice(None), items)
    else:
        collections.deque.clear(original)
        collections.deque.extend(original, items)


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
    if type(value) is dict:
        return {}
    copy = copy_mapping(value)
    dict.clear(copy)
    return copy


def set_entries(original, items) -> None:
    """Make the dict ``original`` hold ``items`` (dict's own methods)."""
    dict.clear(original)
    dict.update(original, items)


# -- walks -------------------------------------------------------------------------------------
def run(walk):
    """Drive a recursive generator: ``yield sub_walk`` calls it and receives its result.
    Every walk of user data is written so, which keeps its stack off Python's."""
    stack, value = [walk], None
    while stack:
        try:
            child = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            continue
        stack.append(child)
        value = None
    return value


class Path:
    """Where a leaf is in a value: a chain of (node, key) steps from the root, shared
    with the leaf's siblings (a leaf 10^4 containers deep costs one step)."""

    __slots__ = ("parent", "node", "key")

    def __init__(self, parent, node, key):
        self.parent, self.node, self.key = parent, node, key

    def steps(self) -> list:
        out, p = [], self
        while p is not None:
            out.append((p.node, p.key))
            p = p.parent
        out.reverse()
        return out

    def format(self, root: str) -> str:
        return root + "".join(node.step(key) for node, key in self.steps())

    def get(self, value):
        """The value at this path in ``value`` (a structure shaped like the one the path
        was read from)."""
        for node, key in self.steps():
            value = node.child(value, key)
        return value


def format_path(root: str, path: Path | None) -> str:
    return root if path is None else path.format(root)


def leaf_paths(value, is_leaf: Callable = is_differentiable) -> list:
    """``(path, leaf)`` for every leaf of ``value`` that ``is_leaf`` accepts, depth first
    in the order of each container's items; a container reached twice (aliasing, a
    cycle) is walked once, at the first path that reaches it."""
    found: list = []
    seen: set = set()
    stack = [(value, None)]
    while stack:
        x, path = stack.pop()
        if is_leaf(x):
            found.append((path, x))
            continue
        node = node_of(type(x))
        if node is None or id(x) in seen:
            continue
        seen.add(id(x))
        keys, children, _ = node.flatten(x)
        stack.extend((child, Path(path, node, key)) for key, child in
                     reversed(list(zip(keys, children))))
    return found


def leaves(value, is_leaf: Callable = is_differentiable) -> list:
    """The leaves of ``value`` that ``is_leaf`` accepts, in ``leaf_paths``' order."""
    return [leaf for _, leaf in leaf_paths(value, is_leaf)]


def replace_leaves(value, new_leaves, is_leaf: Callable = is_differentiable,
                   other: Callable | None = None):
    """A new value shaped like ``value`` whose k-th leaf (in ``leaf_paths``' order) is
    ``new_leaves[k]``: containers made again of their own kinds (no user code runs),
    shared containers shared once and cycles kept; every other value is ``other(x)``
    (kept as it is by default)."""
    source = iter(new_leaves)
    return run(_replace(value, lambda x: next(source), is_leaf, other, {}, False))


def tree_map(fn: Callable, value, is_leaf: Callable = is_differentiable,
             other: Callable | None = None, objects: bool = False):
    """``value`` with ``fn(leaf)`` at every leaf ``is_leaf`` accepts (see
    ``replace_leaves``). With ``objects``, sets and the objects of other classes are
    walked too (``object_node``): their copies hold what ``fn`` gives."""
    return run(_replace(value, fn, is_leaf, other, {}, objects))


def tree_leaves(value, is_leaf: Callable = is_differentiable) -> list:
    """The float and float-array leaves of ``value`` (as ``jax.tree_util.tree_leaves``,
    with astad's idea of a leaf)."""
    return leaves(value, is_leaf)


def _replace(value, fn, is_leaf, other, memo, objects):
    if is_leaf(value):
        return fn(value)
    node = node_of(type(value))
    if node is None and objects:
        node = object_node(value)
    if node is None:
        return value if other is None else other(value)
    done = memo.get(id(value))
    if done is not None:
        if done is _BUILDING:
            raise InputError(f"a {type(value).__qualname__} holds itself through "
                             "containers astad makes whole; it cannot be made again")
        return done
    keys, items, aux = node.flatten(value)
    shell = node.shell(aux) if node.mutable else None
    memo[id(value)] = _BUILDING if shell is None else shell
    children = []
    for child in items:
        children.append((yield _replace(child, fn, is_leaf, other, memo, objects)))
    if shell is not None:
        node.fill(shell, keys, children)
        return shell
    made = node.unflatten(aux, keys, children)
    memo[id(value)] = made
    return made


_BUILDING = object()  # (memo: an immutable container whose children are being made)


class _Set(Node):
    """A set or frozenset, for the walks that look into every object (``object_node``)."""
    kind = "set"

    def flatten(self, value):
        items = list(value)
        return range(len(items)), items, type(value)

    def unflatten(self, aux, keys, children):
        return aux(children)


_SET = _Set()


def object_node(value) -> Node | None:
    """How the walks that follow every object (not only the user's data) see ``value``,
    which is not a container: a set's items, or an object's readable attributes (as a
    record); None for anything else."""
    t = type(value)
    if t is set or t is frozenset:
        return _SET
    if is_instance(value):
        try:
            record_attributes(value)
        except Exception:  # noqa: BLE001 (an attribute that cannot be read)
            return None
        return RECORD
    return None


# -- matching a structure given for a value (a tangent, a cotangent) --------------------------
def children_like(node: Node, cls: type, keys, given, path: str, what: str,
                  noun: str) -> list:
    """The children of ``given`` (a tangent or cotangent, ``what``) that correspond to the
    children ``keys`` of a container of kind ``node`` and class ``cls`` (``noun`` names it
    in messages): a sequence of the same length, a dict with the same keys, a record of
    the same class (the same variant of a union), a registered container of the same
    class with as many children. Anything else is an ``InputError`` saying where and
    what it should be."""
    kind = node.kind
    if kind in ("list", "tuple", "namedtuple", "sequence"):
        if not is_sequence(given) or len(given) != len(keys):
            raise InputError(
                f"the {what} at {path} should be a {cls.__name__} of length {len(keys)} like "
                f"the {noun}, got {type(given).__name__} {short(given)}")
        return list(given)
    if kind in ("dict", "proxy"):
        mapping = isinstance(given, (dict, types.MappingProxyType))
        if not mapping or given.keys() != set(keys):
            missing = [k for k in keys if not mapping or k not in given]
            raise InputError(
                f"the {what} at {path} should be a dict with the {noun}'s keys {list(keys)!r}"
                + (f" (missing {missing!r})" if missing else "") + f", got {short(given)}")
        return [given[k] for k in keys]
    if type(given) is not cls:
        raise InputError(
            f"the {what} at {path} should be a {cls.__qualname__} like the {noun} "
            f"(the same variant), got {type(given).__qualname__} {short(given)}")
    if kind == "record":
        return [getattr(given, name, None) for name in keys]
    children = node.flatten(given)[1]
    if len(children) != len(keys):
        raise InputError(f"the {what} at {path} should have {len(keys)} children like the "
                         f"{noun}, got {len(children)}")
    return children


def short(value) -> str:
    """``repr(value)``, cut to 60 characters for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- what any object holds (for the walks that look for a value anywhere) ----------------------
_NOT_INSTANCES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                  types.MethodType, types.BuiltinMethodType, types.CodeType, enum.Enum,
                  np.ndarray, np.generic)


def is_instance(value) -> bool:
    """An object of a class that keeps values in attributes (a user's class), whose
    attributes astad may read: not a class, a module, a function or a numpy value."""
    return not isinstance(value, _NOT_INSTANCES) and (
        hasattr(value, "__dict__") or bool(slot_names(type(value))))


FUNCTIONS = (types.FunctionType, types.MethodType, functools.partial)


def function_parts(fn) -> list:
    """What a function holds: its closure cells' values and its defaults, a bound
    method's function and object, a partial's function and arguments."""
    if isinstance(fn, functools.partial):
        return [fn.func, fn.args, fn.keywords]
    if type(fn) is types.MethodType:
        return [fn.__func__, fn.__self__]
    parts = [fn.__defaults__, fn.__kwdefaults__]
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    for k, cell in enumerate(fn.__closure__ or ()):
        if k < len(names) and _GENERATED.match(names[k]):
            continue  # (a transformed function's tape and fused rules: not the user's)
        try:
            parts.append(cell.cell_contents)
        except ValueError:  # (a cell not yet filled)
            pass
    return parts


# the names the transform gives its own variables (transform/reverse.py: the tape, the
# fused rules of a line), which no user name can take
_GENERATED = re.compile(r"_tape_*$|_line_*\d")


_ATOMS = (float, int, str, bool, bytes, type(None))


def parts(value, functions: bool = False, keys: bool = True) -> list:
    """Everything ``value`` holds that may hold a value in turn: a container's children
    (and a dict's keys, unless ``keys`` is false), a set's items, an object's attributes,
    and with ``functions``, what a function holds (``function_parts``). Nothing for a
    leaf."""
    t = type(value)
    if t in _ATOMS:
        return []
    node = node_of(t)
    if node is not None:
        if keys and node.kind in ("dict", "proxy"):  # (a key may hold a value too)
            return list(value.keys()) + list(value.values())
        return node.flatten(value)[1]
    if t is set or t is frozenset:
        return list(value)
    if functions and isinstance(value, FUNCTIONS):  # (before objects: a partial is one)
        return function_parts(value)
    if is_instance(value):
        try:
            return [x for _, x in record_attributes(value)]
        except Exception:  # noqa: BLE001 (an attribute that cannot be read)
            return []
    return []


def find(value, test: Callable, functions: bool = False, every: bool = False,
         keys: bool = True):
    """The first value ``value`` holds anywhere (itself included: ``parts``, followed
    to any depth, each object once) that ``test`` accepts, or None; with ``every``, the
    list of all of them."""
    found: list = []
    seen: set = set()
    stack = [value]
    while stack:
        x = stack.pop()
        if test(x):
            if not every:
                return x
            found.append(x)
            continue
        if type(x) in _ATOMS or id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(reversed(parts(x, functions, keys)))
    return found if every else None
