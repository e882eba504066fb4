"""The same computations written the ways people write them: astad's cost over each.

Run from the repository root:

    python benchmarks/variants.py              # about 2 minutes
    python benchmarks/variants.py --quick      # about 30 s
    python benchmarks/variants.py --callgrind  # and instructions per call (valgrind)

Each family is one computation in several forms (the dot product by ``range`` indexing,
``zip``, ``for x in xs`` with a counter, ``enumerate``, ``while``; a matrix-vector sum by
``m[i][j]``, ``row = m[i]``, ``for row in m``; a series with its length an int or a
float; lists of ``numpy.float64`` and 1-d numpy arrays; a tiny function calling helpers, through
``value_and_grad`` and ``vjp``; a sum of distances written out, through a helper in a
loop, a generator over it, a dataclass's method, a local def and a lambda; a helper
returning early against its if/else written out; ``np.exp`` of an array's element
against ``math.exp`` of it; a recurrence carried in locals,
written into a list and appended to one; a polynomial with its powers written out and
by ``x ** i`` over a loop's index; a function's constants passed and left to their
defaults; a tiny function's ``grad``,
``jacfwd``, ``jacrev`` and ``hessian``), each timed side by side with its own primal in one run
(interleaved samples, medians). The first form of a family is its reference: the table
gives each form's grad / primal and that ratio over the reference's. Then the suite's
scalar programs (``programs.py``) in the same run, and the issue's goals checked on all
of them. Every form is checked first against the ordinary transformed code and central
finite differences. Writes ``benchmarks/results/variants.json`` (``variants-quick.json``
with ``--quick``) and, with ``--callgrind``, instruction counts in the same JSON.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for path in (_ROOT, _HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import astad  # noqa: E402
import programs  # noqa: E402
import run  # noqa: E402
from astad.compile import calls as codegen  # noqa: E402
from astad.api.diff import with_defaults  # noqa: E402


# -- the forms ----------------------------------------------------------------------------
def dot_range(xs, ys):
    s = 0.0
    for i in range(len(xs)):
        s = s + xs[i] * ys[i]
    return s


def dot_zip(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s = s + x * y
    return s


def dot_counter(xs, ys):
    s = 0.0
    i = 0
    for x in xs:
        s = s + x * ys[i]
        i += 1
    return s


def dot_enumerate(xs, ys):
    s = 0.0
    for i, x in enumerate(xs):
        s += x * ys[i]
    return s


def dot_while(xs, ys):
    s = 0.0
    i = 0
    n = len(xs)
    while i < n:
        s += xs[i] * ys[i]
        i += 1
    return s


def matvec_ij(m, v):
    s = 0.0
    for i in range(len(m)):
        for j in range(len(v)):
            s = s + m[i][j] * v[j]
    return s


def matvec_row_index(m, v):  # the suite's sum_matvec
    s = 0.0
    for i in range(len(m)):
        row = m[i]
        r = 0.0
        for j in range(len(v)):
            r = r + row[j] * v[j]
        s = s + r
    return s


def matvec_rows(m, v):
    s = 0.0
    for row in m:
        for j in range(len(v)):
            s = s + row[j] * v[j]
    return s


def matvec_rows_zip(m, v):
    s = 0.0
    for row in m:
        for a, b in zip(row, v):
            s += a * b
    return s


def series(x, n):
    """exp(x) - 1 by its series, n terms; n an int (never differentiated) or a float."""
    s = 0.0
    term = 1.0
    k = 1.0
    while k < n:
        term = term * x / k
        s = s + term
        k = k + 1.0
    return s


def _lerp(a, b, t):
    return a + (b - a) * t


def _smooth(u):
    return u * u * (3.0 - 2.0 * u)


def tiny(x, y):
    """A tiny function with helper calls (about 1 us)."""
    return _smooth(_lerp(x, y, 0.25)) + _lerp(y, x, 0.5) * 0.1


def _dist(p, x):
    return math.sqrt((p[0] - x[0]) ** 2 + (p[1] - x[1]) ** 2)


@dataclasses.dataclass
class Site:
    x: float
    y: float

    def dist(self, q):
        return math.sqrt((self.x - q[0]) ** 2 + (self.y - q[1]) ** 2)


def distances_inlined(x, pts):
    s = 0.0
    for p in pts:
        s = s + math.sqrt((p[0] - x[0]) ** 2 + (p[1] - x[1]) ** 2)
    return s


def distances_helper(x, pts):
    s = 0.0
    for p in pts:
        s = s + _dist(p, x)
    return s


def distances_generator(x, pts):
    return sum(_dist(p, x) for p in pts)


def distances_method(site, pts):
    return sum(site.dist(q) for q in pts)


def distances_local_def(x, pts):
    def dist(p):  # a closure over x
        return math.sqrt((p[0] - x[0]) ** 2 + (p[1] - x[1]) ** 2)
    return sum(dist(p) for p in pts)


def distances_lambda(x, pts):
    square = lambda u: u * u  # noqa: E731 (as users write it)
    return sum(math.sqrt(square(p[0] - x[0]) + square(p[1] - x[1])) for p in pts)


def _clipped(v):
    if v > 0.5:
        return 0.5
    return v * v


def clipped_inlined(xs):
    s = 0.0
    for v in xs:
        if v > 0.5:
            s = s + 0.5
        else:
            s = s + v * v
    return s


def clipped_helper(xs):
    s = 0.0
    for v in xs:
        s = s + _clipped(v)
    return s


def recurrence_in_locals(xs, c):
    prev = xs[0] * 2.0
    s = prev * prev
    for i in range(1, len(xs)):
        prev = prev * c + xs[i]
        s = s + prev * prev
    return s


def recurrence_in_a_list(xs, c):
    ys = [0.0] * len(xs)
    ys[0] = xs[0] * 2.0
    for i in range(1, len(xs)):
        ys[i] = ys[i - 1] * c + xs[i]
    return sum(y * y for y in ys)


def recurrence_appended(xs, c):
    ys = [xs[0] * 2.0]
    for i in range(1, len(xs)):
        ys.append(ys[-1] * c + xs[i])
    total = 0.0
    for y in ys:
        total = total + y * y
    return total


def weighted_in_locals(x, w):
    s = 0.0
    for i in range(len(x)):
        s = s + math.tanh(x[i]) * w[i]
    return s


def softplus_math(x, w):
    s = 0.0
    for i in range(len(x)):
        s = s + math.log(1.0 + math.exp(-x[i])) * w[i]
    return s


def softplus_numpy(x, w):
    s = 0.0
    for i in range(len(x)):
        s = s + np.log(1.0 + np.exp(-x[i])) * w[i]
    return s


def weighted_array_summed(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) * w[i]
    return np.sum(y)


def weighted_array_matmul(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return y @ w


def weighted_array_dot(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.dot(w, y)


def weighted_array_mean(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) * w[i]
    return np.mean(y) * len(x)


def polynomial_written_out(x, c):
    return (c[0] + c[1] * x + c[2] * x ** 2 + c[3] * x ** 3 + c[4] * x ** 4
            + c[5] * x ** 5 + c[6] * x ** 6)


def polynomial_powers(x, c):
    s = 0.0
    for i in range(len(c)):
        s = s + c[i] * x ** i
    return s


def oscillator(x, v, k=2.0, c=0.1, dt=0.05, steps=100):
    """A damped oscillator stepped by semi-implicit Euler: the constants as defaults."""
    for _ in range(steps):
        v = v - dt * (k * x + c * v)
        x = x + dt * v
    return x * x + v * v


def _vjp(f):
    def value_and_pullback(*args):
        value, pullback = f.vjp(*args)
        return value, pullback(1.0)
    return value_and_pullback


class Form:
    def __init__(self, family, name, fn, args, size="", call="value_and_grad"):
        self.family, self.name, self.fn, self.args = family, name, fn, args
        self.size, self.call = size, call
        self.primal, self.decorated = fn, False


def forms(quick: bool) -> list:
    rng = random.Random(2024)
    out = []
    for n in ([10**3] if quick else [10**3, 10**4]):
        xs = [rng.uniform(-1, 1) for _ in range(n)]
        ys = [rng.uniform(-1, 1) for _ in range(n)]
        size = f"n={n}"
        out += [Form("dot", "range indexing", dot_range, (xs, ys), size),
                Form("dot", "zip", dot_zip, (xs, ys), size),
                Form("dot", "for x in xs, a counter", dot_counter, (xs, ys), size),
                Form("dot", "enumerate", dot_enumerate, (xs, ys), size),
                Form("dot", "while with an index", dot_while, (xs, ys), size)]
        out += [Form("float64", "range indexing, lists of float", dot_range, (xs, ys), size),
                Form("float64", "range indexing, lists of numpy.float64", dot_range,
                     ([np.float64(x) for x in xs], [np.float64(y) for y in ys]), size),
                Form("float64", "range indexing, 1-d numpy arrays", dot_range,
                     (np.array(xs), np.array(ys)), size)]
    for n in ([30] if quick else [30, 100]):
        m = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(n)]
        v = [rng.uniform(-1, 1) for _ in range(n)]
        size = f"{n}x{n}"
        out += [Form("sum_matvec", "m[i][j]", matvec_ij, (m, v), size),
                Form("sum_matvec", "row = m[i]; row[j]", matvec_row_index, (m, v), size),
                Form("sum_matvec", "for row in m; row[j]", matvec_rows, (m, v), size),
                Form("sum_matvec", "for row in m; zip(row, v)", matvec_rows_zip, (m, v),
                     size)]
    out += [Form("series", "n a float", series, (0.3, 200.0), "n=200"),
            Form("series", "n an int", series, (0.3, 200), "n=200")]
    out += [Form("tiny", "value_and_grad", tiny, (0.3, 1.7)),
            Form("tiny", "vjp and one pullback", tiny, (0.3, 1.7), call="vjp")]
    # issue 27: helpers, generators and methods cost what the code written out costs
    pts = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(50)]
    x = [rng.uniform(-1, 1), rng.uniform(-1, 1)]
    out += [Form("helpers", "written out", distances_inlined, (x, pts), "n=50"),
            Form("helpers", "a helper in a loop", distances_helper, (x, pts), "n=50"),
            Form("helpers", "sum of a generator over it", distances_generator, (x, pts),
                 "n=50"),
            Form("helpers", "a dataclass's method", distances_method, (Site(*x), pts),
                 "n=50"),
            Form("helpers", "a local def (a closure)", distances_local_def, (x, pts),
                 "n=50"),
            Form("helpers", "a lambda", distances_lambda, (x, pts), "n=50")]
    coefficients = [rng.uniform(-1, 1) for _ in range(7)]
    out += [Form("powers", "x ** 3 written out", polynomial_written_out,
                 (0.7, coefficients), "degree 6"),
            Form("powers", "x ** i, i a loop's index", polynomial_powers, (0.7, coefficients),
                 "degree 6")]
    out += [Form("defaults", "every argument passed", oscillator,
                 (0.3, -0.2, 2.0, 0.1, 0.05, 100), "100 steps"),
            Form("defaults", "the constants left to their defaults", oscillator, (0.3, -0.2),
                 "100 steps")]
    xs = [rng.uniform(-1, 1) for _ in range(1000)]
    out += [Form("branches", "if/else written out", clipped_inlined, (xs,), "n=1000"),
            Form("branches", "a helper returning early", clipped_helper, (xs,), "n=1000")]
    out += [Form("lists", "values carried in locals", recurrence_in_locals, (xs, 0.5),
                 "n=1000"),
            Form("lists", "written into a list, then summed", recurrence_in_a_list,
                 (xs, 0.5), "n=1000"),
            Form("lists", "appended to a list, then read", recurrence_appended, (xs, 0.5),
                 "n=1000")]
    # a new array written by element, then given to numpy (issue 27, item 4)
    x, w = np.array(xs), np.array([rng.uniform(0, 2) for _ in range(1000)])
    out += [Form("written arrays", "a sum carried in a local", weighted_in_locals, (x, w),
                 "n=1000"),
            Form("written arrays", "np.zeros written, np.sum", weighted_array_summed, (x, w),
                 "n=1000"),
            Form("written arrays", "np.zeros written, y @ w", weighted_array_matmul, (x, w),
                 "n=1000"),
            Form("written arrays", "np.zeros written, np.dot(w, y)", weighted_array_dot,
                 (x, w), "n=1000"),
            Form("written arrays", "np.zeros written, np.mean", weighted_array_mean, (x, w),
                 "n=1000")]
    # numpy's functions of one element of an array, against math's (rules/numpy_floats.py)
    out += [Form("element functions", "math.exp, math.log of x[i]", softplus_math,
                 (x, w), "n=1000"),
            Form("element functions", "np.exp, np.log of x[i]", softplus_numpy, (x, w),
                 "n=1000")]
    # and a tiny function's Jacobians and Hessian within a small constant of its gradient
    out += [Form("tiny derivatives", kind, tiny, (0.3, 1.7), call=kind)
            for kind in ("grad", "jacfwd", "jacrev", "hessian")]
    return out


def path_of(fn, args) -> str:
    """Which code runs: "straight-line" (no tape), "specialised" (flat tape), "general"."""
    entry = codegen.build(fn)
    args = with_defaults(fn, tuple(args), entry.arity)  # (the code takes every parameter)
    if entry.tapeless is None or entry.tapeless(*args) is None:
        return "general"
    return "specialised" if entry.tapes else "straight-line"


def _path(form) -> str:
    path = path_of(form.fn, form.args)
    if form.call != "vjp":
        return path
    return "general (vjp)" if path == "general" else f"{path}, a scaled pullback"


def check(form, ad) -> None:
    """The form's value and gradient against the ordinary code and finite differences."""
    case = programs.Case(form.family, None, form.fn, ad, form.args)
    run.check_case(case, ad)
    value, grads = ad.value_and_grad(*form.args)
    want_value, want = ad.value_and_grad.__self__._value_and_grad_taped(form.args, {})
    problems = []

    if any(isinstance(a, np.ndarray) for a in form.args):  # (arrays: their elements)
        grads, want = ([np.asarray(x).tolist() for x in g] for g in (grads, want))
    run._compare("value", value, want_value, 1e-12, 1e-12, problems)
    run._compare("gradient", grads, want, 1e-12, 1e-14, problems)
    if problems:
        raise run.BenchmarkError(f"{form.family} / {form.name}: " + "; ".join(problems))


_TRANSFORMS = {"grad": astad.grad, "jacfwd": astad.jacfwd, "jacrev": astad.jacrev,
               "hessian": astad.hessian}


def _call(form, ad):
    """What a form times: ``value_and_grad``, ``vjp`` and a pullback, or a transform of
    every argument (kept, as a user keeps it)."""
    if form.call == "value_and_grad":
        return ad.value_and_grad
    if form.call == "vjp":
        return _vjp(ad)
    return _TRANSFORMS[form.call](form.fn, argnums=tuple(range(len(form.args))))


def check_transform(form) -> None:
    """A transform's result against the general path's (``functools.partial`` of the
    function, which no code for floats serves)."""
    got = _call(form, None)(*form.args)
    want = _TRANSFORMS[form.call](functools.partial(form.fn),
                                  argnums=tuple(range(len(form.args))))(*form.args)
    problems = []
    run._compare(form.call, got, want, 1e-12, 1e-14, problems)
    if problems:
        raise run.BenchmarkError(f"{form.family} / {form.name}: " + "; ".join(problems))


def bench_form(form, samples, target) -> dict:
    ad = astad.reverse_diff(form.fn)
    check(form, ad)
    if form.call in _TRANSFORMS:
        check_transform(form)
    call = _call(form, ad)
    t = run.time_interleaved([("primal", form.fn, form.args), ("grad", call, form.args)],
                             samples, target)
    primal, grad = t["primal"]["median"], t["grad"]["median"]
    return {"family": form.family, "form": form.name, "size": form.size,
            "call": form.call, "path": _path(form), "primal_s": primal, "grad_s": grad,
            "grad_over_primal": grad / primal, "timings": t}


def bench_suite(samples, target, quick) -> list:
    rows = []
    for case in programs.make_cases(quick=quick):
        row = run.bench_case(case, samples, target)
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
        fn = ad.__wrapped__ if case.ad_is_decorated else case.ad
        rows.append({"family": "suite", "form": case.program, "size": case.size_label,
                     "call": "value_and_grad", "path": path_of(fn, case.args),
                     "primal_s": row["primal_s"], "grad_s": row["grad_s"],
                     "grad_over_primal": row["grad_over_primal"], "timings": row["timings"]})
    return rows


def with_references(rows: list) -> None:
    """Each form's ratio over its family's first form at the same size."""
    first = {}
    for r in rows:
        if r["family"] == "suite":
            continue
        key = (r["family"], r["size"])
        first.setdefault(key, r)
        r["over_reference"] = r["grad_over_primal"] / first[key]["grad_over_primal"]
        r["reference"] = first[key]["form"]


def table(rows: list) -> str:
    lines = ["| family | form | size | code | primal | astad | grad / primal | "
             "over the first form |", "|---|---|---|---|--:|--:|--:|--:|"]
    for r in rows:
        ref = f"{r['over_reference']:.2f}x" if "over_reference" in r else "-"
        lines.append(f"| {r['family']} | {r['form']} | {r['size'] or '-'} | {r['path']} | "
                     f"{run.fmt_time(r['primal_s'])} | {run.fmt_time(r['grad_s'])} | "
                     f"{r['grad_over_primal']:.1f}x | {ref} |")
    return "\n".join(lines)


def goals(rows: list) -> tuple:
    """The issue's goals on this run: (lines of text, {goal: met})."""
    suite = {}
    for r in rows:
        if r["family"] == "suite":
            suite[r["form"]] = max(suite.get(r["form"], 0.0), r["grad_over_primal"])
    scalar = sorted(suite.values())
    variants = [r for r in rows if "over_reference" in r and
                r["family"] not in ("tiny", "tiny derivatives")]
    worst_variant = max(variants, key=lambda r: r["over_reference"])
    tiny = [r for r in rows if r["family"] == "tiny" and r["call"] == "value_and_grad"]
    derivatives = [r for r in rows if r["family"] == "tiny derivatives" and
                   "over_reference" in r]
    worst_derivative = max(derivatives, key=lambda r: r["over_reference"])
    met = {"median grad/primal <= 5x": statistics.median(scalar) <= 5.0,
           "worst grad/primal <= 10x": max(scalar) <= 10.0,
           "every variant within 1.5x of its first form":
               worst_variant["over_reference"] <= 1.5,
           "tiny function's value_and_grad within 5x": tiny[0]["grad_over_primal"] <= 5.0,
           "tiny function's jacfwd, jacrev and hessian within 5x of its grad":
               worst_derivative["over_reference"] <= 5.0}
    text = [f"suite's scalar programs (worst size of each): median "
            f"{statistics.median(scalar):.1f}x, worst {max(scalar):.1f}x "
            f"({max(suite, key=suite.get)})",
            f"variants: the farthest from its first form is {worst_variant['family']} / "
            f"{worst_variant['form']} ({worst_variant['size']}) at "
            f"{worst_variant['over_reference']:.2f}x",
            f"tiny function: value_and_grad {tiny[0]['grad_over_primal']:.1f}x its primal",
            f"tiny function: {worst_derivative['form']} "
            f"{worst_derivative['over_reference']:.1f}x its grad (the farthest)"]
    text += [f"  [{'met' if ok else 'MISSED'}] {goal}" for goal, ok in met.items()]
    return text, met


# -- instruction counts (valgrind --tool=callgrind: repeatable on a busy machine) ----------
def _child(index: int, kind: str, reps: int, quick: bool) -> None:
    form = (forms(quick) + _suite_forms(quick))[index]
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    if kind == "primal":
        fn = form.primal
    else:
        ad = form.fn if form.decorated else astad.reverse_diff(form.fn)
        fn = _call(form, ad)
    fn(*form.args)  # warm: transformed, specialised, caches filled

    def calls(n):
        for _ in range(n):
            fn(*form.args)
    sys.call_tracing(calls, (reps,))  # (callgrind counts only inside call_tracing)


def _suite_forms(quick: bool) -> list:
    out = []
    for case in programs.make_cases(quick=quick):
        form = Form("suite", case.program, case.ad, case.args, case.size_label)
        form.primal, form.decorated = case.primal, case.ad_is_decorated
        out.append(form)
    return out


def _instructions(index, kind, reps, quick) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                        "--toggle-collect=sys_call_tracing*", f"--callgrind-out-file={out}",
                        sys.executable, os.path.abspath(__file__), "--child", str(index),
                        kind, str(reps)] + (["--quick"] if quick else []),
                       check=True, capture_output=True,
                       env=dict(os.environ, PYTHONHASHSEED="0"))
        text = open(out).read()
    total = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
    return int(total.group(1)) / reps


def callgrind(rows: list, quick: bool, only: list) -> None:
    """Instructions per call of the primal and of astad, for each row (in the order
    forms() and the suite make them)."""
    for k, (form, row) in enumerate(zip(forms(quick) + _suite_forms(quick), rows)):
        if only and not any(o in f"{form.family} {form.name} {form.size}" for o in only):
            continue
        reps = 3 if row["primal_s"] > 1e-4 else 100
        primal = _instructions(k, "primal", reps, quick)
        grad = _instructions(k, "grad", reps, quick)
        row["instructions"] = {"primal": primal, "astad": grad, "ratio": grad / primal}
        print(f"  {form.family:10s} {form.name:38s} {form.size:8s} primal {primal:12.0f}"
              f"  astad {grad:12.0f}  {grad / primal:5.1f}x", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, shorter samples")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--target", type=float, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-suite", action="store_true",
                    help="only the variants, not the suite's programs")
    ap.add_argument("--callgrind", action="store_true",
                    help="also count instructions per call under valgrind (slow)")
    ap.add_argument("--only", action="append", default=None,
                    help="with --callgrind: only forms whose family or name has this")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(int(args.child[0]), args.child[1], int(args.child[2]), args.quick)
        return 0
    samples = args.samples or (3 if args.quick else 7)
    target = args.target or (0.005 if args.quick else 0.02)
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    rows = []
    for form in forms(args.quick):
        row = bench_form(form, samples, target)
        rows.append(row)
        print(f"  {form.family:10s} {form.name:38s} {form.size:8s} {row['path']:14s} "
              f"{row['grad_over_primal']:6.1f}x", flush=True)
    if not args.no_suite:
        for row in bench_suite(samples, target, args.quick):
            rows.append(row)
            print(f"  suite      {row['form']:38s} {row['size']:8s} {row['path']:14s} "
                  f"{row['grad_over_primal']:6.1f}x", flush=True)
    with_references(rows)
    print("\n" + table(rows))
    result = {"benchmark": "astad on the same computations written in different forms, and "
                           "on the suite's scalar programs",
              "mode": "quick" if args.quick else "full", "environment": run.environment(),
              "settings": {"samples": samples, "target_sample_seconds": target,
                           "statistic": "median", "interleaved": True}, "rows": rows}
    if not args.no_suite:
        text, met = goals(rows)
        print("\nGoals (issue 15):\n" + "\n".join(text))
        result["goals"] = met
    if args.callgrind:
        print("\nInstructions per call (valgrind --tool=callgrind):")
        callgrind(rows, args.quick, args.only)
    out = args.out or os.path.join(_HERE, "results", "variants-quick.json" if args.quick
                                   else "variants.json")
    run.write_json(result, out)
    print(f"\nJSON written to {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
