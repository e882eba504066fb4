"""Gradients of small and medium numpy programs, side by side with their primal: the
fixed costs per call and per array operation that dominate below ~10^4 elements, where a
regression of the array path shows first (issue 27: the gradient of a 2,500-element
logsumexp went from 46 to 66-91 us over the history, with no single commit to blame in
the large-array benchmarks).

    python benchmarks/small_arrays.py                     # about 15 s
    python benchmarks/small_arrays.py --compare OLD.json  # ratios against an earlier run

Each program is timed as its plain function (the primal), as ``astad.grad(f)`` kept and
called, and as the decorated function's ``f.grad``, interleaved (every sample times all
three in turn), medians of 15 samples of about 20 ms. The table gives the medians and
gradient / primal; ``--compare`` reads an earlier JSON of this script and marks every row
whose gradient / primal grew by more than 15% (ratios travel between machines better
than times; checkouts.py compares two checkouts by instructions, which travel best).
Writes benchmarks/results/small_arrays.json and small_arrays.md.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import timeit

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

import astad  # noqa: E402


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def softmax_cross_entropy(logits, labels):
    """Mean cross-entropy of a batch of logits (rows) against one-hot labels."""
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_p = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.sum(labels * log_p) / logits.shape[0]


def mlp_layer(w, b, x, y):
    """Squared error of one tanh layer: the gradient with respect to w and b."""
    h = np.tanh(x @ w + b)
    return np.sum((h - y) ** 2)


def cases() -> list:
    """(name, function, arguments, argnums, what it is) of every row."""
    rng = np.random.default_rng(27)
    labels = np.eye(10)[rng.integers(0, 10, size=32)]
    x, w = rng.normal(size=(64, 32)), rng.normal(size=(32, 16)) * 0.2
    return [
        ("logsumexp n=100", logsumexp, (rng.normal(size=100),), 0, "small"),
        ("logsumexp n=2,500", logsumexp, (rng.normal(size=2500),), 0, "medium"),
        ("softmax cross-entropy 32x10", softmax_cross_entropy,
         (rng.normal(size=(32, 10)), labels), 0, "small"),
        ("softmax cross-entropy 256x100", softmax_cross_entropy,
         (rng.normal(size=(256, 100)), np.eye(100)[rng.integers(0, 100, size=256)]), 0,
         "medium"),
        ("MLP layer 64x32 -> 16", mlp_layer, (w, np.zeros(16), x, rng.normal(size=(64, 16))),
         (0, 1), "small"),
    ]


def calibrate(call, target: float) -> int:
    number = 1
    while True:
        took = timeit.timeit(call, number=number)
        if took >= target or number >= 1 << 20:
            return max(1, int(number * target / max(took, 1e-9)))
        number *= 4


def save_rows(out: str, rows: list, text: str, args, start_load: float) -> None:
    """A side-by-side benchmark's JSON (the environment, ``args``' samples and target,
    the rows) at ``out``, and its table ``text`` beside it as .md."""
    result = {"environment": {"python": platform.python_version(),
                              "numpy": np.__version__, "machine": platform.machine(),
                              "cpus": os.cpu_count(), "load_start": start_load,
                              "load_end": os.getloadavg()[0]},
              "settings": {"samples": args.samples, "target_s": args.target},
              "rows": rows}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.splitext(out)[0] + ".md", "w") as fh:
        fh.write(text + "\n")


def interleaved(calls: dict, samples: int, target: float) -> dict:
    """Median seconds per call of each zero-argument callable, sampled in turn."""
    numbers = {name: calibrate(call, target) for name, call in calls.items()}
    times: dict = {name: [] for name in calls}
    for _ in range(samples):
        for name, call in calls.items():
            times[name].append(timeit.timeit(call, number=numbers[name]) / numbers[name])
    return {name: statistics.median(values) for name, values in times.items()}


def check(fun, args, argnums, gradient) -> float:
    """The largest relative error of ``gradient`` against central differences at a few
    entries of each differentiated argument (a benchmark of wrong numbers is no use)."""
    chosen = (argnums,) if isinstance(argnums, int) else argnums
    grads = (gradient,) if isinstance(argnums, int) else gradient
    worst = 0.0
    for k, g in zip(chosen, grads):
        scale = float(np.max(np.abs(g)))  # (an entry near 0: measured against the largest)
        for index in list(np.ndindex(args[k].shape))[:: max(1, args[k].size // 5)]:
            moved = [np.array(a, copy=True) for a in args]
            h = 1e-5 * max(1.0, abs(moved[k][index]))
            moved[k][index] += h
            up = fun(*moved)
            moved[k][index] -= 2 * h
            difference = (up - fun(*moved)) / (2 * h)
            worst = max(worst, abs(difference - g[index]) /
                        max(abs(difference), 1e-3 * scale, 1e-12))
    if worst > 1e-4:  # (a check of the benchmark's numbers: the tests check astad)
        raise SystemExit(f"{fun.__name__}: gradient disagrees with differences ({worst:.2e})")
    return worst


def run(samples: int, target: float) -> list:
    rows = []
    for name, fun, args, argnums, size in cases():
        kept = astad.grad(fun, argnums=argnums)
        decorated = astad.reverse_diff(fun, argnums=argnums)
        error = check(fun, args, argnums, kept(*args))
        medians = interleaved({"primal": functools.partial(fun, *args),
                               "astad.grad": functools.partial(kept, *args),
                               "f.grad": functools.partial(decorated.grad, *args)},
                              samples, target)
        _, pullback = decorated.vjp(*args)
        rows.append({"program": name, "size": size, "primal_s": medians["primal"],
                     "grad_s": medians["astad.grad"], "f_grad_s": medians["f.grad"],
                     "grad_over_primal": medians["astad.grad"] / medians["primal"],
                     "f_grad_over_primal": medians["f.grad"] / medians["primal"],
                     "tape_length": pullback.tape_length, "fd_max_relative_error": error})
        print(_line(rows[-1]), file=sys.stderr)
    return rows


def _line(row) -> str:
    return (f"| {row['program']} | {row['primal_s'] * 1e6:.1f} us | {row['grad_s'] * 1e6:.1f} us "
            f"| {row['f_grad_s'] * 1e6:.1f} us | {row['grad_over_primal']:.2f}x | "
            f"{row['f_grad_over_primal']:.2f}x | {row['tape_length']} |")


def table(rows, before=None) -> str:
    head = ("| program | primal | astad.grad | f.grad | grad / primal | f.grad / primal | "
            "tape entries |")
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|"]
    lines += [_line(row) for row in rows]
    if before is not None:
        old = {row["program"]: row for row in before["rows"]}
        lines += ["", "| program | grad / primal before | now | now / before |",
                  "|---|--:|--:|--:|"]
        for row in rows:
            earlier = old.get(row["program"])
            if earlier is None:
                continue
            change = row["grad_over_primal"] / earlier["grad_over_primal"]
            flag = " **slower**" if change > 1.15 else ""
            lines.append(f"| {row['program']} | {earlier['grad_over_primal']:.2f}x | "
                         f"{row['grad_over_primal']:.2f}x | {change:.2f}{flag} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.02, help="seconds per sample")
    ap.add_argument("--compare", help="an earlier JSON of this script")
    ap.add_argument("--out", default=os.path.join(_HERE, "results", "small_arrays.json"))
    args = ap.parse_args(argv)
    before = None
    if args.compare:
        with open(args.compare) as fh:
            before = json.load(fh)
    start_load = os.getloadavg()[0]
    rows = run(args.samples, args.target)
    text = table(rows, before)
    print(text)
    save_rows(args.out, rows, text, args, start_load)


if __name__ == "__main__":
    main()
