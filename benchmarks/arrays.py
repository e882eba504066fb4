"""NumPy arrays: gradient time over primal time, and the per-operation overhead.

Run from the repository root:

    python benchmarks/arrays.py            # one to two minutes (measured twice, see below)
    python benchmarks/arrays.py --quick    # smaller sizes, fewer samples

Programs (plain numpy functions, differentiated by astad with respect to every float
array argument):

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
- ``per-op``: a chain of 150 element-wise operations on arrays of 3 elements: the time
  per array operation of a gradient call, against numpy's own time per operation and
  autograd's time per operation on the same code (autograd.numpy), if installed.

Every gradient is checked against central finite differences (a few sampled entries of
every argument) before it is timed. Each sample times the primal, astad's gradient and
autograd's gradient once in turn (interleaved, so drifts of the shared machine hit all
alike); the table gives medians. BLAS runs single-threaded (set before numpy loads)
so that primal and gradient use the same resources.

A gradient call keeps every intermediate array alive until its backward pass, where the
primal frees each one at once and numpy reuses the memory. With glibc's default
settings the tape's memory goes back to the operating system after every call and is
faulted in again (zeroed pages) on the next one; on large arrays that costs as much as
the arithmetic. So the whole measurement is repeated in a subprocess whose allocator
keeps freed memory (``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``, glibc's
own environment settings, which a user can set the same way): the "kept memory"
columns. It prints a markdown table and writes benchmarks/results/arrays.json
(arrays-quick.json with --quick).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
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
    return out


# ---------------------------------------------------------------------------------------
# Gradient check, peers, timing

def fd_check(fn, args, wrt, grads, samples=4, rel_step=1e-6):
    """Central differences at a few sampled entries of each differentiated argument."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for k, g in zip(wrt, grads):
        a = args[k]
        for flat in rng.choice(a.size, size=min(samples, a.size), replace=False):
            idx = np.unravel_index(flat, a.shape)
            h = rel_step * max(1.0, abs(float(a[idx])))
            plus, minus = a.copy(), a.copy()
            plus[idx] += h
            minus[idx] -= h
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


def autograd_version(fn, wrt):
    """autograd's gradient of the same code (global ``np`` bound to autograd.numpy),
    or None if autograd is not installed."""
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return None
    g = dict(fn.__globals__)
    g["np"] = anp
    peer = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    return autograd.grad(peer, wrt if len(wrt) > 1 else wrt[0])


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


def bench(name, label, fn, args, wrt, samples, target, per_op=None):
    f = astad.reverse_diff(fn, argnums=wrt)
    grads = f.grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    worst = fd_check(fn, args, wrt, grads)
    variants = [("primal", fn, args), ("astad", f.grad, args)]
    peer = autograd_version(fn, wrt)
    if peer is not None:
        peer_grads = peer(*args)
        peer_grads = peer_grads if isinstance(peer_grads, tuple) else (peer_grads,)
        for a, b in zip(grads, peer_grads):
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
        variants.append(("autograd", peer, args))
    t = time_interleaved(variants, samples, target)
    row = {"program": name, "size": label, "primal_s": t["primal"], "astad_s": t["astad"],
           "autograd_s": t.get("autograd"), "grad_over_primal": t["astad"] / t["primal"],
           "autograd_over_primal": (t["autograd"] / t["primal"] if "autograd" in t
                                    else None),
           "fd_max_relative_error": worst, "samples": samples}
    if per_op:
        row.update({"ops": per_op, "primal_us_per_op": t["primal"] / per_op * 1e6,
                    "astad_us_per_op": t["astad"] / per_op * 1e6,
                    "autograd_us_per_op": (t["autograd"] / per_op * 1e6 if "autograd" in t
                                           else None)})
    return row


# ---------------------------------------------------------------------------------------
# Reporting

def _ms(s):
    return "not installed" if s is None else (f"{s * 1e3:.2f} ms" if s >= 1e-4 else
                                              f"{s * 1e6:.1f} µs")


def _x(r):
    return "-" if r is None else f"{r:.2f}x"


def _peer_x(r):
    return _x(r.get("autograd_over_primal")) if r.get("autograd_s") else "not installed"


def table(rows):
    lines = ["| program | size | primal | astad grad | grad / primal | autograd / primal "
             "| grad / primal, kept memory | autograd / primal, kept memory |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        kept = r.get("kept_memory") or {}
        lines.append(f"| {r['program']} | {r['size']} | {_ms(r['primal_s'])} "
                     f"| {_ms(r['astad_s'])} | {_x(r['grad_over_primal'])} "
                     f"| {_peer_x(r)} "
                     f"| {_x(kept.get('grad_over_primal'))} "
                     f"| {_peer_x(kept)} |")
    op = [r for r in rows if r.get("ops")]
    for r in op:
        auto = r["autograd_us_per_op"]
        lines += ["", "| per array operation (3 elements) | numpy | astad grad | autograd "
                  "grad |", "|---|--:|--:|--:|",
                  f"| {r['ops']} ops | {r['primal_us_per_op']:.2f} µs "
                  f"| {r['astad_us_per_op']:.2f} µs "
                  f"| {'not installed' if auto is None else f'{auto:.2f} µs'} |"]
    return "\n".join(lines)


KEPT_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
                   "MALLOC_TRIM_THRESHOLD_": str(2**30)}


def kept_memory_rows(quick):
    """The same measurements in a subprocess whose allocator keeps freed memory."""
    print("  (again, with an allocator that keeps freed memory)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--kept-memory-child",
                        "--out", path] + (["--quick"] if quick else []),
                       env={**os.environ, **KEPT_MEMORY_ENV}, check=True)
        with open(path) as fh:
            return json.load(fh)["rows"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer samples")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/"
                    "arrays.json, arrays-quick.json with --quick)")
    ap.add_argument("--kept-memory-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    samples, target = (3, 0.03) if args.quick else (11, 0.1)
    out = args.out or os.path.join(_HERE, "results",
                                   "arrays-quick.json" if args.quick else "arrays.json")
    t0 = time.perf_counter()
    rows = []
    for name, label, fn, fn_args, wrt in cases(args.quick):
        rows.append(bench(name, label, fn, fn_args, wrt, samples, target))
        r = rows[-1]
        print(f"  {name:<12} {label:<26} grad/primal {r['grad_over_primal']:.2f}x", flush=True)
    x = np.random.default_rng(3).normal(size=3)
    rows.append(bench("per-op", "3 elements", chain, (x,), (0,), samples, target,
                      per_op=CHAIN_OPS))
    if args.kept_memory_child:
        run.write_json({"rows": rows}, out)
        return 0
    for r, k in zip(rows, kept_memory_rows(args.quick)):
        r["kept_memory"] = {key: k[key] for key in ("primal_s", "astad_s", "autograd_s",
                                                    "grad_over_primal",
                                                    "autograd_over_primal")}
    print()
    print(table(rows))
    total = time.perf_counter() - t0
    try:
        import autograd
        autograd_version_text = getattr(autograd, "__version__", "installed")
    except ImportError:
        autograd_version_text = None
    run.write_json({
        "benchmark": "astad on numpy arrays: gradient time / primal time, per-op overhead",
        "mode": "quick" if args.quick else "full",
        "environment": {**run.environment(), "numpy_version": np.__version__,
                        "autograd_version": autograd_version_text,
                        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")},
        "method": (f"median of {samples} interleaved samples of about {target} s each "
                   "(primal, astad f.grad, autograd.grad in turn); gradients checked "
                   "against central finite differences at sampled entries (and against "
                   "autograd when installed) before timing; kept_memory: the same in a "
                   f"subprocess with {KEPT_MEMORY_ENV} (glibc keeps freed memory)"),
        "total_seconds": total,
        "rows": rows,
    }, out)
    print(f"\n{total:.1f} s; JSON written to {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
