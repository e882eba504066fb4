"""A transform written inline against the same transform kept (issue 27, item 2):

    g = astad.grad(f, argnums=1)            # kept: made once
    g(a, x)
    astad.grad(f, argnums=1)(a, x)          # inline: a new transform object per call

for ``grad``, ``value_and_grad``, ``jacrev`` and ``hessian``, on a small float function
and a small numpy function; ``jvp`` and ``vjp`` are functions, so their pair is the
decorated function's method (``f.jvp``, ``f.vjp``, made once) against ``astad.jvp`` /
``astad.vjp`` called with the function. And the function itself made per call: a
lambda over a closure, ``lambda x, a=a: ...`` (the idiom capturing a loop's value) and
``functools.partial``, against one kept. The goal is inline / kept within 1.5x.

    python benchmarks/inline_transforms.py      # about 20 s

Medians of 15 interleaved samples (every sample times the pair in turn) of about 20 ms.
Writes benchmarks/results/inline_transforms.json and inline_transforms.md.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

import astad  # noqa: E402
from small_arrays import interleaved, save_rows  # noqa: E402


def small_float(a, x):
    return a * x * x + 3.0 * x


def small_numpy(a, x):
    return np.sum(a * np.tanh(x))


A, X = np.linspace(0.1, 1.0, 8), np.linspace(-1.0, 1.0, 8)
FLOAT_ARGS, NUMPY_ARGS = (1.3, 0.7), (A, X)


def pairs() -> list:
    """(transform, function name, kept call, inline call)."""
    out = []
    for fun, args in ((small_float, FLOAT_ARGS), (small_numpy, NUMPY_ARGS)):
        for transform in (astad.grad, astad.value_and_grad, astad.jacrev, astad.hessian):
            if transform is astad.jacrev and fun is small_float:
                continue  # (a float's Jacobian is its gradient: grad's row)
            if transform is astad.hessian and fun is small_numpy:
                continue  # (one Hessian is enough: the float function's)
            kept = transform(fun, argnums=1)
            out.append((transform.__name__, fun.__name__,
                        (lambda kept=kept, args=args: kept(*args)),
                        (lambda transform=transform, fun=fun, args=args:
                         transform(fun, argnums=1)(*args))))
        decorated = astad.reverse_diff(fun)
        tangents = (0.0, 1.0) if fun is small_float else (np.zeros_like(A), np.ones_like(X))
        out.append(("jvp", fun.__name__,
                    (lambda d=decorated, args=args, t=tangents: d.jvp(args, t)),
                    (lambda fun=fun, args=args, t=tangents: astad.jvp(fun, args, t))))
        out.append(("vjp", fun.__name__,
                    (lambda d=decorated, args=args: d.vjp(*args)[1](1.0)),
                    (lambda fun=fun, args=args: astad.vjp(fun, *args)[1](1.0))))
    a, x = FLOAT_ARGS
    kept = astad.grad(lambda x, a=a: small_float(a, x))
    out.append(("grad", "lambda x, a=a: (defaults)", (lambda: kept(x)),
                (lambda: astad.grad(lambda x, a=a: small_float(a, x))(x))))
    kept_closure = astad.grad(lambda x: small_float(a, x))
    out.append(("grad", "lambda x: (a closure)", (lambda: kept_closure(x)),
                (lambda: astad.grad(lambda x: small_float(a, x))(x))))
    kept_partial = astad.grad(functools.partial(small_float, a))
    out.append(("grad", "functools.partial", (lambda: kept_partial(x)),
                (lambda: astad.grad(functools.partial(small_float, a))(x))))
    return out


def same(left, right) -> bool:
    if isinstance(left, tuple):
        return isinstance(right, tuple) and len(left) == len(right) and all(
            same(a, b) for a, b in zip(left, right))
    return bool(np.array_equal(left, right))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.02, help="seconds per sample")
    ap.add_argument("--out", default=os.path.join(_HERE, "results", "inline_transforms.json"))
    args = ap.parse_args(argv)
    start_load = os.getloadavg()[0]
    rows = []
    for transform, function, kept, inline in pairs():
        if not same(kept(), inline()):  # (the same numbers, or the pair means nothing)
            raise SystemExit(f"{transform} of {function}: inline and kept differ")
        medians = interleaved({"kept": kept, "inline": inline}, args.samples, args.target)
        rows.append({"transform": transform, "function": function,
                     "kept_s": medians["kept"], "inline_s": medians["inline"],
                     "inline_over_kept": medians["inline"] / medians["kept"]})
        print(_line(rows[-1]), file=sys.stderr)
    text = "\n".join(["| transform | function | kept | inline | inline / kept |",
                      "|---|---|--:|--:|--:|"] + [_line(row) for row in rows])
    print(text)
    save_rows(args.out, rows, text, args, start_load)


def _line(row) -> str:
    return (f"| {row['transform']} | {row['function']} | {row['kept_s'] * 1e6:.2f} us | "
            f"{row['inline_s'] * 1e6:.2f} us | {row['inline_over_kept']:.2f}x |")


if __name__ == "__main__":
    main()
