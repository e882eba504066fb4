"""Derivatives that compose (issue 11): forward mode, Hessian-vector products, Jacobians
and Hessians, side by side with the peers in one run.

Run from the repository root:

    python benchmarks/derivatives.py               # full run with the peers
    python benchmarks/derivatives.py --quick       # smoke run: small sizes, few samples
    python benchmarks/derivatives.py --peers none  # astad only

1. On every scalar program of benchmarks/programs.py: ``astad.jvp`` (and ``f.jvp``) in
   one random direction against the primal (goal <= 3x) and against ``f.value_and_grad``;
   the Hessian-vector product ``astad.jvp(astad.grad(f, argnums), args, v)`` against the
   gradient (goal <= 4x). jvp is checked against the hand-written gradient times the
   direction, the HVP against central differences of the hand-written gradient.
2. Jacobian of a model with 30 parameters and 500 predictions (a sum of ten damped
   sinusoids, as fitted by Gauss-Newton; numpy, and plain Python lists): astad ``jacrev``,
   ``jacfwd``, ``jacobian`` and 500 pullbacks of one ``.vjp``, against jax.jacrev/jacfwd
   (eager, and under jit with the compile time apart), torch.func.jacrev/jacfwd and
   autograd.jacobian.
3. Hessian of the extended Rosenbrock function of 100 variables (numpy, and lists), by
   ``astad.hessian`` and the same peers' hessian.
Every astad result is checked first (hand-derived Jacobian and Hessian), every peer's
against astad's; a peer that disagrees is not timed. Each sample times every variant once
in turn (interleaved); tables give medians. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import math
import os
import pstats
import random
import sys
import time
import types

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_HERE, _ROOT):  # the astad of this checkout, then the benchmark helpers
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)

import astad  # noqa: E402
import programs  # noqa: E402
import run  # noqa: E402  (timing, environment, JSON: the conventions of run.py)
from run import BenchmarkError, fmt_time  # noqa: E402

GOALS = {"jvp_over_primal": 3.0, "hvp_over_grad": 4.0}
QUICK_MAX_WORK = 1000  # --quick: dot up to n=1000, sum_matvec up to 30x30


# ---------------------------------------------------------------------------------------
# The models (plain numpy / math code; a peer runs the same code with np or math rebound)

N_SINES = 10  # parameters: 10 amplitudes, 10 decay rates, 10 frequencies


def damped_sines(theta, t):
    """Predictions at times t of a sum of damped sinusoids a_k exp(-d_k t) sin(w_k t)."""
    a, d, w = theta[:10, None], theta[10:20, None], theta[20:, None]
    return np.sum(a * np.exp(-d * t[None, :]) * np.sin(w * t[None, :]), axis=0)


def damped_sines_list(theta, ts):
    out = []
    for t in ts:
        s = 0.0
        for k in range(10):
            s = s + theta[k] * math.exp(-theta[10 + k] * t) * math.sin(theta[20 + k] * t)
        out.append(s)
    return out


def damped_sines_jacobian(theta, t):
    """By hand: d/da_k = e sin, d/dd_k = -a t e sin, d/dw_k = a t e cos (e = exp(-d t))."""
    a, d, w = (np.asarray(theta)[k * N_SINES:(k + 1) * N_SINES, None] for k in range(3))
    t = np.asarray(t)[None, :]
    e, s, c = np.exp(-d * t), np.sin(w * t), np.cos(w * t)
    return np.concatenate([e * s, -a * t * e * s, a * t * e * c]).T


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_list(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosenbrock_hessian(x):
    """By hand: tridiagonal, d2/dx_i2 = 1200 x_i^2 - 400 x_{i+1} + 2 (+ 200 for i > 0),
    d2/dx_i dx_{i+1} = -400 x_i."""
    x = np.asarray(x)
    n = len(x)
    diag = np.zeros(n)
    diag[:-1] = 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    diag[1:] += 200.0
    off = -400.0 * x[:-1]
    return np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)


def rebind(fn, **names):
    """``fn`` with the same code, whose globals ``names`` (np, math) are the peer's."""
    g = dict(fn.__globals__)
    g.update(names)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


# ---------------------------------------------------------------------------------------
# Peers: the same model code on autograd.numpy, torch, jax.numpy


class Peer:
    """One peer key of run.py's --peers (autograd, torch, jax, jax_jit): the model's globals
    rebound to its library, and its Jacobian and Hessian transforms."""

    def __init__(self, key):
        self.key, self.error, self.lib = key, None, None
        try:
            self._import()
        except Exception as exc:  # ImportError, or a broken install
            self.error = f"not installed ({type(exc).__name__}: {exc})"

    def _import(self):
        key = self.key
        if key == "autograd":
            import autograd
            import autograd.numpy as anp
            self.lib, self.np, self.stack = autograd, anp, anp.stack
            self.convert = lambda x: x
            self.methods = {"jacobian": ("autograd.jacobian", autograd.jacobian, "jacrev"),
                            "hessian": ("autograd.hessian", autograd.hessian, "hessian")}
            self.version = _version("autograd")
        elif key == "torch":
            import torch
            import torch.func
            self.lib = torch
            self.np = types.SimpleNamespace(exp=torch.exp, sin=torch.sin,
                                            sum=lambda x, axis=None: torch.sum(x, dim=axis))
            self.stack = torch.stack
            self.convert = lambda x: torch.tensor(x, dtype=torch.float64)
            self.methods = {"jacrev": ("torch.func.jacrev", torch.func.jacrev, "jacrev"),
                            "jacfwd": ("torch.func.jacfwd", torch.func.jacfwd, "jacfwd"),
                            "hessian": ("torch.func.hessian", torch.func.hessian, "hessian")}
            self.version = torch.__version__
        else:
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            import jax
            import jax.numpy as jnp
            jax.config.update("jax_enable_x64", True)
            self.lib, self.np, self.stack, self.convert = jax, jnp, jnp.stack, jnp.asarray
            jit = jax.jit if key == "jax_jit" else (lambda f: f)
            word = "jit" if key == "jax_jit" else "eager"
            self.methods = {name: (f"jax.{name} ({word})", _composed(jit, transform), name)
                            for name, transform in (("jacrev", jax.jacrev),
                                                    ("jacfwd", jax.jacfwd),
                                                    ("hessian", jax.hessian))}
            self.version = f"jax {jax.__version__}, jaxlib {_version('jaxlib')}"
        self.compiles = key == "jax_jit"
        self.block = self.lib.block_until_ready if self.key.startswith("jax") else None

    def model(self, fn, is_list):
        """The model's code on this peer; a list result is stacked into an array."""
        if not is_list:
            return rebind(fn, np=self.np)
        peer_fn = rebind(fn, math=types.SimpleNamespace(exp=self.np.exp, sin=self.np.sin))
        stack = self.stack

        def stacked(*args):
            out = peer_fn(*args)
            return stack(out) if type(out) is list else out
        return stacked

    def call(self, transform, fn, args, constants):
        """A function of no arguments: the transform of fn at args (args converted to the
        peer's arrays inside the call, as a user would; the data in ``constants``
        converted once, before)."""
        derived, convert, block = transform(fn), self.convert, self.block
        asarray = np.asarray  # (a list argument becomes an array: the peers index it)
        if block is None:
            return lambda: derived(*[convert(asarray(a)) for a in args], *constants)
        return lambda: block(derived(*[convert(asarray(a)) for a in args], *constants))


def _composed(outer, inner):
    return lambda f: outer(inner(f))


def _version(dist):
    from importlib.metadata import version
    try:
        return version(dist)
    except Exception:
        return None


# ---------------------------------------------------------------------------------------
# Part 1: jvp and Hessian-vector products on the scalar programs


def random_like(x, rng):
    """A tangent shaped like x: random floats at its float leaves, None elsewhere."""
    if isinstance(x, float):
        return rng.uniform(-1.0, 1.0)
    if isinstance(x, (list, tuple)):
        return type(x)(random_like(i, rng) for i in x)
    if dataclasses.is_dataclass(x):
        return dataclasses.replace(x, **{f.name: random_like(getattr(x, f.name), rng)
                                         for f in dataclasses.fields(x)})
    return None


def _floats(x):
    return [v for _, v in run._leaves(x) if isinstance(v, float)]


def _shift(x, v, h):
    """x + h v on nested float structures."""
    return _rebuild(x, iter([a + h * b for a, b in zip(_floats(x), _floats(v))]))


def _rebuild(x, values):
    if isinstance(x, float):
        return next(values)
    if isinstance(x, (list, tuple)):
        return type(x)(_rebuild(i, values) for i in x)
    if dataclasses.is_dataclass(x):
        return dataclasses.replace(x, **{f.name: _rebuild(getattr(x, f.name), values)
                                         for f in dataclasses.fields(x)})
    return x


def _close(got, want, rtol, what, name):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    if got.shape != want.shape or not err <= rtol:
        raise BenchmarkError(f"{name}: {what} disagrees with the reference (shape "
                             f"{got.shape} vs {want.shape}, relative error {err:.3g})")
    return err


def check_program(case, ad, fun, argnums, tangents):
    """jvp and f.jvp against the hand-written gradient along the direction; the HVP against
    central differences of the hand-written gradient along it."""
    wrt, args, name = case.wrt, case.args, case.name
    hand = run._grads_tuple(case.hand_grad(*args), len(args))
    v = [tangents[k] for k in wrt]
    want = sum(g * t for k, vk in zip(wrt, v)
               for g, t in zip(_floats(hand[k]), _floats(vk)))
    scale = sum(abs(g * t) for k, vk in zip(wrt, v)
                for g, t in zip(_floats(hand[k]), _floats(vk)))
    primal = case.primal(*args)
    errors = {}
    for label, (value, tangent) in (("astad.jvp", astad.jvp(fun, args, tangents)),
                                    ("f.jvp", ad.jvp(args, tangents))):
        _close(value, primal, 1e-12, f"{label} value", name)
        errors[label] = _close(tangent / max(scale, 1e-300), want / max(scale, 1e-300),
                               1e-9, f"{label} tangent (vs hand-written gradient . v)", name)
    _, grads = ad.value_and_grad(*args)
    grads = run._grads_tuple(grads, len(args))
    errors["grad"] = max(_close(_floats(grads[k]), _floats(hand[k]), 1e-9,
                                "value_and_grad", name) for k in wrt)
    hvp = astad.jvp(astad.grad(fun, argnums=argnums), args, tangents)[1]
    hvp = hvp if isinstance(argnums, tuple) else (hvp,)
    h = 1e-5
    plus, minus = list(args), list(args)
    for k in wrt:
        plus[k], minus[k] = _shift(args[k], tangents[k], h), _shift(args[k], tangents[k], -h)
    gp = run._grads_tuple(case.hand_grad(*plus), len(args))
    gm = run._grads_tuple(case.hand_grad(*minus), len(args))
    fd = [(a - b) / (2 * h) for k in wrt for a, b in zip(_floats(gp[k]), _floats(gm[k]))]
    errors["hvp"] = _close([x for hk in hvp for x in _floats(hk)], fd, 1e-5,
                           "Hessian-vector product (vs central differences of the "
                           "hand-written gradient)", name)
    return errors


def bench_program(case, samples, target, limits):
    ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
    fun = ad if case.ad_is_decorated else case.ad
    rng = random.Random(2023)
    tangents = tuple(random_like(a, rng) if k in case.wrt else None
                     for k, a in enumerate(case.args))
    argnums = tuple(case.wrt) if len(case.wrt) > 1 else case.wrt[0]
    row = {"program": case.program, "size_label": case.size_label, "work": case.work,
           "hvp_argnums": list(case.wrt)}
    row["check"] = check_program(case, ad, fun, argnums, tangents)
    args = case.args
    hvp_fn = astad.grad(fun, argnums=argnums)
    variants = {"primal": (case.primal, args),
                "jvp": (astad.jvp, (fun, args, tangents)),
                "f_jvp": (ad.jvp, (args, tangents)),
                "grad": (ad.value_and_grad, args),
                "hvp": (astad.jvp, (hvp_fn, args, tangents))}
    t = time_variants(variants, samples, target, limits)
    for label in variants:
        row[f"{label}_s"] = t[label]["median"]
    row["jvp_over_primal"] = row["jvp_s"] / row["primal_s"]
    row["f_jvp_over_primal"] = row["f_jvp_s"] / row["primal_s"]
    row["jvp_over_grad"] = row["jvp_s"] / row["grad_s"]
    row["hvp_over_grad"] = row["hvp_s"] / row["grad_s"]
    row["hvp_over_primal"] = row["hvp_s"] / row["primal_s"]
    row["timings"] = t
    row["profile_targets"] = {"jvp": variants["jvp"], "hvp": variants["hvp"]}
    return row


def time_variants(variants, samples, target, limits):
    """Interleaved medians (run.time_interleaved_multi); a variant slower than ``slow`` per
    call gets at most 3 samples, one slower than ``max_call`` a single one."""
    spec = []
    for label, (fn, args) in variants.items():
        t0 = time.perf_counter()
        fn(*args)  # (warm: caches, transforms)
        per_call = time.perf_counter() - t0
        if per_call < limits["max_call"]:
            t0 = time.perf_counter()
            fn(*args)
            per_call = time.perf_counter() - t0
        ns = samples if per_call < limits["slow"] else (
            min(samples, 3) if per_call < limits["max_call"] else 1)
        spec.append((label, fn, args, ns, per_call))
    return run.time_interleaved_multi(spec, target)


# ---------------------------------------------------------------------------------------
# Parts 2 and 3: Jacobians and Hessians, astad against the peers


@dataclasses.dataclass
class Problem:
    name: str          # "jacobian" or "hessian"
    variant: str       # "numpy" or "lists"
    size_label: str
    fn: object
    args: tuple        # (differentiated argument, data...)
    reference: object  # the hand-derived matrix
    astad: dict        # label -> function of no arguments returning the matrix
    peer_methods: tuple  # which peer methods run ("jacrev", "jacfwd", "jacobian", ...)
    no_peers: str = ""   # why no peer runs it, when none does


LIST_JACOBIAN_NO_PEERS = (
    "the peers do not run the list version: every scalar operation is an operation on a "
    "0-d array for them (15,000 here); one-off, one call took 4.3 s (torch.func.jacrev), "
    "20 s (torch.func.jacfwd) and over 2 minutes (autograd, jax eager, jax jit's first "
    "call); see benchmarks/README.md")


def jacobian_problems(n_out, quick):
    rng = np.random.default_rng(11)
    theta = np.concatenate([rng.uniform(0.5, 1.5, N_SINES), rng.uniform(0.1, 1.0, N_SINES),
                            rng.uniform(1.0, 10.0, N_SINES)])
    t = np.linspace(0.0, 5.0, n_out)
    out = []
    for variant, fn, args in (("numpy", damped_sines, (theta, t)),
                              ("lists", damped_sines_list, (theta.tolist(), t.tolist()))):
        f = astad.reverse_diff(fn, argnums=0)
        basis = np.eye(n_out) if variant == "numpy" else np.eye(n_out).tolist()

        def pullbacks(f=f, args=args, basis=basis):
            _, pullback = f.vjp(*args)
            return [pullback(e) for e in basis]
        methods = {"jacrev": astad.jacrev(fn), "jacfwd": astad.jacfwd(fn),
                   "jacobian": astad.jacobian(fn)}
        calls = {f"astad.{k}": (lambda m=m, args=args: m(*args)) for k, m in methods.items()}
        calls[f"{n_out} pullbacks of one f.vjp"] = pullbacks
        out.append(Problem("jacobian", variant, f"30 -> {n_out}", fn, args,
                           damped_sines_jacobian(theta, t), calls,
                           ("jacrev", "jacfwd", "jacobian") if variant == "numpy" else (),
                           "" if variant == "numpy" else LIST_JACOBIAN_NO_PEERS))
    return out


def hessian_problems(n, quick):
    x = np.random.default_rng(12).uniform(-1.2, 1.2, n)
    out = []
    for variant, fn, arg in (("numpy", rosenbrock, x), ("lists", rosenbrock_list, x.tolist())):
        hess = astad.hessian(fn)
        out.append(Problem("hessian", variant, f"n={n}", fn, (arg,), rosenbrock_hessian(x),
                           {"astad.hessian": lambda h=hess, a=arg: h(a)}, ("hessian",)))
    return out


def bench_problem(problem, peers, samples, target, limits, notes):
    row = {"problem": problem.name, "variant": problem.variant,
           "size_label": problem.size_label, "methods": []}
    variants = {"primal": (problem.fn, problem.args)}
    for label, call in problem.astad.items():
        t0 = time.perf_counter()
        got = call()
        first = time.perf_counter() - t0
        err = _close(np.asarray(got, dtype=float), problem.reference, 1e-9,
                     label, f"{problem.name} ({problem.variant})")
        row["methods"].append({"tool": "astad", "method": label, "status": "ok",
                               "first_call_s": first, "check": "agrees with the hand-derived "
                               f"matrix (max relative error {err:.2g})"})
        variants[label] = (call, ())
    astad_matrix = np.asarray(got, dtype=float)
    if problem.no_peers and peers:
        row["methods"].append({"tool": "peers", "method": "-", "status": "not run",
                               "reason": problem.no_peers})
    for peer in peers:
        if peer.error:
            row["methods"].append({"tool": peer.key, "method": peer.key,
                                   "status": "not installed", "reason": peer.error})
            continue
        for key in problem.peer_methods:
            if key in peer.methods:
                entry = run_peer(problem, peer, key, astad_matrix, limits, notes)
                row["methods"].append(entry)
                if entry["status"] == "ok":
                    variants[entry["method"]] = (entry.pop("call"), ())
    t = time_variants(variants, samples, target, limits)
    row["primal_s"] = t["primal"]["median"]
    for entry in row["methods"]:
        if entry.get("status") != "ok":
            continue
        tm = t[entry["method"]]
        entry.update(median_s=tm["median"], over_primal=tm["median"] / row["primal_s"],
                     timings=tm)
    by_label = {e["method"]: e for e in row["methods"] if e["tool"] == "astad"}
    for entry in row["methods"]:
        match = by_label.get(entry.get("compare_with"))
        if entry.get("status") == "ok" and match:
            entry["astad_over_this"] = match["median_s"] / entry["median_s"]
    row["profile_targets"] = {label: variants[label] for label in problem.astad}
    return row


# ---------------------------------------------------------------------------------------
# Where the time goes (--profile)


def run_peer(problem, peer, key, astad_matrix, limits, notes):
    """Check the peer's matrix against astad's and time one call; the entry of the table,
    with the call to time under "call" if it is to be timed."""
    label, transform, match = peer.methods[key]
    entry = {"tool": peer.key, "method": label,
             "compare_with": next((k for k in problem.astad if k.endswith(match)), None)}
    data = [peer.convert(d) if isinstance(d, np.ndarray) else d for d in problem.args[1:]]
    call = peer.call(transform, peer.model(problem.fn, problem.variant == "lists"),
                     problem.args[:1], data)
    t0 = time.perf_counter()
    try:
        got = call()
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return {**entry, "status": "failed", "reason": f"raised {type(exc).__name__}: "
                f"{text[0][:200] if text else ''}"}
    entry["compile_s" if peer.compiles else "first_call_s"] = time.perf_counter() - t0
    got = np.asarray(got.detach() if hasattr(got, "detach") else got, dtype=float)
    scale = float(np.max(np.abs(astad_matrix)))
    if got.shape != astad_matrix.shape or not np.allclose(
            got, astad_matrix, rtol=1e-8, atol=1e-10 * scale):
        notes.append(f"PEER MISMATCH {problem.name} ({problem.variant}) {label}")
        print(notes[-1], file=sys.stderr)
        return {**entry, "status": "failed", "reason": "its result disagrees with astad's"}
    entry["check"] = "agrees with astad's (rtol 1e-8)"
    t0 = time.perf_counter()
    call()
    took = time.perf_counter() - t0
    if took > limits["max_call"]:
        return {**entry, "status": "skipped", "reason": f"too slow (> {limits['max_call']:g} "
                f"s per call): its second call took {took:.3g} s"}
    return {**entry, "status": "ok", "call": call}


def profile(fn, args, budget=0.5, top=8):
    """cProfile of calls of fn(*args) (for about ``budget`` seconds, at least one call): the
    functions with the most own time, as shares of the total."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    calls = 0
    while calls == 0 or time.perf_counter() - t0 < budget:
        prof.runcall(fn, *args)
        calls += 1
    stats = pstats.Stats(prof).stats
    total = sum(s[2] for s in stats.values()) or 1.0
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    files = {}
    for func, s in stats.items():
        where = _file(func[0])
        files[where] = files.get(where, 0.0) + s[2] / total
    return {"calls_profiled": calls, "functions": [
        {"function": _where(func), "own_share": s[2] / total, "cumulative_share": s[3] / total,
         "calls_per_call": s[1] / calls} for func, s in rows],
        "files": dict(sorted(files.items(), key=lambda kv: -kv[1])[:top])}


def _file(filename):
    """astad's files by their path in the package, rules compiled from astad's templates
    as <astad rule>, C functions as built-in, installed packages' files by their path in
    site-packages, any other file by its name."""
    astad_dir = os.path.dirname(os.path.abspath(astad.__file__))
    if filename.startswith(astad_dir):
        return "astad/" + os.path.relpath(filename, astad_dir)
    if filename == "~":
        return "built-in"
    if "site-packages" in filename:  # numpy/_core/shape_base.py, not shape_base.py
        return filename.split("site-packages" + os.sep, 1)[1]
    return filename if filename.startswith("<") else os.path.basename(filename)


def _where(func):
    filename, line, name = func
    if filename == "~":  # a C function: its name, without the address (new every run)
        return name.split(" at 0x")[0] + (">" if " at 0x" in name else "")
    if filename.startswith("<"):
        return f"{filename} {name}"
    return f"{_file(filename)}:{line} {name}"


def add_profiles(program_rows, problem_rows):
    """Profile, per program, the largest size under 1 s whose jvp or HVP misses its goal,
    and every astad Jacobian and Hessian method."""
    done = {}
    for row in program_rows:
        for what, ratio in (("jvp", "jvp_over_primal"), ("hvp", "hvp_over_grad")):
            key = (row["program"], what)
            if row[ratio] > GOALS[ratio] and row[f"{what}_s"] < 1.0:
                done[key] = row
    for (_, what), row in done.items():
        fn, args = row["profile_targets"][what]
        row.setdefault("profiles", {})[what] = profile(fn, args)
    for row in problem_rows:
        row["profiles"] = {label: profile(fn, args)
                           for label, (fn, args) in row["profile_targets"].items()}


# ---------------------------------------------------------------------------------------
# Reporting


def _x(r, goal=None):
    if r is None:
        return "-"
    mark = "" if goal is None else (" ✓" if r <= goal else " ✗")
    return f"{r:.1f}x{mark}" if r >= 10 else f"{r:.2f}x{mark}"


def programs_table(rows):
    lines = ["| program | size | primal | astad.jvp | f.jvp | grad | HVP | jvp / primal "
             "(<= 3x) | f.jvp / primal | jvp / grad | HVP / grad (<= 4x) | HVP argnums |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        lines.append(
            f"| {r['program']} | {r['size_label'] or '-'} | {fmt_time(r['primal_s'])} "
            f"| {fmt_time(r['jvp_s'])} | {fmt_time(r['f_jvp_s'])} | {fmt_time(r['grad_s'])} "
            f"| {fmt_time(r['hvp_s'])} | {_x(r['jvp_over_primal'], 3.0)} "
            f"| {_x(r['f_jvp_over_primal'])} | {_x(r['jvp_over_grad'])} "
            f"| {_x(r['hvp_over_grad'], 4.0)} | {r['hvp_argnums']} |")
    return "\n".join(lines)


def problems_table(rows, notes):
    lines = ["| problem | variant | tool | method | median | / primal | compile (first call) "
             "| astad / this |", "|---|---|---|---|--:|--:|--:|--:|"]
    for r in rows:
        head = f"| {r['problem']} {r['size_label']} | {r['variant']} "
        lines.append(head + f"| - | primal | {fmt_time(r['primal_s'])} | 1 | | |")
        for e in r["methods"]:
            if e["status"] != "ok":
                notes.append(f"{r['problem']} ({r['variant']}) {e['method']}: {e['reason']}")
                lines.append(head + f"| {e['tool']} | {e['method']} | {e['status']} "
                             f"[{len(notes)}] | | | |")
                continue
            ratio = e.get("astad_over_this")
            cell = "-" if ratio is None else (f"{ratio:.3g} ({1 / ratio:.1f}x faster)"
                                              if ratio <= 1 else f"{ratio:.3g} ({ratio:.1f}x "
                                              "slower)")
            lines.append(head + f"| {e['tool']} | {e['method']} | {fmt_time(e['median_s'])} "
                         f"| {_x(e['over_primal'])} | {fmt_time(e.get('compile_s'))} "
                         f"| {cell} |")
    return "\n".join(lines)


def profiles_text(program_rows, problem_rows):
    lines = []
    for r in program_rows:
        for what, p in r.get("profiles", {}).items():
            lines.append(f"- {r['program']} [{r['size_label'] or '-'}] {what}: " + _top(p))
    for r in problem_rows:
        for label, p in r.get("profiles", {}).items():
            lines.append(f"- {r['problem']} ({r['variant']}) {label}: " + _top(p))
    return "\n".join(lines)


def _top(p, k=5):
    return ("; ".join(f"{f['function']} {f['own_share']:.0%}" for f in p["functions"][:k])
            + " (by file: " + ", ".join(f"{name} {share:.0%}" for name, share in
                                       list(p["files"].items())[:4]) + ")")


def goals_summary(rows):
    out = []
    for ratio, what in (("jvp_over_primal", "jvp / primal"), ("hvp_over_grad", "HVP / grad")):
        met = [r for r in rows if r[ratio] <= GOALS[ratio]]
        worst = max(rows, key=lambda r: r[ratio])
        out.append(f"{what} <= {GOALS[ratio]:g}x: met on {len(met)} of {len(rows)} rows "
                   f"(median {np.median([r[ratio] for r in rows]):.2f}x, worst "
                   f"{worst[ratio]:.1f}x on {worst['program']} {worst['size_label']})")
    return out


# ---------------------------------------------------------------------------------------
# Main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes (programs "
                    "up to work 1000, 50 outputs, Rosenbrock n=20), 3 short samples")
    ap.add_argument("--peers", default="all", help="all (default), none, or a comma-"
                    "separated list of autograd, torch, jax, jax_jit")
    ap.add_argument("--parts", default="programs,jacobian,hessian",
                    help="which parts to run (default: all three)")
    ap.add_argument("--only", action="append", metavar="PROGRAM",
                    help="only the scalar programs whose name contains this (repeatable)")
    ap.add_argument("--samples", type=int, help="samples per measurement (5; 3 with --quick)")
    ap.add_argument("--target", type=float, help="seconds per sample (0.02; 0.002 --quick)")
    ap.add_argument("--max-call", type=float, help="a peer slower than this per call is "
                    "skipped; astad then gets one sample (10 s; 0.5 s with --quick)")
    ap.add_argument("--profile", action="store_true", help="cProfile every missed goal and "
                    "every astad Jacobian / Hessian method (shares of own time)")
    ap.add_argument("--out", help="JSON path (default benchmarks/results/derivatives.json, "
                    "derivatives-quick.json with --quick); the table goes beside it as .md")
    args = ap.parse_args(argv)
    quick = args.quick
    samples = args.samples or (3 if quick else 5)
    target = args.target or (0.002 if quick else 0.02)
    limits = {"slow": 0.2, "max_call": args.max_call or (0.5 if quick else 10.0)}
    parts = {p.strip() for p in args.parts.split(",")}
    out = args.out or os.path.join(_HERE, "results", "derivatives-quick.json" if quick
                                   else "derivatives.json")
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    peers = [Peer(key) for key in run.parse_peers(args.peers)]
    for p in peers:
        print(f"  peer {p.key:<9} {p.error or p.version}", flush=True)
    if any(not p.error for p in peers):
        run.freeze_imported_objects()

    t_start = time.perf_counter()
    notes, program_rows, problem_rows = [], [], []
    try:
        if "programs" in parts:
            cases = programs.make_cases(quick=quick)
            if quick:
                cases = [c for c in cases if c.work is None or c.work <= QUICK_MAX_WORK]
            if args.only:
                cases = [c for c in cases if any(s in c.program for s in args.only)]
            for case in cases:
                row = bench_program(case, samples, target, limits)
                program_rows.append(row)
                print(f"  {case.name:<30} jvp/primal {row['jvp_over_primal']:6.2f}x  "
                      f"HVP/grad {row['hvp_over_grad']:6.2f}x  "
                      f"({time.perf_counter() - t_start:.0f} s)", flush=True)
        problems = []
        if "jacobian" in parts:
            problems += jacobian_problems(50 if quick else 500, quick)
        if "hessian" in parts:
            problems += hessian_problems(20 if quick else 100, quick)
        for problem in problems:
            problem_rows.append(bench_problem(problem, peers, samples, target, limits, notes))
            print(f"  {problem.name} ({problem.variant}) done "
                  f"({time.perf_counter() - t_start:.0f} s)", flush=True)
    except BenchmarkError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 1
    if args.profile:
        add_profiles(program_rows, problem_rows)
    for row in program_rows + problem_rows:
        row.pop("profile_targets", None)

    table_notes = []
    text = ["# Derivatives that compose: astad and its peers", ""]
    if program_rows:
        text += ["## jvp and Hessian-vector products on the scalar programs", "",
                 programs_table(program_rows), ""] + [f"- {s}" for s in
                                                     goals_summary(program_rows)] + [""]
    if problem_rows:
        text += ["## Jacobians (damped sinusoids, 30 parameters) and Hessians (extended "
                 "Rosenbrock)", "",
                 problems_table(problem_rows, table_notes), ""]
        text += [f"[{k}] {n}" for k, n in enumerate(table_notes, 1)] + [""]
    if args.profile:
        text += ["## Where the time goes (cProfile, share of own time)", "",
                 profiles_text(program_rows, problem_rows), ""]
    env = run.environment()
    env.update(numpy_version=np.__version__, load_average=list(os.getloadavg()))
    text += [f"{env['date']}, Python {sys.version.split()[0]}, {env['platform']}, "
             f"{env['cpu_count']} CPUs, load average {env['load_average'][0]:.1f}; "
             f"astad {env.get('git_commit') or '?'}; medians of {samples} interleaved samples"]
    print("\n" + "\n".join(text))
    result = {
        "benchmark": "derivatives that compose (issue 11): jvp, HVP, Jacobians, Hessians",
        "mode": "quick" if quick else "full", "environment": env,
        "settings": {"samples": samples, "target_sample_seconds": target, **limits,
                     "statistic": "median", "interleaved": True, "goals": GOALS},
        "peers": {p.key: ({"available": False, "reason": p.error} if p.error else
                          {"available": True, "version": p.version}) for p in peers},
        "total_seconds": time.perf_counter() - t_start,
        "programs": program_rows, "goals": goals_summary(program_rows) if program_rows
        else [], "problems": problem_rows, "notes": table_notes + notes,
    }
    run.write_json(result, out)
    with open(os.path.splitext(out)[0] + ".md", "w") as fh:
        fh.write("\n".join(text) + "\n")
    print(f"\nJSON written to {os.path.relpath(out)} (table: .md beside it)")
    return 1 if any("PEER MISMATCH" in n for n in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
