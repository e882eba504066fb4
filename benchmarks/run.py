"""Core benchmarks for astad: primal vs astad gradient vs hand-written gradient.

Run from the repository root:

    python benchmarks/run.py            # full run (a few minutes at most)
    python benchmarks/run.py --quick    # smoke run (~20 s)

See benchmarks/README.md for what is measured and what the columns mean.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gc
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:          # use the astad of this checkout
    sys.path.insert(0, _ROOT)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

perf_counter = time.perf_counter


class BenchmarkError(Exception):
    """A program failed its gradient check or astad raised on it."""


# ---------------------------------------------------------------------------------------
# Nested float structures (args and gradients)


def _is_seq(x):
    return isinstance(x, (list, tuple))


def _leaves(x, path=()):
    """Yield (path, value) for every non-sequence leaf of a nested list/tuple."""
    if _is_seq(x):
        for k, item in enumerate(x):
            yield from _leaves(item, path + (k,))
    else:
        yield path, x


def _replace(x, path, value):
    """A copy of nested list/tuple ``x`` with the leaf at ``path`` set to ``value``
    (only the containers along the path are copied)."""
    if not path:
        return value
    k = path[0]
    items = list(x)
    items[k] = _replace(items[k], path[1:], value)
    return type(x)(items) if isinstance(x, tuple) else items


def _shape(x):
    if _is_seq(x):
        return (type(x).__name__, len(x), [_shape(i) for i in x] if x and _is_seq(x[0]) else None)
    return "leaf"


def _as_float(x):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise TypeError(f"expected a float, got {type(x).__name__}: {x!r}")


# ---------------------------------------------------------------------------------------
# Correctness checks


def _compare(label, got, want, rtol, atol, problems, limit=5):
    """Compare nested float structures; append human-readable problems."""
    if _is_seq(want):
        if not _is_seq(got):
            problems.append(f"{label}: expected a {type(want).__name__} of length {len(want)}, "
                            f"got {type(got).__name__} {_short(got)}")
            return 0.0
        if len(got) != len(want):
            problems.append(f"{label}: expected length {len(want)}, got length {len(got)}")
            return 0.0
        worst = 0.0
        for k, (g, w) in enumerate(zip(got, want)):
            worst = max(worst, _compare(f"{label}[{k}]", g, w, rtol, atol, problems, limit))
            if len(problems) >= limit:
                break
        return worst
    try:
        g = _as_float(got)
    except TypeError as exc:
        problems.append(f"{label}: {exc}")
        return 0.0
    w = float(want)
    err = abs(g - w)
    if not (err <= atol + rtol * abs(w)):       # also catches NaN
        problems.append(f"{label}: astad {g!r} vs reference {w!r} (abs err {err:.3g})")
    return err


def _short(x, n=80):
    s = repr(x)
    return s if len(s) <= n else s[:n] + "..."


def _grads_tuple(grads, nargs):
    # a single-parameter function gives the gradient alone
    return (grads,) if nargs == 1 else tuple(grads)


def _path(path):
    return "".join(f"[{k}]" for k in path)


def _fd_check(case, grads, max_leaves=8, rel_step=1e-6):
    """Central finite differences of the primal on (a sample of) the float leaves of the
    differentiated arguments; returns a list of problems."""
    problems = []
    f = case.primal
    args = case.args
    leaves = [(ai, p, v) for ai in case.wrt for p, v in _leaves(args[ai])
              if isinstance(v, float)]
    if len(leaves) > max_leaves:           # spread the sample over all arguments
        step = len(leaves) / max_leaves
        leaves = [leaves[int(k * step)] for k in range(max_leaves)]
    for ai, path, x in leaves:
        h = rel_step * max(1.0, abs(x))
        plus = list(args)
        minus = list(args)
        plus[ai] = _replace(args[ai], path, x + h)
        minus[ai] = _replace(args[ai], path, x - h)
        fd = (f(*plus) - f(*minus)) / (2 * h)
        g = grads[ai]
        for k in path:
            g = g[k]
        try:
            g = _as_float(g)
        except TypeError as exc:
            problems.append(f"grad of arg {ai}{_path(path)}: {exc}")
            continue
        scale = max(1.0, abs(fd))
        if not abs(g - fd) <= 1e-5 * scale:
            problems.append(f"grad of arg {ai}{_path(path)}: astad {g!r} vs central "
                            f"finite difference {fd!r}")
    return problems


def check_case(case, ad):
    """Check astad's value and gradient against the primal, the hand-written gradient
    and central finite differences. Raises BenchmarkError with a message on any
    disagreement or exception. Returns a dict describing the checks done."""
    info = {"checked_against": []}
    nargs = len(case.args)
    primal_value = case.primal(*case.args)
    if case.expected_value is not None and not math.isclose(
            primal_value, case.expected_value, rel_tol=1e-12, abs_tol=1e-9):
        raise BenchmarkError(f"{case.name}: primal gives {primal_value!r}, expected "
                             f"{case.expected_value!r} (benchmark definition is wrong)")
    try:
        value, grads = ad.value_and_grad(*case.args)
    except Exception as exc:
        raise BenchmarkError(f"{case.name}: astad value_and_grad raised "
                             f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
    problems = []
    _compare("value", value, primal_value, 1e-12, 1e-12, problems)
    try:
        grads = _grads_tuple(grads, nargs)
    except TypeError:
        problems.append(f"gradients: expected a tuple over {nargs} arguments, got {_short(grads)}")
        grads = None
    if grads is not None and len(grads) != nargs:
        problems.append(f"gradients: expected {nargs} entries (one per positional argument), "
                        f"got {len(grads)}: {_short(grads)}")
        grads = None
    worst = None
    if grads is not None and case.hand_grad is not None:
        ref = case.hand_grad(*case.args)
        worst = 0.0
        for ai in case.wrt:
            worst = max(worst, _compare(f"grad of arg {ai}", grads[ai], ref[ai],
                                        1e-9, 1e-12, problems))
        info["checked_against"].append("hand-written")
        info["max_abs_err_vs_hand"] = worst
        # and check the hand-written gradient itself, so a mismatch is attributable
        hand_problems = _fd_check(case, _grads_tuple(ref, nargs))
        if hand_problems:
            raise BenchmarkError(f"{case.name}: the HAND-WRITTEN gradient disagrees with "
                                 "finite differences (benchmark bug): " + "; ".join(hand_problems))
    if grads is not None:
        problems.extend(_fd_check(case, grads))
        info["checked_against"].append("central finite differences")
    if problems:
        raise BenchmarkError(f"{case.name}: astad's result disagrees with the reference:\n  "
                             + "\n  ".join(problems[:10]))
    return info


def tape_length(case, ad):
    try:
        value, pullback = ad.vjp(*case.args)
        return int(pullback.tape_length)
    except Exception as exc:
        raise BenchmarkError(f"{case.name}: astad vjp / pullback.tape_length raised "
                             f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc


# ---------------------------------------------------------------------------------------
# Timing


def _make_runner(fn, args):
    def run(number):
        it = itertools.repeat(None, number)
        t0 = perf_counter()
        for _ in it:
            fn(*args)
        return perf_counter() - t0
    return run


def calibrate(run, target):
    """Inner loop count so that one sample lasts about ``target`` seconds (at least 1)."""
    number = 1
    while True:
        t = run(number)
        if t >= target * 0.2 or number >= 10**7:
            break
        number *= 10 if t < target * 0.02 else 2
    per_call = t / number
    return max(1, math.ceil(target / per_call)) if per_call > 0 else number


def time_interleaved(variants, samples, target):
    """variants: list of (label, fn, args). Each sample times every variant once, in
    turn, so slow drifts of the machine affect all of them alike. Returns
    {label: {"median": s, "samples": [...], "number": n}} with per-call seconds."""
    runners = [(label, _make_runner(fn, args)) for label, fn, args in variants]
    numbers = {label: calibrate(run, target) for label, run in runners}
    out = {label: {"samples": [], "number": numbers[label]} for label, _ in runners}
    for _ in range(samples):
        for label, run in runners:
            n = numbers[label]
            out[label]["samples"].append(run(n) / n)
    for label in out:
        out[label]["median"] = statistics.median(out[label]["samples"])
    return out


# ---------------------------------------------------------------------------------------
# Reporting


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def markdown_table(rows):
    head = ("| program | size | primal | astad grad | hand-written grad | grad / primal "
            "| tape entries | ns / tape entry |")
    sep = "|---|---|--:|--:|--:|--:|--:|--:|"
    lines = [head, sep]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['program']} | {r['size_label'] or '-'} | FAILED: "
                         f"{r['error'].splitlines()[0][:120]} | | | | | |")
            continue
        lines.append(
            f"| {r['program']} | {r['size_label'] or '-'} | {fmt_time(r['primal_s'])} "
            f"| {fmt_time(r['grad_s'])} | {fmt_time(r['hand_s'])} "
            f"| {r['grad_over_primal']:.1f}x | {r['tape_length']} "
            f"| {r['ns_per_tape_entry']:.0f} |")
    return "\n".join(lines)


def environment():
    import astad
    env = {
        "python_version": sys.version,
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "astad_version": getattr(astad, "__version__", None),
        "gc_enabled": gc.isenabled(),
    }
    try:
        env["git_commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True,
            timeout=10).stdout.strip() or None
        env["git_dirty"] = bool(subprocess.run(
            ["git", "status", "--porcelain", "--", "astad"], cwd=_ROOT, capture_output=True,
            text=True, timeout=10).stdout.strip())
    except Exception:
        env["git_commit"] = None
    return env


# ---------------------------------------------------------------------------------------
# Main


def bench_case(case, samples, target):
    import astad
    ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
    row = {"program": case.program, "size": case.size, "size_label": case.size_label}
    row["check"] = check_case(case, ad)
    row["tape_length"] = tape_length(case, ad)
    variants = [("primal", case.primal, case.args),
                ("grad", ad.value_and_grad, case.args)]
    if case.hand_grad is not None:
        variants.append(("hand", case.hand_grad, case.args))
    t = time_interleaved(variants, samples, target)
    row["primal_s"] = t["primal"]["median"]
    row["grad_s"] = t["grad"]["median"]
    row["hand_s"] = t["hand"]["median"] if "hand" in t else None
    row["grad_over_primal"] = row["grad_s"] / row["primal_s"]
    row["grad_over_hand"] = row["grad_s"] / row["hand_s"] if row["hand_s"] else None
    tl = row["tape_length"]
    row["ns_per_tape_entry"] = row["grad_s"] * 1e9 / tl if tl else float("nan")
    row["overhead_ns_per_tape_entry"] = ((row["grad_s"] - row["primal_s"]) * 1e9 / tl
                                         if tl else float("nan"))
    row["timings"] = t
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="fast smoke run: smaller sizes, ~5 ms samples, 3 samples")
    ap.add_argument("--out", default=None,
                    help="JSON output path (default benchmarks/results/core.json, "
                         "or benchmarks/results/core-quick.json with --quick)")
    ap.add_argument("--samples", type=int, default=None,
                    help="samples per measurement (default 5, 3 with --quick)")
    ap.add_argument("--target", type=float, default=None,
                    help="target seconds per sample (default 0.02, 0.005 with --quick)")
    ap.add_argument("--only", action="append", default=None, metavar="PROGRAM",
                    help="run only programs whose name contains this (repeatable)")
    ap.add_argument("--keep-going", action="store_true",
                    help="on a failed check, record it and go on instead of aborting")
    args = ap.parse_args(argv)

    samples = args.samples or (3 if args.quick else 5)
    target = args.target or (0.005 if args.quick else 0.02)
    out = args.out or os.path.join(
        _HERE, "results", "core-quick.json" if args.quick else "core.json")

    try:
        import astad
        astad.reverse_diff
        import programs
    except Exception as exc:
        print(f"error: cannot import astad / the benchmark programs: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        return 2
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)

    cases = programs.make_cases(quick=args.quick)
    if args.only:
        cases = [c for c in cases if any(s in c.program for s in args.only)]

    t_start = perf_counter()
    rows = []
    failed = []
    aborted = None
    for case in cases:
        t0 = perf_counter()
        try:
            row = bench_case(case, samples, target)
        except BenchmarkError as exc:
            msg = str(exc)
            print(f"\nFAILED {case.name}:\n{msg}\n", file=sys.stderr)
            failed.append(case.name)
            rows.append({"program": case.program, "size": case.size,
                         "size_label": case.size_label, "error": msg})
            if not args.keep_going:
                aborted = case.name
                print("aborting: the remaining programs are not run (use --keep-going to "
                      "continue past failures)", file=sys.stderr)
                break
            continue
        rows.append(row)
        print(f"  {case.name:<32} grad/primal {row['grad_over_primal']:7.1f}x   "
              f"tape {row['tape_length']:>8}   ({perf_counter() - t0:.1f} s)", flush=True)

    table = markdown_table(rows)
    print()
    print(table)
    total = perf_counter() - t_start

    result = {
        "benchmark": "astad core (Smeding & Vakar POPL 2023, Section 10 programs + recursion)",
        "mode": "quick" if args.quick else "full",
        "environment": environment(),
        "settings": {"samples": samples, "target_sample_seconds": target,
                     "timer": "time.perf_counter", "statistic": "median",
                     "interleaved": True},
        "total_seconds": total,
        "rows": rows,
        "failed": failed,
        "aborted_at": aborted,
    }
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, out)
    print(f"\n{len(rows)} rows in {total:.1f} s; JSON written to {os.path.relpath(out)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
