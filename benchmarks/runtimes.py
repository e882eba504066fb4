"""The compiled sweep against the Python sweep, side by side in one run.

For each scalar program of programs.py, interleaved in one process (medians):

- the primal;
- astad's ``value_and_grad`` with the compiled sweep (astad/runtime/_native.c);
- the same with the Python sweep (tape.py, what ``ASTAD_RUNTIME=python`` runs);
- the same with the sweep replaced by freeing the tape: the forward pass, recording the
  tape, freeing it and building the gradient's structure, no backward work.

The sweep's share is then ``grad - no sweep``. Both runtimes' gradients are checked to
be identical first. With ``--callgrind`` it also counts instructions per call under
valgrind (repeatable on a busy machine, unlike time) for the same four variants, and
lists where the compiled runtime's instructions go, function by function.

    python benchmarks/runtimes.py                 # about 2 minutes
    python benchmarks/runtimes.py --quick         # about 30 s
    python benchmarks/runtimes.py --callgrind     # and instruction counts, about 25 minutes
    python benchmarks/runtimes.py --callgrind-only

Writes benchmarks/results/runtimes.json (runtimes-quick.json with --quick) and, with
--callgrind, runtimes-callgrind.json.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import types

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _path in (_ROOT, _HERE):  # the astad of this checkout, then the benchmark modules
    if _path not in sys.path:
        sys.path.insert(0, _path)

import astad  # noqa: E402
import astad.api.diff  # noqa: E402
import programs  # noqa: E402
import run  # noqa: E402
from astad.runtime import tape as runtime  # noqa: E402

VARIANTS = ("primal", "native", "python", "no sweep")
CALLGRIND_CASES = ("dot[n=10000]", "sum_matvec[100x100]", "projectile[dt=0.01]",
                   "kepler[n=50]", "chain[depth=1000]", "fanout[levels=12]")


def _python_sweeps():
    sweep, sweep_and_free, sweep_flat = runtime.python_sweeps
    # tape.py's sweep_and_free calls the module's `sweep`, the compiled one when in use
    pure_sweep_and_free = types.FunctionType(sweep_and_free.__code__,
                                             {**vars(runtime), "sweep": sweep})
    return pure_sweep_and_free, sweep_flat


def _free_only_flat(tape, width, adjoint, first):
    tape.clear()


def _use_float_tape(make, adjoints):
    """The code for floats' tape (``ad.float_tape()``) and its sweep."""
    from astad.registry import ad
    ad.float_tape = runtime.float_tape = make
    runtime.float_adjoints = adjoints


def _free_only_adjoints(tape, width, seed, first, last):
    adjoint = [0.0] * first
    if seed < first:
        adjoint[seed] = 1.0
    tape.clear()
    return adjoint


def _free_only(tape, adjoint, first, arrays):
    tape.clear()


def use_runtime(kind):
    """Make value_and_grad sweep with ``kind``: the names it looks up at each call are
    ad.float_tape and tape.float_adjoints (the code for floats: C arrays on the native
    runtime, a list swept by tape.sweep_flat on the Python one) and api.sweep_and_free
    (the tape of duals)."""
    if kind == "native":
        native = runtime.native
        runtime.sweep_flat, astad.api.diff.sweep_and_free = native.sweep_flat, native.sweep_and_free
        _use_float_tape(native.FloatTape, native.float_adjoints)
    elif kind == "python":
        astad.api.diff.sweep_and_free, runtime.sweep_flat = _python_sweeps()
        _use_float_tape(*runtime.python_float_tape)
    elif kind == "no sweep":
        runtime.sweep_flat, astad.api.diff.sweep_and_free = _free_only_flat, _free_only
        _use_float_tape(runtime.FlatTape, _free_only_adjoints)
    else:
        raise ValueError(kind)


def sweep_kind(case, ad):
    """Which tape one value_and_grad call sweeps, and how many entries."""
    seen = []
    flat, dual = runtime.float_adjoints, astad.api.diff.sweep_and_free

    def counting_flat(tape, width, seed, first, last):
        seen.append(("flat tape", len(tape) // (2 * width)))
        return flat(tape, width, seed, first, last)

    def counting(tape, adjoint, first, arrays):
        seen.append(("dual tape", len(tape) - first))
        dual(tape, adjoint, first, arrays)

    runtime.float_adjoints, astad.api.diff.sweep_and_free = counting_flat, counting
    try:
        ad.value_and_grad(*case.args)
    finally:
        runtime.float_adjoints, astad.api.diff.sweep_and_free = flat, dual
    return seen[0] if seen else ("no tape", 0)


def check_same_gradients(case, ad):
    results = {}
    for kind in ("native", "python"):
        use_runtime(kind)
        results[kind] = repr(ad.value_and_grad(*case.args))
    use_runtime("native")
    if results["native"] != results["python"]:
        raise run.BenchmarkError(f"{case.name}: the compiled and the Python sweep disagree")


def time_runtimes(case, ad, samples, target):
    """Interleaved medians of the four variants (seconds per call)."""
    runners = {}
    for kind in VARIANTS:
        fn = case.primal if kind == "primal" else ad.value_and_grad
        runners[kind] = run._make_runner(fn, case.args)
    numbers = {}
    for kind in VARIANTS:
        if kind != "primal":
            use_runtime(kind)
        numbers[kind] = run.calibrate(runners[kind], target)
    out = {kind: [] for kind in VARIANTS}
    for _ in range(samples):
        for kind in VARIANTS:
            if kind != "primal":
                use_runtime(kind)
            out[kind].append(runners[kind](numbers[kind]) / numbers[kind])
    use_runtime("native")
    return {kind: {"median": statistics.median(v), "samples": v, "number": numbers[kind]}
            for kind, v in out.items()}


def bench(cases, samples, target):
    rows = []
    for case in cases:
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
        run.check_case(case, ad)
        check_same_gradients(case, ad)
        path, entries = sweep_kind(case, ad)
        t = time_runtimes(case, ad, samples, target)
        m = {kind: t[kind]["median"] for kind in VARIANTS}
        row = {"program": case.program, "size_label": case.size_label, "name": case.name,
               "path": path, "swept_entries": entries,
               "primal_s": m["primal"], "native_s": m["native"], "python_s": m["python"],
               "no_sweep_s": m["no sweep"],
               "native_over_primal": m["native"] / m["primal"],
               "python_over_primal": m["python"] / m["primal"],
               "no_sweep_over_primal": m["no sweep"] / m["primal"],
               "python_over_native": m["python"] / m["native"], "timings": t}
        for kind in ("native", "python"):
            sweep_s = m[kind] - m["no sweep"]
            row[f"{kind}_sweep_share"] = sweep_s / m[kind]
            row[f"{kind}_sweep_ns_per_entry"] = sweep_s * 1e9 / entries if entries else None
        rows.append(row)
        print(f"  {case.name}: {row['python_over_primal']:.1f}x -> "
              f"{row['native_over_primal']:.1f}x the primal", file=sys.stderr)
    return rows


def _ns(x):
    return "-" if x is None else f"{x:.0f}"


def table(rows):
    lines = ["| program | size | tape | entries | primal | grad, compiled sweep | grad, Python "
             "sweep | no sweep | grad / primal: compiled | Python | no sweep | sweep share: "
             "compiled | Python | sweep ns / entry: compiled | Python |",
             "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(
            f"| {r['program']} | {r['size_label'] or '-'} | {r['path']} | "
            f"{r['swept_entries']} | {run.fmt_time(r['primal_s'])} | "
            f"{run.fmt_time(r['native_s'])} | {run.fmt_time(r['python_s'])} | "
            f"{run.fmt_time(r['no_sweep_s'])} | {r['native_over_primal']:.1f}x | "
            f"{r['python_over_primal']:.1f}x | {r['no_sweep_over_primal']:.1f}x | "
            f"{r['native_sweep_share']:.0%} | {r['python_sweep_share']:.0%} | "
            f"{_ns(r['native_sweep_ns_per_entry'])} | {_ns(r['python_sweep_ns_per_entry'])} |")
    return "\n".join(lines)


def summary(rows):
    """Per program the worst grad / primal over its sizes; their median and largest."""
    worst = {}
    for r in rows:
        w = worst.setdefault(r["program"], {"native": 0.0, "python": 0.0, "no sweep": 0.0})
        w["native"] = max(w["native"], r["native_over_primal"])
        w["python"] = max(w["python"], r["python_over_primal"])
        w["no sweep"] = max(w["no sweep"], r["no_sweep_over_primal"])
    out = {}
    for kind in ("native", "python", "no sweep"):
        values = [w[kind] for w in worst.values()]
        out[kind] = {"median": statistics.median(values), "largest": max(values)}
    return {"worst_per_program": worst, "over_programs": out}


# ---------------------------------------------------------------------------------------
# Instruction counts (valgrind --tool=callgrind)


def _child(name, kind, reps):
    """Run in the valgrind child: ``reps`` calls of one variant, counted (callgrind
    collects only inside sys.call_tracing, which nothing else calls)."""
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    case = next(c for c in programs.make_cases() if c.name == name)
    ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
    fn = case.primal if kind == "primal" else ad.value_and_grad
    if kind != "primal":
        use_runtime(kind)
    fn(*case.args)  # warm: transformed, specialised, caches filled

    def calls(n):
        for _ in range(n):
            fn(*case.args)

    sys.call_tracing(calls, (reps,))


_ANNOTATE_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)(?:\s+\[.*\])?$")


def _annotate(path, inclusive=False):
    """{function: instructions} from callgrind_annotate. Self costs are summed over the
    files a function's code comes from (code inlined from a header is listed apart); an
    inclusive cost is listed once per file name form, so the largest is kept."""
    args = ["callgrind_annotate", "--threshold=100", "--auto=no"] + (
        ["--inclusive=yes"] if inclusive else []) + [path]
    text = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    out = {}
    for line in text.splitlines():
        m = _ANNOTATE_LINE.match(line)
        if not m or "PROGRAM TOTALS" in line or ":" not in m.group(2) or "=>" in line:
            continue  # (a call line of annotated source, not a function's own total)
        function = m.group(2).rsplit(":", 1)[1]
        function = re.sub(r"\s*\([\d,]+x\)$", "", function)  # a call count
        function = re.sub(r"'\d+$", "", function)  # callgrind's recursion depth
        count = int(m.group(1).replace(",", ""))
        if inclusive:
            out[function] = max(out.get(function, 0), count)
        else:
            out[function] = out.get(function, 0) + count
    return out


def _total(path):
    with open(path) as fh:
        for line in fh:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def callgrind(names, reps_for):
    rows = []
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = {"name": name, "reps": reps_for(name)}
            for kind in VARIANTS:
                out = os.path.join(tmp, f"{len(rows)}-{kind.replace(' ', '_')}.out")
                subprocess.run(
                    ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                     "--toggle-collect=sys_call_tracing*", f"--callgrind-out-file={out}",
                     sys.executable, os.path.abspath(__file__), "--child", name, kind,
                     str(row["reps"])], env=env, check=True, capture_output=True)
                row[kind] = _total(out) / row["reps"]
                if kind == "native":
                    per_call = {f: n / row["reps"] for f, n in _annotate(out).items()}
                    top = sorted(per_call.items(), key=lambda kv: -kv[1])[:12]
                    row["native_top_functions"] = top
                    inclusive = _annotate(out, inclusive=True)
                    row["native_sweep"] = sum(n for f, n in inclusive.items() if f in (
                        "native_sweep", "native_sweep_flat", "native_sweep_and_free",
                        "float_adjoints")) / \
                        row["reps"]
                print(f"  {name} {kind}: {row[kind] / 1e6:.2f}M instructions per call",
                      file=sys.stderr)
            rows.append(row)
    return rows


def callgrind_tables(rows):
    lines = ["| program | primal | compiled sweep | Python sweep | no sweep | ratio to primal: "
             "compiled | Python | no sweep | compiled sweep's own share |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        p = r["primal"]
        lines.append(f"| {r['name']} | {p / 1e6:.2f}M | {r['native'] / 1e6:.2f}M | "
                     f"{r['python'] / 1e6:.2f}M | {r['no sweep'] / 1e6:.2f}M | "
                     f"{r['native'] / p:.2f}x | {r['python'] / p:.2f}x | "
                     f"{r['no sweep'] / p:.2f}x | {r['native_sweep'] / r['native']:.0%} |")
    for r in rows:
        lines += ["", f"{r['name']}, compiled sweep: instructions per call by function "
                      "(self cost, the 12 largest)", "",
                  "| function | instructions | share |", "|---|--:|--:|"]
        for function, n in r["native_top_functions"]:
            lines.append(f"| {function} | {n:,.0f} | {n / r['native']:.1%} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer samples")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--target", type=float, default=None, help="seconds per sample")
    ap.add_argument("--only", action="append", default=None, metavar="PROGRAM")
    ap.add_argument("--out", default=None)
    ap.add_argument("--callgrind", action="store_true",
                    help="also count instructions per call under valgrind")
    ap.add_argument("--callgrind-only", action="store_true",
                    help="only count instructions (no timing)")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "VARIANT", "REPS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    if runtime.RUNTIME != "native":
        raise SystemExit("the compiled sweep is not in use (not built, or ASTAD_RUNTIME="
                         "python): nothing to compare")
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    out = args.out or os.path.join(_HERE, "results", "runtimes-quick.json" if args.quick
                                   else "runtimes.json")
    environment = run.environment()
    if not args.callgrind_only:
        cases = programs.make_cases(quick=args.quick)
        if args.only:
            cases = [c for c in cases if any(o in c.name for o in args.only)]
        samples = args.samples or (3 if args.quick else 7)
        target = args.target or (0.005 if args.quick else 0.02)
        rows = bench(cases, samples, target)
        result = {"environment": environment,
                  "settings": {"samples": samples, "target_s": target},
                  "rows": rows, "summary": summary(rows)}
        print(table(rows))
        s = result["summary"]["over_programs"]
        print(f"\nworst grad / primal per program, median over programs: compiled "
              f"{s['native']['median']:.1f}x, Python {s['python']['median']:.1f}x, no sweep "
              f"{s['no sweep']['median']:.1f}x; largest: compiled "
              f"{s['native']['largest']:.1f}x, Python {s['python']['largest']:.1f}x, "
              f"no sweep {s['no sweep']['largest']:.1f}x")
        run.write_json(result, out)
        print(f"\nwrote {out}")
    if args.callgrind or args.callgrind_only:
        names = [n for n in CALLGRIND_CASES if not args.only or any(o in n for o in args.only)]
        crows = callgrind(names, _reps_for)
        print("\nInstructions per call (valgrind --tool=callgrind):\n")
        print(callgrind_tables(crows))
        cout = os.path.join(os.path.dirname(out), "runtimes-callgrind.json")
        run.write_json({"environment": environment, "rows": crows}, cout)
        print(f"\nwrote {cout}")
    return 0


def _reps_for(name):
    """Calls counted per variant: about 30 ms of them at native speed (~2 s under
    valgrind), from one timed call."""
    import time
    case = next(c for c in programs.make_cases() if c.name == name)
    ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
    ad.value_and_grad(*case.args)
    start = time.perf_counter()
    ad.value_and_grad(*case.args)
    return max(1, min(50, math.ceil(0.03 / (time.perf_counter() - start))))


if __name__ == "__main__":
    sys.exit(main())
