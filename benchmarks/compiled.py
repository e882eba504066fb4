"""The compiled backend (issue 28): astad's gradient compiled by numba
(``astad.grad(f, argnums, compile="numba")``) of four loop programs written in plain
Python, each measured in one run side by side with the same code compiled by numba
(``numba.njit(primal)``, the denominator of every ratio), astad's Python gradient, JAX
(``jax.jit(jax.grad(...))`` of a ``lax.fori_loop`` or vectorised rewrite) and an adjoint
written by hand in numba:

- ``dot``: ``s += x[i] * y[i]`` over two 1-d float64 arrays of n = 10^5, gradient with
  respect to both (JAX: ``jnp.dot``);
- ``pendulum``: a damped pendulum, 1,000 classic Runge-Kutta steps on floats, gradient
  with respect to all five of theta0, omega0, g, damping, dt (JAX: ``fori_loop`` over a
  tuple carry; by hand: the trajectory stored, swept back through RK4);
- ``particles``: 200 particles on a line, 100 explicit Euler steps, pairwise forces by a
  helper (``pair_force``) in an O(n^2) loop, the sum of squared positions at the end,
  gradient with respect to the initial positions (JAX: ``fori_loop`` over the steps, the
  forces as a matrix; by hand: the positions stored, swept back);
- ``tree_fold``: a binary tree of depth 15 folded recursively, gradient with respect to
  its weight (JAX: leaves computed, then combined level by level; by hand: the derivative
  carried through the recursion, forward, for the one input).

The compiled gradient is called once before it is timed: that first call (astad writes
its code and numba compiles it, seconds) is reported as astad's compile time, and JAX's
first call as its compile time. Every variant of a row is timed in turn in each sample
(interleaved); the tables give medians of 15 samples of about 20 ms; a variant slower than
``--slow`` seconds a call (astad's Python gradient of the particles) gets 3 samples of one
call. Before timing, the compiled gradient must equal astad's Python gradient bit for bit
(with the kernel answering, not the Python code) and agree with JAX's and the hand
adjoint's within rtol 1e-9 (relative to the largest entry where an entry is near 0), or
the script stops.

Goals (issue 28): the compiled gradient within 5x of the numba primal on the pendulum,
within 12x on the dot product and the particle system (moonshot: 3x); astad's compile
time is stated. ``python benchmarks/compiled.py`` (a few minutes; ``--quick``: smaller
sizes, 3 short samples, under a minute). Writes benchmarks/results/compiled.json and .md
(compiled-quick.* with ``--quick``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import timeit
import types
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

import astad  # noqa: E402
from small_arrays import calibrate, save_rows  # noqa: E402

try:
    import numba
except ImportError:  # (the compiled backend and the denominator both need it)
    raise SystemExit("benchmarks/compiled.py needs numba (pip install numba)") from None

GOALS = {"pendulum": 5.0, "dot": 12.0, "particles": 12.0}  # compiled gradient / primal
MOONSHOT = 3.0
RTOL = 1e-9


# ---------------------------------------------------------------------------------------
# The programs, as scientists write them (the same code for astad and numba.njit)

def dot(x, y):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    return s


def pendulum(theta0, omega0, g, damping, dt, steps=1000):
    """A damped pendulum, ``steps`` steps of classic Runge-Kutta: the angle at the end."""
    th, om = theta0, omega0
    for _ in range(steps):
        k1t, k1o = om, -g * math.sin(th) - damping * om
        th2, om2 = th + 0.5 * dt * k1t, om + 0.5 * dt * k1o
        k2t, k2o = om2, -g * math.sin(th2) - damping * om2
        th3, om3 = th + 0.5 * dt * k2t, om + 0.5 * dt * k2o
        k3t, k3o = om3, -g * math.sin(th3) - damping * om3
        th4, om4 = th + dt * k3t, om + dt * k3o
        k4t, k4o = om4, -g * math.sin(th4) - damping * om4
        th = th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
        om = om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
    return th


def pair_force(a, b):
    d = a - b
    return d / (d * d + 0.01) ** 1.5


def particles(x0, v0, dt, steps):
    """Particles on a line with pairwise forces (a helper), explicit Euler: the sum of
    squared positions at the end. (The sum is a loop: numba.njit takes no generator.)"""
    n = len(x0)
    x = [0.0] * n
    v = [0.0] * n
    for i in range(n):
        x[i] = x0[i]
        v[i] = v0[i]
    for _ in range(steps):
        for i in range(n):
            f = 0.0
            for j in range(n):
                if i != j:
                    f += pair_force(x[i], x[j])
            v[i] = v[i] + dt * f
        for i in range(n):
            x[i] = x[i] + dt * v[i]
    s = 0.0
    for i in range(n):
        s += x[i] * x[i]
    return s


def tree_fold(w, depth):
    """A binary tree folded recursively: each node mixes its children with weight ``w``."""
    if depth == 0:
        return math.tanh(w)
    left = tree_fold(w * 0.9, depth - 1)
    right = tree_fold(w * 1.1 - 0.05, depth - 1)
    return math.sin(left) * right + w * 0.01


def numba_primal(fn, *helpers):
    """``numba.njit`` of ``fn``'s own code, its global names of itself (recursion) and of
    ``helpers`` bound to their numba dispatchers (numba calls no Python function)."""
    namespace = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
    jitted = numba.njit(copy)
    namespace[fn.__name__] = jitted
    for helper in helpers:
        namespace[helper.__name__] = numba.njit(helper)
    return jitted


# ---------------------------------------------------------------------------------------
# Adjoints written by hand, in numba

@numba.njit
def dot_adjoint(x, y):
    n = len(x)
    gx, gy = np.empty(n), np.empty(n)
    for i in range(n):
        gx[i] = y[i]
        gy[i] = x[i]
    return gx, gy


@numba.njit
def pendulum_adjoint(theta0, omega0, g, damping, dt, steps=1000):
    """The trajectory stored forward, then each RK4 step's stages recomputed from its
    start and swept back."""
    ths, oms = np.empty(steps + 1), np.empty(steps + 1)
    th, om = theta0, omega0
    h2, h6 = 0.5 * dt, dt / 6.0
    for k in range(steps):
        ths[k], oms[k] = th, om
        k1t, k1o = om, -g * math.sin(th) - damping * om
        th2, om2 = th + h2 * k1t, om + h2 * k1o
        k2t, k2o = om2, -g * math.sin(th2) - damping * om2
        th3, om3 = th + h2 * k2t, om + h2 * k2o
        k3t, k3o = om3, -g * math.sin(th3) - damping * om3
        th4, om4 = th + dt * k3t, om + dt * k3o
        k4t, k4o = om4, -g * math.sin(th4) - damping * om4
        th = th + h6 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
        om = om + h6 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
    a_th, a_om, a_g, a_c, a_dt = 1.0, 0.0, 0.0, 0.0, 0.0
    for k in range(steps - 1, -1, -1):
        th, om = ths[k], oms[k]
        k1t, k1o = om, -g * math.sin(th) - damping * om
        th2, om2 = th + h2 * k1t, om + h2 * k1o
        k2t, k2o = om2, -g * math.sin(th2) - damping * om2
        th3, om3 = th + h2 * k2t, om + h2 * k2o
        k3t, k3o = om3, -g * math.sin(th3) - damping * om3
        th4, om4 = th + dt * k3t, om + dt * k3o
        k4t, k4o = om4, -g * math.sin(th4) - damping * om4
        # th' = th + dt/6 (k1t + 2 k2t + 2 k3t + k4t), om' likewise
        a_dt += (a_th * (k1t + 2.0 * k2t + 2.0 * k3t + k4t) +
                 a_om * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)) / 6.0
        b_th, b_om = a_th, a_om  # (the adjoints of th and om, accumulated below)
        a_k1t, a_k2t, a_k3t, a_k4t = h6 * a_th, 2.0 * h6 * a_th, 2.0 * h6 * a_th, h6 * a_th
        a_k1o, a_k2o, a_k3o, a_k4o = h6 * a_om, 2.0 * h6 * a_om, 2.0 * h6 * a_om, h6 * a_om
        # stage 4: k4t = om4, k4o = -g sin(th4) - c om4; th4 = th + dt k3t, om4 likewise
        a_om4 = a_k4t - damping * a_k4o
        a_th4 = -g * math.cos(th4) * a_k4o
        a_g -= math.sin(th4) * a_k4o
        a_c -= om4 * a_k4o
        b_th += a_th4
        b_om += a_om4
        a_dt += a_th4 * k3t + a_om4 * k3o
        a_k3t += dt * a_th4
        a_k3o += dt * a_om4
        # stage 3: th3 = th + dt/2 k2t, om3 likewise
        a_om3 = a_k3t - damping * a_k3o
        a_th3 = -g * math.cos(th3) * a_k3o
        a_g -= math.sin(th3) * a_k3o
        a_c -= om3 * a_k3o
        b_th += a_th3
        b_om += a_om3
        a_dt += 0.5 * (a_th3 * k2t + a_om3 * k2o)
        a_k2t += h2 * a_th3
        a_k2o += h2 * a_om3
        # stage 2: th2 = th + dt/2 k1t, om2 likewise
        a_om2 = a_k2t - damping * a_k2o
        a_th2 = -g * math.cos(th2) * a_k2o
        a_g -= math.sin(th2) * a_k2o
        a_c -= om2 * a_k2o
        b_th += a_th2
        b_om += a_om2
        a_dt += 0.5 * (a_th2 * k1t + a_om2 * k1o)
        a_k1t += h2 * a_th2
        a_k1o += h2 * a_om2
        # stage 1: k1t = om, k1o = -g sin(th) - c om
        b_om += a_k1t - damping * a_k1o
        b_th += -g * math.cos(th) * a_k1o
        a_g -= math.sin(th) * a_k1o
        a_c -= om * a_k1o
        a_th, a_om = b_th, b_om
    return a_th, a_om, a_g, a_c, a_dt


@numba.njit
def particles_adjoint(x0, v0, dt, steps):
    """The positions of every step stored forward; back: the adjoint of v' = v + dt F(x),
    x' = x + dt v' (F's Jacobian transposed: sum over j of p'(x_k - x_j) (b_k - b_j))."""
    n = len(x0)
    xs = np.empty((steps + 1, n))
    x, v = x0.copy(), v0.copy()
    for k in range(steps):
        xs[k] = x
        for i in range(n):
            f = 0.0
            for j in range(n):
                if i != j:
                    d = x[i] - x[j]
                    f += d / (d * d + 0.01) ** 1.5
            v[i] = v[i] + dt * f
        for i in range(n):
            x[i] = x[i] + dt * v[i]
    a_x, a_v, b = 2.0 * x, np.zeros(n), np.empty(n)
    for k in range(steps - 1, -1, -1):
        x = xs[k]
        for i in range(n):
            a_v[i] += dt * a_x[i]
            b[i] = dt * a_v[i]
        for i in range(n):
            s = 0.0
            for j in range(n):
                if i != j:
                    d = x[i] - x[j]
                    q = d * d + 0.01
                    s += (q ** -1.5 - 3.0 * d * d * q ** -2.5) * (b[i] - b[j])
            a_x[i] += s
    return a_x


@numba.njit
def _tree_derivative(w, depth):
    if depth == 0:
        t = math.tanh(w)
        return t, 1.0 - t * t
    left, d_left = _tree_derivative(w * 0.9, depth - 1)
    right, d_right = _tree_derivative(w * 1.1 - 0.05, depth - 1)
    return (math.sin(left) * right + w * 0.01,
            math.cos(left) * 0.9 * d_left * right + math.sin(left) * 1.1 * d_right + 0.01)


@numba.njit
def tree_fold_adjoint(w, depth):
    """One input: the derivative carried forward through the recursion."""
    return _tree_derivative(w, depth)[1]


# ---------------------------------------------------------------------------------------
# JAX's forms: loops as lax.fori_loop, or vectorised

def jax_forms(jnp, lax):
    def jdot(x, y):
        return jnp.dot(x, y)

    def jpendulum(steps):
        def f(theta0, omega0, g, damping, dt):
            def step(_, carry):
                th, om = carry
                k1t, k1o = om, -g * jnp.sin(th) - damping * om
                th2, om2 = th + 0.5 * dt * k1t, om + 0.5 * dt * k1o
                k2t, k2o = om2, -g * jnp.sin(th2) - damping * om2
                th3, om3 = th + 0.5 * dt * k2t, om + 0.5 * dt * k2o
                k3t, k3o = om3, -g * jnp.sin(th3) - damping * om3
                th4, om4 = th + dt * k3t, om + dt * k3o
                k4t, k4o = om4, -g * jnp.sin(th4) - damping * om4
                return (th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t),
                        om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o))
            return lax.fori_loop(0, steps, step, (theta0, omega0))[0]
        return f

    def jparticles(steps):
        def f(x0, v0, dt):
            off = 1.0 - jnp.eye(x0.shape[0])

            def step(_, carry):
                x, v = carry
                d = x[:, None] - x[None, :]
                v = v + dt * jnp.sum(off * d / (d * d + 0.01) ** 1.5, axis=1)
                return x + dt * v, v
            x, _ = lax.fori_loop(0, steps, step, (x0, v0))
            return jnp.sum(x * x)
        return f

    def jtree(depth):
        def f(w):
            ws = [jnp.reshape(w, (1,))]  # the weight of every node, level by level
            for _ in range(depth):
                ws.append(jnp.stack([ws[-1] * 0.9, ws[-1] * 1.1 - 0.05], axis=1).ravel())
            values = jnp.tanh(ws[depth])
            for level in range(depth - 1, -1, -1):
                values = jnp.sin(values[0::2]) * values[1::2] + ws[level] * 0.01
            return values[0]
        return f

    return jdot, jpendulum, jparticles, jtree


def load_jax():
    """jax, with float64, or None where it is not installed."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


# ---------------------------------------------------------------------------------------
# The rows

def cases(quick: bool) -> list:
    """One dict per row: the program, its arguments (the same for every column), the
    differentiated ones, the size, the hand adjoint, and JAX's form (built with jax)."""
    rng = np.random.default_rng(28)
    n_dot, n_particles, steps, depth = (10 ** 4, 50, 20, 10) if quick else \
        (10 ** 5, 200, 100, 15)
    x0 = np.sort(rng.random(n_particles)) * (n_particles / 10.0)  # spacing about 0.1
    v0 = rng.normal(size=n_particles) * 0.1
    return [
        {"program": "dot", "size": f"n = {n_dot:,}", "fn": dot, "helpers": (),
         "args": (rng.random(n_dot), rng.random(n_dot)), "argnums": (0, 1),
         "hand": dot_adjoint, "jax": lambda forms: (forms[0], (0, 1))},
        {"program": "pendulum", "size": "1,000 RK4 steps", "fn": pendulum, "helpers": (),
         "args": (1.0, 0.2, 9.81, 0.1, 0.01, 1000), "argnums": (0, 1, 2, 3, 4),
         "hand": pendulum_adjoint, "jax": lambda forms: (forms[1](1000), (0, 1, 2, 3, 4)),
         "jax_args": 5},
        {"program": "particles", "size": f"n = {n_particles}, {steps} steps",
         "fn": particles, "helpers": (pair_force,), "args": (x0, v0, 1e-3, steps),
         "argnums": 0, "hand": particles_adjoint,
         "jax": lambda forms: (forms[2](steps), 0), "jax_args": 3},
        {"program": "tree_fold", "size": f"depth {depth}", "fn": tree_fold, "helpers": (),
         "args": (0.7, depth), "argnums": 0, "hand": tree_fold_adjoint,
         "jax": lambda forms: (forms[3](depth), 0), "jax_args": 1},
    ]


def flat(gradient) -> np.ndarray:
    """A gradient (a float, an array, a list, a tuple of them) as one float64 array."""
    if isinstance(gradient, (tuple, list)) and gradient and \
            isinstance(gradient[0], (tuple, list, np.ndarray)):
        return np.concatenate([flat(g) for g in gradient])
    return np.atleast_1d(np.asarray(gradient, dtype=np.float64)).ravel()


def relative_error(got, want) -> float:
    """The largest |got - want| over |want|, an entry's |want| taken as at least 1e-6 of
    the largest (an entry near 0 measured against the gradient's scale)."""
    got, want = flat(got), flat(want)
    if got.shape != want.shape:
        return math.inf
    scale = np.maximum(np.abs(want), 1e-6 * np.max(np.abs(want)))
    return float(np.max(np.abs(got - want) / np.where(scale > 0, scale, 1.0)))


def first_call(call):
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def kernel_answers(fn, call) -> bool | None:
    """Does astad's compiled call answer ``call()`` by its numba kernel, not by the Python
    code it falls back to? None where astad's internals do not say (they may move)."""
    try:
        from astad.compile import calls as codegen
        compiled = codegen.transformed(fn).compiled.get(("numba", "gradient"))
        python_code = compiled.python_code
    except Exception:  # noqa: BLE001 (a benchmark's aside, not its measurement)
        return None
    ran = []

    def counted(*args):
        ran.append(1)
        return python_code(*args)
    compiled.python_code = counted
    try:
        call()
    finally:
        compiled.python_code = python_code
    return not ran


def interleaved_capped(calls: dict, samples: int, target: float, slow: dict) -> dict:
    """Median seconds per call of each zero-argument callable, all sampled in turn; a
    callable in ``slow`` (whose first call took longer than ``--slow``) is sampled in the
    first 3 rounds only, one call each. Returns {name: (median, samples)}."""
    numbers = {name: 1 if name in slow else calibrate(call, target)
               for name, call in calls.items()}
    times: dict = {name: [] for name in calls}
    for k in range(samples):
        for name, call in calls.items():
            if name in slow and k >= 3:
                continue
            times[name].append(timeit.timeit(call, number=numbers[name]) / numbers[name])
    return {name: (statistics.median(values), len(values)) for name, values in times.items()}


def bench(case: dict, jax, forms, samples: int, target: float, slow_s: float) -> dict:
    from astad.compile.numba_backend import CompileWarning
    fn, args, argnums = case["fn"], case["args"], case["argnums"]
    primal = numba_primal(fn, *case["helpers"])
    value, primal_compile_s = first_call(lambda: primal(*args))
    if not math.isclose(value, fn(*args), rel_tol=1e-12):
        raise SystemExit(f"{case['program']}: numba's primal disagrees with Python's")
    compiled = astad.grad(fn, argnums=argnums, compile="numba")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompileWarning)
        got, compile_s = first_call(lambda: compiled(*args))
    refusals = [str(w.message) for w in caught if issubclass(w.category, CompileWarning)]
    if refusals:
        raise SystemExit(f"{case['program']}: astad did not compile it: {refusals}")
    answered = kernel_answers(fn, lambda: compiled(*args))
    if answered is False:
        raise SystemExit(f"{case['program']}: the compiled call ran the Python code")
    python = astad.grad(fn, argnums=argnums)
    want, python_first_s = first_call(lambda: python(*args))
    if not np.array_equal(flat(got), flat(want)):
        raise SystemExit(f"{case['program']}: the compiled gradient differs from astad's "
                         f"Python gradient ({relative_error(got, want):.2e})")
    calls = {"primal": lambda: primal(*args), "compiled": lambda: compiled(*args),
             "python": lambda: python(*args)}
    slow = {"python"} if python_first_s > slow_s else set()
    check = {"python": 0.0}

    hand = case["hand"]
    hand_result, hand_compile_s = first_call(lambda: hand(*args))
    check["hand"] = relative_error(hand_result, got)
    calls["hand"] = lambda: hand(*args)

    jax_compile_s = None
    if jax is not None:
        jfun, jargnums = case["jax"](forms)
        jargs = tuple(jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a
                      for a in args[:case.get("jax_args", len(args))])
        jitted = jax.jit(jax.grad(jfun, argnums=jargnums))
        jax_result, jax_compile_s = first_call(
            lambda: jax.block_until_ready(jitted(*jargs)))
        check["jax"] = relative_error(jax.device_get(jax_result), got)
        calls["jax"] = lambda: jax.block_until_ready(jitted(*jargs))
    for name in ("hand", "jax"):
        if check.get(name, 0.0) > RTOL:
            raise SystemExit(f"{case['program']}: the {name} gradient disagrees with "
                             f"astad's ({check[name]:.2e} > {RTOL})")

    medians = interleaved_capped(calls, samples, target, slow)
    base = medians["primal"][0]
    row = {"program": case["program"], "size": case["size"],
           "primal_s": base, "primal_compile_s": primal_compile_s,
           "compiled_s": medians["compiled"][0],
           "compiled_over_primal": medians["compiled"][0] / base,
           "astad_compile_s": compile_s,
           "python_s": medians["python"][0],
           "python_over_primal": medians["python"][0] / base,
           "python_samples": medians["python"][1], "python_capped": bool(slow),
           "hand_s": medians["hand"][0], "hand_over_primal": medians["hand"][0] / base,
           "jax_s": medians["jax"][0] if "jax" in medians else None,
           "jax_over_primal": medians["jax"][0] / base if "jax" in medians else None,
           "jax_compile_s": jax_compile_s,
           "goal": GOALS.get(case["program"]),
           "kernel_answered": answered, "check_max_relative_error": check}
    return row


# ---------------------------------------------------------------------------------------

def _time(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def _seconds(seconds) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _ratio(r) -> str:
    return "-" if r is None else (f"{r:.1f}x" if r >= 10 else f"{r:.2f}x")


HEAD = ("| program | size | numba primal | astad compiled | / primal | astad compile | "
        "astad Python | / primal | JAX jit | / primal | JAX compile | hand adjoint | "
        "/ primal | goal |")


def _line(row) -> str:
    python = _time(row["python_s"]) + (f" ({row['python_samples']} calls)"
                                       if row["python_capped"] else "")
    goal = f"{row['goal']:.0f}x" if row["goal"] else "-"
    return (f"| {row['program']} | {row['size']} | {_time(row['primal_s'])} | "
            f"{_time(row['compiled_s'])} | {_ratio(row['compiled_over_primal'])} | "
            f"{_seconds(row['astad_compile_s'])} | {python} | {_ratio(row['python_over_primal'])} "
            f"| {_time(row['jax_s'])} | {_ratio(row['jax_over_primal'])} | "
            f"{_seconds(row['jax_compile_s'])} | "
            f"{_time(row['hand_s'])} | {_ratio(row['hand_over_primal'])} | {goal} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes, 3 samples of about 5 ms: under a minute")
    ap.add_argument("--samples", type=int, default=None, help="15 (3 with --quick)")
    ap.add_argument("--target", type=float, default=None,
                    help="seconds per sample: 0.02 (0.005 with --quick)")
    ap.add_argument("--slow", type=float, default=1.0,
                    help="a variant whose call takes longer gets 3 samples of one call")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.samples is None:
        args.samples = 3 if args.quick else 15
    if args.target is None:
        args.target = 0.005 if args.quick else 0.02
    out = args.out or os.path.join(_HERE, "results",
                                   "compiled-quick.json" if args.quick else "compiled.json")
    start_load = os.getloadavg()[0]
    jax = load_jax()
    forms = jax_forms(jax.numpy, jax.lax) if jax is not None else None
    rows = []
    for case in cases(args.quick):
        rows.append(bench(case, jax, forms, args.samples, args.target, args.slow))
        print(_line(rows[-1]), file=sys.stderr)
    text = "\n".join([HEAD, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"] +
                     [_line(row) for row in rows])
    print(text)
    save_rows(out, rows, text, args, start_load)
    with open(out) as fh:  # (save_rows' JSON, with this benchmark's own fields)
        result = json.load(fh)
    result["mode"] = "quick" if args.quick else "full"
    result["versions"] = {"astad": getattr(astad, "__version__", None),
                          "numba": numba.__version__,
                          "jax": None if jax is None else jax.__version__}
    result["goals"] = {"compiled_over_primal": GOALS, "moonshot": MOONSHOT,
                       "met": {row["program"]: row["compiled_over_primal"] <= row["goal"]
                               for row in rows if row["goal"]}}
    result["settings"]["slow_s"] = args.slow
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
