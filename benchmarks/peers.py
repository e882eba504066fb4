"""Peer AD systems for the benchmarks: autograd, PyTorch eager, JAX eager and JAX jit.

Every peer is imported lazily, the first time it is used: a peer that is not installed
is reported as "not installed" and the benchmarks run without it.

Every peer differentiates *the same code* as astad. A peer version of a program is the
program's plain (primal) function with the same code object, whose global name ``math``
is bound to a namespace of the peer's own functions (``autograd.numpy.sin``,
``torch.sin``, ``jax.numpy.sin``, ...) instead of the ``math`` module. So the loops,
the recursion, the indexing of Python lists and the control flow are exactly those of
the program astad differentiates; only the elementary functions differ. A recursive
program's own global name is rebound to the peer version too.

Each peer is called with the same Python arguments as astad (floats and lists of
floats) and returns the value and the gradients with respect to the same positional
arguments, in the peer's own types (numpy floats, tensors, JAX arrays). The timed call
includes what the peer needs to turn the Python arguments into its inputs: PyTorch makes
one float64 leaf tensor with ``requires_grad=True`` per float; JAX flattens the lists
as pytrees. Everything runs in float64 (``jax_enable_x64`` is switched on).
"""
from __future__ import annotations

import dataclasses
import math
import os
import types


class PeerUnavailable(Exception):
    """The peer's package is not installed (or cannot be imported)."""


class PeerCannotRun(Exception):
    """The peer cannot run this program; the message says why."""


# ---------------------------------------------------------------------------------------
# Helpers


def rebind_math(fn, namespace):
    """``fn`` with the same code, defaults and closure, whose global ``math`` is
    ``namespace``. If the function's own name is a global bound to ``fn`` (direct
    recursion through the module-level name), it is rebound to the new function."""
    g = dict(fn.__globals__)
    g["math"] = namespace
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__qualname__ = fn.__qualname__
    if g.get(fn.__name__) is fn:
        g[fn.__name__] = new
    return new


def _is_record(x):
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def _map_record(x, f):
    """A copy of dataclass ``x`` with ``f`` applied to every field (no __init__ run)."""
    new = object.__new__(type(x))
    for field in dataclasses.fields(x):
        object.__setattr__(new, field.name, f(getattr(x, field.name)))
    return new


def map_leaves(x, f):
    if isinstance(x, list):
        return [map_leaves(i, f) for i in x]
    if isinstance(x, tuple):
        return tuple(map_leaves(i, f) for i in x)
    if _is_record(x):
        return _map_record(x, lambda i: map_leaves(i, f))
    return f(x)


def _float_or_zero(x):
    return 0.0 if x is None else float(x)


def _math_namespace(**fns):
    ns = types.SimpleNamespace(pi=math.pi, e=math.e, tau=math.tau, inf=math.inf)
    for name, f in fns.items():
        setattr(ns, name, f)
    return ns


class Prepared:
    """A peer's gradient function for one case.

    fn(*args) returns the peer's (value, gradients); decode(result) gives
    (value as float, tuple over case.wrt of nested-float gradients)."""

    def __init__(self, fn, decode):
        self.fn = fn
        self.decode = decode


class Peer:
    key = ""            # short name used in JSON and on the command line
    label = ""          # column header
    compiles = False    # the first call compiles; time it separately
    warms_up = False    # the first call is slower than the later ones (caches fill)
    package = ""

    def __init__(self):
        self._loaded = False
        self._error = None

    def load(self):
        """Import the peer. Raises PeerUnavailable with the reason if it cannot."""
        if not self._loaded:
            self._loaded = True
            try:
                self._import()
            except Exception as exc:   # ImportError, or a broken install
                self._error = f"not installed ({type(exc).__name__}: {exc})"
        if self._error:
            raise PeerUnavailable(self._error)

    def available(self):
        try:
            self.load()
            return True
        except PeerUnavailable:
            return False

    def version(self):
        return None

    def describe(self):
        try:
            self.load()
        except PeerUnavailable as exc:
            return {"label": self.label, "available": False, "reason": str(exc)}
        return {"label": self.label, "available": True, "version": self.version(),
                "how": self.how}

    def _import(self):
        raise NotImplementedError

    def prepare(self, case):
        raise NotImplementedError

    def classify_error(self, exc):
        """(status, reason) for an exception raised by the first call."""
        return "failed", f"raised {type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc, limit=200):
    s = str(exc).strip().splitlines()
    s = s[0] if s else ""
    return s if len(s) <= limit else s[:limit] + "..."


# ---------------------------------------------------------------------------------------
# autograd


class Autograd(Peer):
    key = "autograd"
    label = "autograd"
    how = ("autograd.value_and_grad(f, argnum=wrt) on the program with math -> "
           "autograd.numpy; list arguments are autograd list containers")

    def _import(self):
        import autograd
        import autograd.numpy as anp
        self._ag = autograd
        self._ns = _math_namespace(
            sin=anp.sin, cos=anp.cos, tan=anp.tan, tanh=anp.tanh, sinh=anp.sinh,
            cosh=anp.cosh, exp=anp.exp, log=anp.log, sqrt=anp.sqrt, atan=anp.arctan,
            asin=anp.arcsin, acos=anp.arccos, fabs=anp.abs)

    def version(self):
        from importlib.metadata import version
        try:
            return version("autograd")
        except Exception:
            return getattr(self._ag, "__version__", None)

    def classify_error(self, exc):
        if isinstance(exc, TypeError) and "Can't differentiate w.r.t. type" in str(exc):
            return "n/a", ("autograd differentiates only with respect to arrays, floats "
                           f"and its own containers ({_first_line(exc)})")
        return super().classify_error(exc)

    def prepare(self, case):
        self.load()
        f = rebind_math(case.primal, self._ns)
        vg = self._ag.value_and_grad(f, tuple(case.wrt))

        def decode(res):
            value, grads = res
            return float(value), tuple(map_leaves(g, _float_or_zero) for g in grads)
        return Prepared(vg, decode)


# ---------------------------------------------------------------------------------------
# PyTorch eager


class Torch(Peer):
    key = "torch"
    label = "torch eager"
    how = ("PyTorch eager on CPU: one float64 scalar leaf tensor with requires_grad per "
           "float argument (created inside the timed call), the program with math -> "
           "torch, then .backward(); the gradients are the leaves' .grad tensors")

    def _import(self):
        import torch
        self._torch = torch
        self._ns = _math_namespace(
            sin=torch.sin, cos=torch.cos, tan=torch.tan, tanh=torch.tanh, sinh=torch.sinh,
            cosh=torch.cosh, exp=torch.exp, log=torch.log, sqrt=torch.sqrt,
            atan=torch.atan, asin=torch.asin, acos=torch.acos, fabs=torch.abs)

    def version(self):
        return self._torch.__version__

    def prepare(self, case):
        self.load()
        torch = self._torch
        tensor = torch.tensor
        f64 = torch.float64
        f = rebind_math(case.primal, self._ns)
        wrt = tuple(case.wrt)

        def leaves(x):
            if isinstance(x, float):
                return tensor(x, dtype=f64, requires_grad=True)
            if isinstance(x, list):
                if x and isinstance(x[0], float):
                    return [tensor(v, dtype=f64, requires_grad=True) for v in x]
                return [leaves(i) for i in x]
            if isinstance(x, tuple):
                return tuple(leaves(i) for i in x)
            if _is_record(x):
                return _map_record(x, leaves)
            return x

        def grad_of(x):
            if isinstance(x, list):
                return [grad_of(i) for i in x]
            if isinstance(x, tuple):
                return tuple(grad_of(i) for i in x)
            if _is_record(x):
                return _map_record(x, grad_of)
            return x.grad if isinstance(x, torch.Tensor) else None

        def fn(*args):
            args = list(args)
            for i in wrt:
                args[i] = leaves(args[i])
            out = f(*args)
            out.backward()
            return out, tuple(grad_of(args[i]) for i in wrt)

        def decode(res):
            value, grads = res
            return float(value.detach()), tuple(map_leaves(g, _float_or_zero) for g in grads)
        return Prepared(fn, decode)


# ---------------------------------------------------------------------------------------
# JAX


def _import_jax():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


_JAX_RECORDS: set = set()


class _JaxBase(Peer):
    def _import(self):
        jax, jnp = _import_jax()
        self._jax = jax
        self._ns = _math_namespace(
            sin=jnp.sin, cos=jnp.cos, tan=jnp.tan, tanh=jnp.tanh, sinh=jnp.sinh,
            cosh=jnp.cosh, exp=jnp.exp, log=jnp.log, sqrt=jnp.sqrt, atan=jnp.arctan,
            asin=jnp.arcsin, acos=jnp.arccos, fabs=jnp.abs)

    def version(self):
        import jaxlib
        return f"jax {self._jax.__version__}, jaxlib {getattr(jaxlib, '__version__', '?')}"

    def _decode(self, res):
        value, grads = res
        return float(value), tuple(map_leaves(g, float) for g in grads)

    def _register_records(self, args):
        """Dataclass arguments become pytrees (their fields are the leaves)."""
        registered = _JAX_RECORDS  # one registration per type, shared by both JAX peers
        stack = list(args)
        while stack:
            x = stack.pop()
            if isinstance(x, (list, tuple)):
                stack.extend(x)
            elif _is_record(x):
                if type(x) not in registered:
                    self._jax.tree_util.register_dataclass(
                        type(x), data_fields=[f.name for f in dataclasses.fields(x)],
                        meta_fields=[])
                    registered.add(type(x))
                stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))


class JaxEager(_JaxBase):
    key = "jax"
    label = "jax eager"
    warms_up = True     # every primitive is compiled on its first use
    how = ("jax.value_and_grad(f, argnums=wrt) without jit, on the program with "
           "math -> jax.numpy; lists are pytrees; the result is block_until_ready")

    def prepare(self, case):
        self.load()
        jax = self._jax
        self._register_records(case.args)
        f = rebind_math(case.primal, self._ns)
        vg = jax.value_and_grad(f, argnums=tuple(case.wrt))
        block = jax.block_until_ready

        def fn(*args):
            return block(vg(*args))
        return Prepared(fn, self._decode)


class JaxJit(_JaxBase):
    key = "jax_jit"
    label = "jax jit"
    compiles = True
    how = ("jax.jit(jax.value_and_grad(f, argnums=wrt)), the arguments that are not "
           "differentiated (ints) static; Python loops and recursion unroll at trace "
           "time; compile time (the first call) is reported separately and the timed "
           "calls are the later ones")

    def prepare(self, case):
        self.load()
        jax = self._jax
        self._register_records(case.args)
        f = rebind_math(case.primal, self._ns)
        static = tuple(i for i in range(len(case.args)) if i not in case.wrt)
        jitted = jax.jit(jax.value_and_grad(f, argnums=tuple(case.wrt)),
                         static_argnums=static)
        block = jax.block_until_ready

        def fn(*args):
            return block(jitted(*args))
        return Prepared(fn, self._decode)

    def classify_error(self, exc):
        jax = self._jax
        errors = getattr(jax, "errors", None)
        conc = getattr(errors, "ConcretizationTypeError", ()) if errors else ()
        if conc and isinstance(exc, conc):
            return "n/a", ("jax.jit cannot trace it: Python control flow depends on a traced "
                           f"value ({type(exc).__name__}); it would need lax.while_loop, "
                           "which reverse mode cannot differentiate")
        return super().classify_error(exc)


PEER_CLASSES = [Autograd, Torch, JaxEager, JaxJit]
PEER_KEYS = [c.key for c in PEER_CLASSES]


def make_peers(keys=None):
    keys = PEER_KEYS if keys is None else keys
    by_key = {c.key: c for c in PEER_CLASSES}
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        raise ValueError(f"unknown peer(s) {unknown}; known: {PEER_KEYS}")
    return [by_key[k]() for k in keys]


# ---------------------------------------------------------------------------------------
# Checking a peer against astad


def compare_with_astad(case, astad_value, astad_grads, peer_value, peer_grads,
                       rtol=1e-6, limit=5):
    """Problems (a list of strings) where the peer's value or gradients (over case.wrt)
    disagree with astad's beyond rtol. The absolute tolerance is rtol times 1e-3 of the
    largest gradient entry, so that entries that are zero up to rounding compare."""
    problems = []
    if not math.isclose(peer_value, astad_value, rel_tol=rtol, abs_tol=1e-12):
        problems.append(f"value: peer {peer_value!r} vs astad {astad_value!r}")
    scale = 0.0
    for g in astad_grads:
        for v in _leaf_values(g):
            if isinstance(v, float):
                scale = max(scale, abs(v))
    atol = rtol * 1e-3 * max(scale, 1e-300)

    def walk(label, p, a):
        if len(problems) >= limit:
            return
        if isinstance(a, (list, tuple)):
            if not isinstance(p, (list, tuple)) or len(p) != len(a):
                problems.append(f"{label}: structure differs (peer {type(p).__name__} of "
                                f"length {len(p) if hasattr(p, '__len__') else '-'}, astad "
                                f"{type(a).__name__} of length {len(a)})")
                return
            for k, (pi, ai) in enumerate(zip(p, a)):
                walk(f"{label}[{k}]", pi, ai)
            return
        if not isinstance(a, float):
            return
        if not (abs(p - a) <= atol + rtol * abs(a)):
            problems.append(f"{label}: peer {p!r} vs astad {a!r}")

    for ai, pg, ag in zip(case.wrt, peer_grads, astad_grads):
        walk(f"grad of arg {ai}", pg, ag)
    return problems


def _leaf_values(x):
    if isinstance(x, (list, tuple)):
        for i in x:
            yield from _leaf_values(i)
    else:
        yield x
