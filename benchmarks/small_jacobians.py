"""Jacobians and Hessians of small numpy functions (issue 27, item 5), each as a pair
measured side by side: the form that was fast, the form a scientist writes.

- an ODE's right-hand side (Robertson's, 3 -> 3), written with numpy (``y[i]`` reads,
  ``np.array([...])`` of the results) against the same written with floats returning a
  tuple; ``jacrev``, ``jacfwd`` and ``jacobian``;
- 400 steps of backward Euler on it (Newton, two iterations a step, a Jacobian and a
  solve each), the Jacobian by ``astad.jacobian`` against a hand-written one;
- the Hessian of a 6-variable numpy function against the same written with floats, with
  the numpy function's gradient beside it.

The goal of a pair is within 1.5x. ``python benchmarks/small_jacobians.py`` (about 20 s);
medians of interleaved samples; writes benchmarks/results/small_jacobians.json and .md.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

import astad  # noqa: E402
from small_arrays import interleaved, save_rows  # noqa: E402


def robertson(y):
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


def robertson_floats(y0, y1, y2):
    return (-0.04 * y0 + 1e4 * y1 * y2, 0.04 * y0 - 1e4 * y1 * y2 - 3e7 * y1 ** 2,
            3e7 * y1 ** 2)


def robertson_by_hand(y):
    return np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])


def backward_euler(jacobian, y, h=1e-3, steps=400):
    eye = np.eye(len(y))
    for _ in range(steps):
        start = y
        for _ in range(2):  # Newton on y - start - h f(y) = 0
            residual = y - start - h * robertson(y)
            y = y - np.linalg.solve(eye - h * jacobian(y), residual)
    return y


def six(x):
    return np.sum(np.sin(x[:3]) * x[3:] ** 2) + np.prod(x) + np.exp(x[0] * x[5])


def six_floats(a, b, c, d, e, f):
    return (math.sin(a) * d ** 2 + math.sin(b) * e ** 2 + math.sin(c) * f ** 2 +
            a * b * c * d * e * f + math.exp(a * f))


Y = np.array([1.0, 2e-5, 1e-2])
X6 = np.linspace(0.3, 1.1, 6)


def pairs() -> list:
    """(what, fast form's label, its call, other form's label, its call, whether the two
    give the same numbers: checked, or the pair means nothing)."""
    floats = astad.jacrev(robertson_floats, argnums=(0, 1, 2))
    out = []
    for name, transform in (("jacrev", astad.jacrev), ("jacfwd", astad.jacfwd),
                            ("jacobian", astad.jacobian)):
        kept = transform(robertson)
        out.append((f"{name} of an ODE's right-hand side (3 -> 3)",
                    "floats, a tuple (jacrev)", lambda: floats(*Y.tolist()),
                    "numpy: y[i] reads, np.array of them", lambda kept=kept: kept(Y), True))
    y, direction = tuple(Y.tolist()), (1.0, -0.5, 0.25)
    out.append(("a directional derivative of the right-hand side, floats returning a tuple",
                "vjp and one pullback (reverse)",
                lambda: astad.vjp(robertson_floats, *y)[1](direction),
                "jvp (forward)", lambda: astad.jvp(robertson_floats, y, direction), False))
    jacobian = astad.jacobian(robertson)
    out.append(("400 backward-Euler steps (800 Jacobians and solves)", "a hand Jacobian",
                lambda: backward_euler(robertson_by_hand, Y), "astad.jacobian",
                lambda: backward_euler(jacobian, Y), True))
    hessian_floats = astad.hessian(six_floats, argnums=tuple(range(6)))
    hessian, grad = astad.hessian(six), astad.grad(six)
    out.append(("hessian of a 6-variable function", "floats",
                lambda: hessian_floats(*X6.tolist()), "numpy", lambda: hessian(X6), True))
    out.append(("gradient of the 6-variable numpy function, then its hessian", "grad",
                lambda: grad(X6), "hessian", lambda: hessian(X6), False))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.02, help="seconds per sample")
    ap.add_argument("--out", default=os.path.join(_HERE, "results", "small_jacobians.json"))
    args = ap.parse_args(argv)
    start_load = os.getloadavg()[0]
    rows = []
    for what, fast_label, fast, slow_label, slow, same in pairs():
        if same and not np.allclose(np.array(slow()), np.array(fast()), rtol=1e-12, atol=0):
            raise SystemExit(f"{what}: the two forms differ")
        medians = interleaved({"fast": fast, "slow": slow}, args.samples, args.target)
        rows.append({"what": what, "fast_form": fast_label, "slow_form": slow_label,
                     "fast_s": medians["fast"], "slow_s": medians["slow"],
                     "slow_over_fast": medians["slow"] / medians["fast"]})
        print(_line(rows[-1]), file=sys.stderr)
    text = "\n".join(["| computation | fast form | time | other form | time | ratio |",
                      "|---|---|--:|---|--:|--:|"] + [_line(row) for row in rows])
    print(text)
    save_rows(args.out, rows, text, args, start_load)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def _line(row) -> str:
    return (f"| {row['what']} | {row['fast_form']} | {_time(row['fast_s'])} | "
            f"{row['slow_form']} | {_time(row['slow_s'])} | {row['slow_over_fast']:.2f}x |")


if __name__ == "__main__":
    main()
