"""NumPy arrays: gradient time over primal time, and the per-operation overhead.

Run from the repository root:

    python benchmarks/arrays.py            # a few minutes (measured twice, see below)
    python benchmarks/arrays.py --quick    # smaller sizes, fewer samples
    python benchmarks/arrays.py --peers none --only rnn   # astad only, some programs

Programs (plain numpy functions, differentiated by astad with respect to their float
arguments):

- ``elementwise``: element-wise functions and reductions on vectors of n = 10^5 and
  10^6 elements (tanh, exp, sqrt, products, sum, mean, max);
- ``sin_dot``: ``sum(sin(x) * y)``, the smallest such program;
- ``logsumexp``: ``logsumexp(W @ x + b)`` written from max, exp, sum and log, W of
  10^3 x 10^3 (10^6 elements);
- ``mlp``: the mean squared error of a 3-layer perceptron (tanh, tanh, linear) on a
  batch of 1000 points of 100 features, hidden width 256 (gradient w.r.t. the weights);
- ``gmm``: the Gaussian mixture log-likelihood objective of ADBench (with its Wishart
  prior), vectorised, at n = 1000 points, small (d = 2, K = 5) and medium (d = 10,
  K = 25) sizes (gradient w.r.t. alphas, means and icf);
- ``rnn``: an Elman RNN written with writes into an array of states,
  ``h[t + 1] = np.tanh(W @ h[t] + U @ x[t] + b)``, T = 50, H = 32, input 8; loss the
  squared error of a linear readout (gradient w.r.t. W, U, b and the readout);
- ``heat``: the explicit heat equation updated in place,
  ``u[1:-1] += c * (u[2:] - 2 * u[1:-1] + u[:-2])``, 200 points, 1000 steps; loss a
  weighted sum of the final state (gradient w.r.t. the initial state and c);
- ``per-op``: a chain of 150 element-wise operations on arrays of 3 elements: the time
  per array operation of a gradient call, against numpy's own time per operation and
  the peers' time per operation on the same code.

The peers, where installed: autograd (the same code with ``np`` bound to autograd.numpy)
and PyTorch eager (the same code with ``np`` bound to torch functions under numpy's
names). Neither can run ``rnn`` as written, nor autograd ``heat``: they run their
idiomatic forms (PEER_FORMS), and the table says which.

Every gradient is checked against central finite differences (a few sampled entries of
every argument), and every peer's value and gradient against astad's, before it is
timed. Each sample times the primal, astad's gradient and the peers' gradients once in
turn (interleaved, so drifts of the shared machine hit all alike); the table gives
medians. BLAS and torch run single-threaded (set before numpy loads) so that primal and
gradients use the same resources.

A gradient call keeps every intermediate array alive until its backward pass, where the
primal frees each one at once and numpy reuses the memory. With glibc's default
settings the tape's memory goes back to the operating system after every call and is
faulted in again (zeroed pages) on the next one; on large arrays that costs as much as
the arithmetic. So the whole measurement is repeated in a subprocess whose allocator
keeps freed memory (``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``, glibc's
own environment settings, which a user can set the same way): the "kept memory"
columns. It prints a markdown table and writes benchmarks/results/arrays.json and
arrays.md (arrays-quick.* with --quick).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_ROOT, _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import astad  # noqa: E402
import run  # noqa: E402  (environment() and write_json())


# ---------------------------------------------------------------------------------------
# Programs: plain numpy code (the global ``np`` is rebound to autograd.numpy for autograd)

def elementwise(x, y):
    a = np.tanh(x) * y + np.exp(-x * x)
    return np.sum(a) + np.mean(np.sqrt(x * x + 1.0)) + np.max(a * 0.5)


def sin_dot(x, y):
    return np.sum(np.sin(x) * y)


def logsumexp(W, x, b):
    z = W @ x + b
    m = np.max(z)
    return np.log(np.sum(np.exp(z - m))) + m


def mlp(W1, b1, W2, b2, W3, b3, X, y):
    h = np.tanh(X @ W1 + b1)
    h = np.tanh(h @ W2 + b2)
    out = h @ W3 + b3
    return np.mean((out[:, 0] - y) ** 2)


def gmm(alphas, means, icf, x, wishart_gamma, wishart_m, ltri):
    """ADBench's GMM objective. icf holds per component the d log-diagonal entries of the
    inverse-covariance factor Q, then its strictly lower part column by column; ``ltri``
    (d, d) picks them (0: the zero padded in front)."""
    n, d = x.shape
    k = alphas.shape[0]
    log_diag = icf[:, :d]
    q_diag = np.exp(log_diag)
    sum_qs = np.sum(log_diag, axis=1)
    lower = np.concatenate([np.zeros((k, 1)), icf[:, d:]], axis=1)[:, ltri]   # (k, d, d)
    xc = x[:, None, :] - means[None, :, :]                                     # (n, k, d)
    lx = q_diag[None, :, :] * xc + np.einsum("kij,nkj->nki", lower, xc)
    inner = alphas[None, :] + sum_qs[None, :] - 0.5 * np.sum(lx * lx, axis=2)  # (n, k)
    m = np.max(inner, axis=1, keepdims=True)
    slse = np.sum(np.log(np.sum(np.exp(inner - m), axis=1)) + m[:, 0])
    am = np.max(alphas)
    lse_alphas = np.log(np.sum(np.exp(alphas - am))) + am
    nu = d + wishart_m + 1
    frobenius = np.sum(q_diag * q_diag) + np.sum(icf[:, d:] * icf[:, d:])
    prior = 0.5 * wishart_gamma * wishart_gamma * frobenius - wishart_m * np.sum(sum_qs)
    log_gamma = 0.25 * d * (d - 1) * math.log(math.pi) + sum(
        [math.lgamma(0.5 * nu + 0.5 * (1 - j)) for j in range(1, d + 1)])
    c = nu * d * (math.log(wishart_gamma) - 0.5 * math.log(2.0)) - log_gamma
    return -n * d * 0.5 * math.log(2.0 * math.pi) + slse - n * lse_alphas + prior - k * c


def rnn(W, U, b, v, x, y):
    """An Elman RNN over T steps, written the way imperative numpy is: the hidden states
    are rows of one array, each step writes the next row. Loss: squared error of a
    linear readout of every state."""
    T = x.shape[0]
    h = np.zeros((T + 1, b.shape[0]))
    for t in range(T):
        h[t + 1] = np.tanh(W @ h[t] + U @ x[t] + b)
    return np.sum((h[1:] @ v - y) ** 2)


def heat(u0, c, w, steps):
    """Explicit finite differences for the heat equation u_t = u_xx on a 1-d grid with
    fixed ends, updated in place; loss: a weighted sum of the final state."""
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] += c * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(w * u)


# autograd cannot differentiate writes into arrays; these are the same computations the
# way one writes them for it (a list of states stacked at the end; a new array per step)

def rnn_functional(W, U, b, v, x, y):
    hs = [np.zeros(b.shape[0])]
    for t in range(x.shape[0]):
        hs.append(np.tanh(W @ hs[-1] + U @ x[t] + b))
    return np.sum((np.stack(hs[1:]) @ v - y) ** 2)


def heat_functional(u0, c, w, steps):
    u = u0
    for _ in range(steps):
        u = np.concatenate([u[:1], u[1:-1] + c * (u[2:] - 2 * u[1:-1] + u[:-2]), u[-1:]])
    return np.sum(w * u)


def torch_programs(torch):
    """PyTorch eager versions of rnn and heat. heat is the same code, in place on a
    tensor (torch records writes into a view: CopySlices). rnn keeps a list of states:
    writing h[t + 1] in place would modify h[t], which the matmul saved for backward,
    and torch's backward then refuses ("modified by an inplace operation")."""
    def rnn_torch(W, U, b, v, x, y):
        hs = [torch.zeros(b.shape[0], dtype=torch.float64)]
        for t in range(x.shape[0]):
            hs.append(torch.tanh(W @ hs[-1] + U @ x[t] + b))
        return torch.sum((torch.stack(hs[1:]) @ v - y) ** 2)

    def heat_torch(u0, c, w, steps):
        u = u0.clone()
        for _ in range(steps):
            u[1:-1] += c * (u[2:] - 2 * u[1:-1] + u[:-2])
        return torch.sum(w * u)

    return {"rnn": rnn_torch, "heat": heat_torch}


# how each peer runs a program that is not the same code
PEER_FORMS = {
    "rnn": {"autograd": "list of states + np.stack (rnn_functional)",
            "torch": "list of states + torch.stack (writing h[t + 1] in place fails: "
                     "h[t] was saved for backward)"},
    "heat": {"autograd": "a new array per step with np.concatenate (heat_functional)",
             "torch": "the same code, in place on a tensor (u = u0.clone(); "
                      "u[1:-1] += ...)"},
}
FUNCTIONAL = {"rnn": rnn_functional, "heat": heat_functional}


def chain(x):
    for _ in range(50):
        x = np.sin(x) * 0.5 + x
    return np.sum(x)


CHAIN_OPS = 50 * 3 + 1


# ---------------------------------------------------------------------------------------
# Cases: (name, size label, function, arguments, indices of differentiated arguments)

def _ltri(d):
    index = np.zeros((d, d), dtype=int)
    pos = 1
    for col in range(d):
        for row in range(col + 1, d):
            index[row, col] = pos
            pos += 1
    return index


def cases(quick):
    rng = np.random.default_rng(20240601)
    out = []
    for n in ((10**5,) if quick else (10**5, 10**6)):
        x, y = rng.normal(size=n), rng.normal(size=n)
        label = f"n=10^{round(math.log10(n))}"
        out.append(("elementwise", label, elementwise, (x, y), (0, 1)))
        out.append(("sin_dot", label, sin_dot, (x, y), (0, 1)))
    m = 300 if quick else 1000
    out.append(("logsumexp", f"W {m}x{m}", logsumexp,
                (rng.normal(size=(m, m)) / math.sqrt(m), rng.normal(size=m),
                 rng.normal(size=m)), (0, 1, 2)))
    batch, features, width = (200, 50, 64) if quick else (1000, 100, 256)
    params = []
    for a, b in ((features, width), (width, width), (width, 1)):
        params += [rng.normal(size=(a, b)) / math.sqrt(a), rng.normal(size=b) * 0.1]
    out.append(("mlp", f"{batch}x{features}, width {width}", mlp,
                (*params, rng.normal(size=(batch, features)), rng.normal(size=batch)),
                tuple(range(6))))
    for size, (n, d, k) in (("small", (1000, 2, 5)), ("medium", (1000, 10, 25))):
        if quick:
            n = 200
        icf = rng.normal(size=(k, d * (d + 1) // 2)) * 0.5
        out.append(("gmm", f"{size}: n={n} d={d} K={k}", gmm,
                    (rng.normal(size=k), rng.uniform(size=(k, d)), icf,
                     rng.normal(size=(n, d)), 1.0, 0, _ltri(d)), (0, 1, 2)))
    T, H, inputs = (20, 16, 4) if quick else (50, 32, 8)
    out.append(("rnn", f"T={T}, H={H}, input {inputs}", rnn,
                (rng.normal(size=(H, H)) / math.sqrt(H), rng.normal(size=(H, inputs))
                 / math.sqrt(inputs), rng.normal(size=H) * 0.1,
                 rng.normal(size=H) / math.sqrt(H), rng.normal(size=(T, inputs)),
                 rng.normal(size=T)), (0, 1, 2, 3)))
    n, steps = (50, 100) if quick else (200, 1000)
    grid = np.linspace(0.0, 1.0, n)
    # c = dt/dx^2 = 0.2 (stable below 0.5); w picks a window of the final state
    out.append(("heat", f"n={n}, {steps} steps", heat,
                (np.sin(math.pi * grid) + 0.3 * rng.normal(size=n), 0.2,
                 np.exp(-((grid - 0.3) / 0.1) ** 2), steps), (0, 1)))
    return out


# ---------------------------------------------------------------------------------------
# Gradient check, peers, timing

def fd_check(fn, args, wrt, grads, samples=4, rel_step=1e-6):
    """Central differences at a few sampled entries of each differentiated argument."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for k, g in zip(wrt, grads):
        a = np.asarray(args[k], dtype=float)
        g = np.asarray(g)
        for flat in rng.choice(a.size, size=min(samples, a.size), replace=False):
            idx = np.unravel_index(flat, a.shape)
            h = rel_step * max(1.0, abs(float(a[idx])))
            plus, minus = a.copy(), a.copy()
            plus[idx] += h
            minus[idx] -= h
            if not isinstance(args[k], np.ndarray):   # a float argument stays a float
                plus, minus = float(plus), float(minus)
            new = list(args)
            new[k] = plus
            f_plus = float(fn(*new))
            new[k] = minus
            f_minus = float(fn(*new))
            fd = (f_plus - f_minus) / (2 * h)
            scale = max(1.0, abs(fd), abs(float(fn(*args))) * 1e-6 / h)
            err = abs(float(g[idx]) - fd) / scale
            worst = max(worst, err)
            if err > 1e-4:
                raise AssertionError(f"{fn.__name__}: gradient of argument {k} at {idx}: "
                                     f"astad {float(g[idx])!r}, finite differences {fd!r}")
    return worst


PEER_KEYS = ("autograd", "torch")


def load_peers(keys):
    """{key: module} for the peers in ``keys`` that import; {key: None} for the others."""
    peers = {}
    for key in keys:
        try:
            if key == "autograd":
                import autograd
                import autograd.numpy  # noqa: F401
                peers[key] = autograd
            else:
                import torch
                torch.set_num_threads(1)   # as BLAS: primal and gradients on one core
                peers[key] = torch
        except ImportError:
            peers[key] = None
    return peers


def rebind_np(fn, namespace):
    """The same code with its global ``np`` bound to ``namespace``."""
    g = dict(fn.__globals__)
    g["np"] = namespace
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


def autograd_version(autograd, name, fn, wrt):
    """(grad, value_and_grad) of autograd on the same code (global ``np`` bound to
    autograd.numpy), or on the program's functional form if it writes into arrays."""
    peer = rebind_np(FUNCTIONAL.get(name, fn), autograd.numpy)
    argnum = wrt if len(wrt) > 1 else wrt[0]
    return autograd.grad(peer, argnum), autograd.value_and_grad(peer, argnum)


def torch_namespace(torch):
    """The numpy functions the programs call, as torch functions (numpy's names and
    keywords), so that the same code runs on tensors."""
    def reduce(full, dim_fn):
        def f(a, axis=None, keepdims=False):
            return full(a) if axis is None else dim_fn(a, dim=axis, keepdim=keepdims)
        return f
    return types.SimpleNamespace(
        sum=reduce(torch.sum, torch.sum), mean=reduce(torch.mean, torch.mean),
        max=reduce(torch.max, torch.amax), tanh=torch.tanh, exp=torch.exp,
        sqrt=torch.sqrt, sin=torch.sin, log=torch.log, einsum=torch.einsum,
        concatenate=lambda xs, axis=0: torch.cat(xs, dim=axis),
        zeros=lambda shape: torch.zeros(shape, dtype=torch.float64))


def torch_version(torch, name, fn, wrt):
    """(grad, value_and_grad) of PyTorch eager: numpy arguments become tensors sharing
    their memory (torch.from_numpy), differentiated ones float64 leaves, inside the call;
    then the program, .backward(), and the leaves' gradients as numpy arrays / floats."""
    peer = torch_programs(torch).get(name) or rebind_np(fn, torch_namespace(torch))
    wrt = tuple(wrt)

    def run(args, with_value):
        targs, leaves = [], []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                a = torch.from_numpy(a)
                if i in wrt:
                    a.requires_grad_()
                    leaves.append(a)
            elif i in wrt:
                a = torch.tensor(a, dtype=torch.float64, requires_grad=True)
                leaves.append(a)
            targs.append(a)
        loss = peer(*targs)
        loss.backward()
        grads = tuple(t.grad.numpy() if t.dim() else float(t.grad) for t in leaves)
        grads = grads if len(grads) > 1 else grads[0]
        return (float(loss.detach()), grads) if with_value else grads

    return (lambda *args: run(args, False)), (lambda *args: run(args, True))


def check_peer(label, name, value, grads, peer_value, peer_grads):
    """A peer's value and gradient must agree with astad's before it is timed."""
    peer_grads = peer_grads if isinstance(peer_grads, tuple) else (peer_grads,)
    np.testing.assert_allclose(float(peer_value), value, rtol=1e-9,
                               err_msg=f"{name}: {label}'s value")
    for k, (a, b) in enumerate(zip(grads, peer_grads)):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-9 * max(1.0, np.max(np.abs(a))),
                                   err_msg=f"{name}: {label}'s gradient {k}")


def _runner(fn, args):
    def go(number):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        return (time.perf_counter() - t0) / number
    return go


def time_interleaved(variants, samples, target):
    """{label: median seconds per call}; each sample runs every variant once in turn."""
    runners = {}
    for label, fn, args in variants:
        go = _runner(fn, args)
        go(1)  # warm-up
        per_call = go(1)
        runners[label] = (go, max(1, round(target / max(per_call, 1e-9))))
    times = {label: [] for label in runners}
    for _ in range(samples):
        for label, (go, number) in runners.items():
            times[label].append(go(number))
    return {label: statistics.median(ts) for label, ts in times.items()}


def bench(name, label, fn, args, wrt, samples, target, peers, per_op=None):
    f = astad.reverse_diff(fn, argnums=wrt)
    grads = f.grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    worst = fd_check(fn, args, wrt, grads)
    value = float(fn(*args))
    variants = [("primal", fn, args), ("astad", f.grad, args)]
    if name in FUNCTIONAL:   # the peers' form of the program, on plain numpy
        functional = FUNCTIONAL[name]
        np.testing.assert_allclose(functional(*args), value, rtol=1e-12)
        variants.append(("functional_primal", functional, args))
    for key, module in peers.items():
        if module is None:
            continue
        make = autograd_version if key == "autograd" else torch_version
        timed, checked = make(module, name, fn, wrt)
        check_peer(key, name, value, grads, *checked(*args))
        variants.append((key, timed, args))
    t = time_interleaved(variants, samples, target)
    row = {"program": name, "size": label, "primal_s": t["primal"], "astad_s": t["astad"],
           "grad_over_primal": t["astad"] / t["primal"]}
    for key in PEER_KEYS:
        row[f"{key}_s"] = t.get(key)
        row[f"{key}_over_primal"] = t[key] / t["primal"] if key in t else None
    if name in FUNCTIONAL:
        row["functional_primal_s"] = t["functional_primal"]
        row["peer_forms"] = PEER_FORMS[name]
    row.update({"fd_max_relative_error": worst, "samples": samples})
    if per_op:
        row["ops"] = per_op
        for key in ("primal", "astad") + PEER_KEYS:
            row[f"{key}_us_per_op"] = t[key] / per_op * 1e6 if key in t else None
    return row


# ---------------------------------------------------------------------------------------
# Reporting

def _ms(s):
    return "not installed" if s is None else (f"{s * 1e3:.2f} ms" if s >= 1e-4 else
                                              f"{s * 1e6:.1f} µs")


def _x(r):
    return "-" if r is None else f"{r:.2f}x"


def _peer_x(r, key):
    return _x(r.get(f"{key}_over_primal")) if r.get(f"{key}_s") else "not installed"


def table(rows):
    lines = ["| program | size | primal | astad grad | grad / primal | autograd / primal "
             "| torch / primal | grad / primal, kept memory | autograd / primal, kept memory "
             "| torch / primal, kept memory |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        kept = r.get("kept_memory") or {}
        lines.append(f"| {r['program']} | {r['size']} | {_ms(r['primal_s'])} "
                     f"| {_ms(r['astad_s'])} | {_x(r['grad_over_primal'])} "
                     f"| {_peer_x(r, 'autograd')} | {_peer_x(r, 'torch')} "
                     f"| {_x(kept.get('grad_over_primal'))} "
                     f"| {_peer_x(kept, 'autograd')} | {_peer_x(kept, 'torch')} |")
    forms = [r for r in rows if r.get("peer_forms")]
    if forms:
        lines += ["", "Programs that write into arrays: astad differentiates the code as "
                  "written; the peers run their own form of it (checked to give the same "
                  "value and gradient). The primal is the imperative numpy code; the peers' "
                  "form on plain numpy takes:", ""]
        for r in forms:
            lines.append(f"- {r['program']} ({r['size']}): "
                         f"{_ms(r['functional_primal_s'])} "
                         f"({r['functional_primal_s'] / r['primal_s']:.2f}x the primal); "
                         f"autograd: {r['peer_forms']['autograd']}; "
                         f"torch: {r['peer_forms']['torch']}")

    def us(v):
        return "not installed" if v is None else f"{v:.2f} µs"
    for r in rows:
        if r.get("ops"):
            lines += ["", "| per array operation (3 elements) | numpy | astad grad | autograd "
                      "grad | torch grad |", "|---|--:|--:|--:|--:|",
                      f"| {r['ops']} ops | {us(r['primal_us_per_op'])} "
                      f"| {us(r['astad_us_per_op'])} | {us(r['autograd_us_per_op'])} "
                      f"| {us(r['torch_us_per_op'])} |"]
    return "\n".join(lines)


KEPT_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
                   "MALLOC_TRIM_THRESHOLD_": str(2**30)}


def kept_memory_rows(quick, peers, only):
    """The same measurements in a subprocess whose allocator keeps freed memory (with the
    peers the parent has)."""
    print("  (again, with an allocator that keeps freed memory)", flush=True)
    present = ",".join(k for k, m in peers.items() if m is not None) or "none"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--kept-memory-child",
                        "--out", path, "--peers", present]
                       + [f"--only={o}" for o in only] + (["--quick"] if quick else []),
                       env={**os.environ, **KEPT_MEMORY_ENV}, check=True)
        with open(path) as fh:
            return json.load(fh)["rows"]


def parse_peers(spec):
    spec = spec.strip().lower()
    if spec in ("none", ""):
        return []
    keys = list(PEER_KEYS) if spec == "all" else [k.strip() for k in spec.split(",")]
    unknown = [k for k in keys if k not in PEER_KEYS]
    if unknown:
        raise SystemExit(f"error: unknown peer(s) {unknown}; known: {', '.join(PEER_KEYS)}")
    return keys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer samples")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/"
                    "arrays.json, arrays-quick.json with --quick); the table goes next to "
                    "it with the suffix .md")
    ap.add_argument("--peers", default="all", help="all (default), none, or a "
                    "comma-separated list of autograd, torch")
    ap.add_argument("--only", action="append", default=[], help="run only the programs "
                    "whose name contains this (repeatable); per-op is 'per-op'")
    ap.add_argument("--kept-memory-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    samples, target = (3, 0.03) if args.quick else (11, 0.1)
    out = args.out or os.path.join(_HERE, "results",
                                   "arrays-quick.json" if args.quick else "arrays.json")
    load_at_start = os.getloadavg()   # a shared machine: how busy it was, with the figures
    peers = load_peers(parse_peers(args.peers))
    if any(peers.values()):
        # the peers' modules (torch: ~10^5 objects) to the permanent generation, so
        # that collections triggered while a tape is built do not walk them (run.py)
        gc.collect()
        gc.freeze()

    def wanted(name):
        return not args.only or any(o in name for o in args.only)
    t0 = time.perf_counter()
    rows = []
    for name, label, fn, fn_args, wrt in cases(args.quick):
        if not wanted(name):
            continue
        rows.append(bench(name, label, fn, fn_args, wrt, samples, target, peers))
        r = rows[-1]
        print(f"  {name:<12} {label:<28} grad/primal {r['grad_over_primal']:.2f}x", flush=True)
    if wanted("per-op"):
        x = np.random.default_rng(3).normal(size=3)
        rows.append(bench("per-op", "3 elements", chain, (x,), (0,), samples, target, peers,
                          per_op=CHAIN_OPS))
    if args.kept_memory_child:
        run.write_json({"rows": rows}, out)
        return 0
    for r, k in zip(rows, kept_memory_rows(args.quick, peers, args.only), strict=True):
        assert (r["program"], r["size"]) == (k["program"], k["size"])
        r["kept_memory"] = {key: k[key] for key in ("primal_s", "astad_s", "autograd_s",
                                                    "torch_s", "grad_over_primal",
                                                    "autograd_over_primal",
                                                    "torch_over_primal")}
    text = table(rows)
    print()
    print(text)
    total = time.perf_counter() - t0
    versions = {key: (importlib.metadata.version(key) if m is not None
                      else "not installed") for key, m in peers.items()}
    run.write_json({
        "benchmark": "astad on numpy arrays: gradient time / primal time, per-op overhead",
        "mode": "quick" if args.quick else "full",
        "environment": {**run.environment(), "numpy_version": np.__version__,
                        "autograd_version": versions.get("autograd", "not run"),
                        "torch_version": versions.get("torch", "not run"),
                        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                        "torch_threads": 1 if peers.get("torch") else None,
                        "load_average_1_5_15_min": {"start": load_at_start,
                                                    "end": os.getloadavg()}},
        "method": (f"median of {samples} interleaved samples of about {target} s each "
                   "(primal, astad f.grad, the peers' form of the program on numpy where it "
                   "differs, autograd.grad, torch eager forward + backward, in turn); "
                   "gradients checked against central finite differences at sampled entries, "
                   "and every peer's value and gradient against astad's, before timing; "
                   "kept_memory: the same in a subprocess with "
                   f"{KEPT_MEMORY_ENV} (glibc keeps freed memory)"),
        "peers": {key: ("not installed" if m is None else "ok") for key, m in peers.items()},
        "total_seconds": total,
        "rows": rows,
    }, out)
    md = os.path.splitext(out)[0] + ".md"
    with open(md, "w") as fh:
        fh.write(f"# benchmarks/arrays.py{' --quick' if args.quick else ''}\n\n"
                 f"Median of {samples} interleaved samples; {run.environment()['date']}, "
                 f"numpy {np.__version__}, autograd {versions.get('autograd', 'not run')}, "
                 f"torch {versions.get('torch', 'not run')}, one thread; load average "
                 f"(1 min) {load_at_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at "
                 f"the end ({os.cpu_count()} cores).\n\n{text}\n")
    print(f"\n{total:.1f} s; JSON written to {os.path.relpath(out)}, table to "
          f"{os.path.relpath(md)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
