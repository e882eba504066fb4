"""Nested derivatives and closures (issue 27, items 2 and 6), each as a pair measured side
by side in one run:

- **saddle** and **particle**, Siskind and Pearlmutter's nested problems, in plain
  Python: a gradient descent whose objective itself runs a descent (saddle: min over x
  of max over y) or integrates a particle pushed by the gradient of a potential that
  the outer variable moves (particle). "nested" takes every gradient with astad, the
  inner ones inside the outer one; "hand" writes the inner gradient by hand and takes
  the outer one with astad. Goal: nested within 20x of hand.
- **closures**: a gradient of a lambda made anew in a loop over a local
  (``astad.grad(lambda x: model(a, x))(x)``) against the same transform kept
  (``g = astad.grad(model, argnums=1)``); a closure over data against the data passed
  as an argument; and ``jacrev`` of a function returning a tuple of floats against its
  ``f.vjp`` with one pullback per output. Goal: within 1.5x.

    python benchmarks/nested.py            # about a minute
    python benchmarks/nested.py --quick    # about 20 s: one run of each problem

Medians (the problems: of 3 interleaved runs; the closures: of 15 interleaved samples
of about 20 ms). Each pair's results are checked equal (to 1e-9). Writes
benchmarks/results/nested.json and nested.md (nested-quick.* with --quick).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

import astad  # noqa: E402
from small_arrays import interleaved  # noqa: E402


# -- the problems' shared pieces ----------------------------------------------------------
def magnitude(v):
    return math.sqrt(sum(vi * vi for vi in v))


def distance(u, v):
    return magnitude([a - b for a, b in zip(u, v)])


def argmin(f, x, grad, tolerance):
    """Gradient descent with a step that doubles after ten good steps and halves after a
    bad one (the problems' own descent)."""
    fx, gx, eta, i = f(x), grad(x), 1e-5, 0
    while True:
        if magnitude(gx) <= tolerance:
            return x
        if i == 10:
            eta, i = 2.0 * eta, 0
            continue
        x_new = [xi - eta * gi for xi, gi in zip(x, gx)]
        if distance(x, x_new) <= tolerance:
            return x
        fx_new = f(x_new)
        if fx_new < fx:
            x, fx, gx, i = x_new, fx_new, grad(x_new), i + 1
        else:
            eta, i = eta / 2.0, 0


# -- saddle: min over (x1, y1) of max over (x2, y2) ---------------------------------------
def saddle_f(x1, y1, x2, y2):
    return (x1 * x1 + y1 * y1) - (x2 * x2 + y2 * y2)


def saddle(inner_gradient, tolerance):
    start = [1.0, 1.0]

    def outer(p):
        loss = lambda q: -saddle_f(p[0], p[1], q[0], q[1])  # noqa: E731
        q = argmin(loss, start, inner_gradient(loss), tolerance)
        return -loss(q)

    return argmin(outer, start, astad.grad(outer), tolerance)


def saddle_nested(tolerance):
    return saddle(astad.grad, tolerance)


def saddle_hand(tolerance):
    return saddle(lambda loss: (lambda q: [2.0 * q[0], 2.0 * q[1]]), tolerance)


# -- particle: the charge that makes a particle land at x = 0 -----------------------------
def naive_euler(w, potential_gradient):
    charges = [[10.0, 10.0 - w], [10.0, 0.0]]
    x, xdot, dt = [0.0, 8.0], [0.75, 0.0], 1e-1

    def p(x):
        return sum(1.0 / distance(x, c) for c in charges)

    while True:
        xddot = [-g for g in potential_gradient(p, x, charges)]
        x_new = [a + dt * b for a, b in zip(x, xdot)]
        if x_new[1] > 0.0:
            x, xdot = x_new, [a + dt * b for a, b in zip(xdot, xddot)]
        else:
            dt_f = (0.0 - x[1]) / xdot[1]
            x_tf = [a + dt_f * b for a, b in zip(x, xdot)]
            return x_tf[0] * x_tf[0]


def potential_gradient_astad(p, x, charges):
    return astad.grad(p)(x)


def potential_gradient_hand(p, x, charges):
    g = [0.0, 0.0]
    for c in charges:
        d = distance(x, c)
        for k in range(2):
            g[k] += -(x[k] - c[k]) / (d * d * d)
    return g


def particle(potential_gradient, tolerance):
    f = lambda w: naive_euler(w[0], potential_gradient)  # noqa: E731
    return argmin(f, [0.0], astad.grad(f), tolerance)


def particle_nested(tolerance):
    return particle(potential_gradient_astad, tolerance)


def particle_hand(tolerance):
    return particle(potential_gradient_hand, tolerance)


PROBLEMS = [("saddle", saddle_nested, saddle_hand),
            ("particle", particle_nested, particle_hand)]


# -- closures ------------------------------------------------------------------------------
def model(a, x):
    return a * math.sin(x) * x + math.exp(-a * x)


SCALES = [0.5 + 0.1 * k for k in range(10)]
CHARGES = [[10.0, 9.7], [10.0, 0.0], [-3.0, 4.0]]


def lambdas_made_in_a_loop():
    return [astad.grad(lambda x: model(a, x))(0.7) for a in SCALES]  # noqa: B023


KEPT = astad.grad(model, argnums=1)


def transform_kept():
    return [KEPT(a, 0.7) for a in SCALES]


def potential_over(charges):
    def p(x):
        return sum(1.0 / distance(x, c) for c in charges)
    return p


def potential_of(x, charges):
    return sum(1.0 / distance(x, c) for c in charges)


CLOSED = astad.grad(potential_over(CHARGES))
PASSED = astad.grad(potential_of)


def closure_over_data():
    return CLOSED([0.5, 7.0])


def data_as_an_argument():
    return PASSED([0.5, 7.0], CHARGES)


def residual(cam, pt, w):  # a small reprojection residual: 16 inputs, 2 outputs
    r = [cam[0] * pt[0] + cam[1] * pt[1] + cam[2] * pt[2] + cam[3],
         cam[4] * pt[0] + cam[5] * pt[1] + cam[6] * pt[2] + cam[7],
         cam[8] * pt[0] + cam[9] * pt[1] + cam[10] * pt[2] + cam[11]]
    u, v = r[0] / r[2], r[1] / r[2]
    d = 1.0 + w * (u * u + v * v)
    return (u * d - 0.3, v * d + 0.2)


CAMERA = ([1.0, 0.1, 0.2, 0.3, 0.05, 1.1, 0.1, -0.2, 0.01, 0.02, 1.0, 4.0],
          [0.5, -0.3, 1.2], 0.01)
RESIDUAL = astad.reverse_diff(residual)
JACREV = astad.jacrev(residual, argnums=(0, 1, 2))


def two_pullbacks():
    _, pullback = RESIDUAL.vjp(*CAMERA)
    return [pullback((1.0, 0.0)), pullback((0.0, 1.0))]


def jacrev_of_residual():
    return JACREV(*CAMERA)


PAIRS = [("a lambda made in a loop over a local (10 calls)", transform_kept,
          lambdas_made_in_a_loop, "kept transform"),
         ("a closure over a list of lists", data_as_an_argument, closure_over_data,
          "data as an argument"),
         ("jacrev of a 16-input, 2-output residual", two_pullbacks, jacrev_of_residual,
          "f.vjp and two pullbacks")]


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [float(value)]


def close(left, right) -> bool:
    return bool(np.allclose(_flat(left), _flat(right), rtol=1e-9, atol=1e-12))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    runs, samples = (1, 5) if args.quick else (3, 15)
    tolerance = 1e-5  # (the problems' own)
    out = args.out or os.path.join(_HERE, "results",
                                   "nested-quick.json" if args.quick else "nested.json")
    start_load = os.getloadavg()[0]
    rows = []
    for name, nested, hand in PROBLEMS:
        times: dict = {"nested": [], "hand": []}
        results: dict = {}
        for _ in range(runs):
            for label, run in (("nested", nested), ("hand", hand)):
                start = time.perf_counter()
                results[label] = run(tolerance)
                times[label].append(time.perf_counter() - start)
        if not close(results["nested"], results["hand"]):
            raise SystemExit(f"{name}: the nested and hand-written runs disagree")
        fast, slow = statistics.median(times["hand"]), statistics.median(times["nested"])
        rows.append({"pair": name, "fast_form": "hand-written inner gradient",
                     "slow_form": "astad's inner gradient", "fast_s": fast, "slow_s": slow,
                     "ratio": slow / fast, "goal": 20.0})
        print(_line(rows[-1]), file=sys.stderr)
    for name, fast, slow, fast_form in PAIRS:
        if not close(fast(), slow()):
            raise SystemExit(f"{name}: the pair's results differ")
        medians = interleaved({"fast": fast, "slow": slow}, samples, 0.02)
        rows.append({"pair": name, "fast_form": fast_form, "slow_form": name,
                     "fast_s": medians["fast"], "slow_s": medians["slow"],
                     "ratio": medians["slow"] / medians["fast"], "goal": 1.5})
        print(_line(rows[-1]), file=sys.stderr)
    text = "\n".join(["| pair | the fast form | time | the other form | time | ratio | goal |",
                      "|---|---|--:|---|--:|--:|--:|"] + [_line(row) for row in rows])
    print(text)
    result = {"environment": {"python": platform.python_version(), "numpy": np.__version__,
                              "cpus": os.cpu_count(), "load_start": start_load,
                              "load_end": os.getloadavg()[0]},
              "settings": {"quick": args.quick, "runs": runs, "samples": samples,
                           "tolerance": tolerance}, "rows": rows}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.splitext(out)[0] + ".md", "w") as fh:
        fh.write(text + "\n")
    return result


def _line(row) -> str:
    def shown(seconds):
        return f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1e6:.1f} us"
    return (f"| {row['pair']} | {row['fast_form']} | {shown(row['fast_s'])} | "
            f"{row['slow_form']} | {shown(row['slow_s'])} | {row['ratio']:.2f}x | "
            f"{row['goal']:g}x |")


if __name__ == "__main__":
    main()
