"""A prototype for the issue's forward pass: a tape of C arrays (benchmarks/ctape/_ctape.c),
not wired into astad, against today's flat list tape, on the dot product.

Three hand-written value-and-gradient functions of ``dot(xs, ys)``, each a copy of the
specialised code astad generates for it (``reverse_diff(dot).source``), differing only in
the tape:

- ``list tape``: today's code, a flat list extended by one tuple of (slot, partial) pairs
  per entry, swept by the compiled sweep (astad/runtime/_native.c);
- ``list tape, Python sweep``: the same swept by tape.py's sweep;
- ``C tape``: ``_record(slot, partial, ...)`` stores the pairs into C arrays and returns
  the entry's index (no tuple, no list growth, no Python object kept alive), and the sweep
  runs on C doubles;
- ``C tape, no modulo``: the same, with the element slots written ``at + i`` instead of
  ``at + i % n`` (a generator that knows ``i`` comes from ``range(len(xs))`` could).

Timed interleaved with the primal and astad's own ``value_and_grad`` (medians), counted
with valgrind where ``--callgrind`` is given, and measured for peak memory (tracemalloc).
The gradients are checked bit-identical to astad's first.

    python benchmarks/ctape.py [--quick] [--callgrind]

Writes benchmarks/results/ctape.json (ctape-quick.json with --quick).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tracemalloc

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _path in (_ROOT, _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import astad  # noqa: E402
import programs  # noqa: E402
import run  # noqa: E402
from astad.runtime import tape as runtime  # noqa: E402

SOURCE = os.path.join(_HERE, "ctape", "_ctape.c")


def build(directory: str):
    """Compile _ctape.c into ``directory`` (setuptools, as pip builds astad) and import it."""
    from setuptools import Distribution, Extension
    extension = Extension("_ctape", [SOURCE], extra_compile_args=["-ffp-contract=off"])
    command = Distribution({"ext_modules": [extension]}).get_command_obj("build_ext")
    command.build_lib = directory
    command.build_temp = os.path.join(directory, "temp")
    command.ensure_finalized()
    command.run()
    if directory not in sys.path:
        sys.path.insert(0, directory)
    import _ctape
    return _ctape


def make_functions(Tape):
    gradient_of = runtime.gradient_of

    def gradient_of_ctape(tape, value, index, sink, layout):
        """tape.gradient_of for the C tape: the arguments' slots lie below the sink."""
        if type(value) is not float:
            return None
        adjoint = tape.gradient(index, sink)
        return value, tuple([adjoint[start] if n < 0 else adjoint[start:start + n]
                             for start, n in layout])

    # the specialised code of programs.dot, as reverse_diff(dot).source shows it
    def dot_list_tape(xs, ys):
        if type(xs) is not list or not set(map(type, xs)) <= {float} or \
                type(ys) is not list or not set(map(type, ys)) <= {float}:
            return None
        _vlists = (xs, ys)
        if len(set(map(id, _vlists))) != len(_vlists):
            return None
        _vn_xs = len(xs)
        _vat_xs = 0
        _vn_ys = len(ys)
        _vat_ys = _vat_xs + _vn_xs
        _vsink = _vat_ys + _vn_ys
        _vlayout = ((_vat_xs, _vn_xs), (_vat_ys, _vn_ys))
        _tape = []
        _extend = _tape.extend
        _vlast = _vsink
        s = 0.0
        s_i = _vsink
        for i in range(len(xs)):
            _vx0 = xs[i]
            _vx1 = ys[i]
            _vt2 = _vx0 * _vx1
            _vt3 = s + _vt2
            _extend((s_i, 1.0, _vat_xs + i % _vn_xs, _vx1, _vat_ys + i % _vn_ys, _vx0))
            _vlast += 1
            s = _vt3
            s_i = _vlast
        return gradient_of(_tape, 3, s, s_i, _vsink, _vlayout)

    # the same, recording on the C tape
    def dot_ctape(xs, ys):
        if type(xs) is not list or not set(map(type, xs)) <= {float} or \
                type(ys) is not list or not set(map(type, ys)) <= {float}:
            return None
        _vlists = (xs, ys)
        if len(set(map(id, _vlists))) != len(_vlists):
            return None
        _vn_xs = len(xs)
        _vat_xs = 0
        _vn_ys = len(ys)
        _vat_ys = _vat_xs + _vn_xs
        _vsink = _vat_ys + _vn_ys
        _vlayout = ((_vat_xs, _vn_xs), (_vat_ys, _vn_ys))
        _tape = Tape(3, _vsink + 1)
        _record = _tape.record
        s = 0.0
        s_i = _vsink
        for i in range(len(xs)):
            _vx0 = xs[i]
            _vx1 = ys[i]
            _vt2 = _vx0 * _vx1
            _vt3 = s + _vt2
            s_i = _record(s_i, 1.0, _vat_xs + i % _vn_xs, _vx1, _vat_ys + i % _vn_ys, _vx0)
            s = _vt3
        return gradient_of_ctape(_tape, s, s_i, _vsink, _vlayout)

    # the same again, with what a generator could know: i runs over range(len(xs)), so it
    # is never negative and `xs[i]` succeeding means i < len(xs): no `% len` for the slot
    def dot_ctape_no_modulo(xs, ys):
        if type(xs) is not list or not set(map(type, xs)) <= {float} or \
                type(ys) is not list or not set(map(type, ys)) <= {float}:
            return None
        _vlists = (xs, ys)
        if len(set(map(id, _vlists))) != len(_vlists):
            return None
        _vn_xs = len(xs)
        _vat_xs = 0
        _vn_ys = len(ys)
        _vat_ys = _vat_xs + _vn_xs
        _vsink = _vat_ys + _vn_ys
        _vlayout = ((_vat_xs, _vn_xs), (_vat_ys, _vn_ys))
        _tape = Tape(3, _vsink + 1)
        _record = _tape.record
        s = 0.0
        s_i = _vsink
        for i in range(len(xs)):
            _vx0 = xs[i]
            _vx1 = ys[i]
            _vt2 = _vx0 * _vx1
            _vt3 = s + _vt2
            s_i = _record(s_i, 1.0, _vat_xs + i, _vx1, _vat_ys + i, _vx0)
            s = _vt3
        return gradient_of_ctape(_tape, s, s_i, _vsink, _vlayout)

    return dot_list_tape, dot_ctape, dot_ctape_no_modulo


def variants(ctape, xs, ys):
    dot_list_tape, dot_ctape, dot_ctape_no_modulo = make_functions(ctape.Tape)
    ad = astad.reverse_diff(programs.dot)
    python_flat = runtime.python_sweeps[2]

    def dot_list_tape_python_sweep(xs, ys):
        runtime.sweep_flat = python_flat  # gradient_of reads it at each call
        try:
            return dot_list_tape(xs, ys)
        finally:
            runtime.sweep_flat = runtime.native.sweep_flat

    return [("primal", programs.dot), ("astad value_and_grad", ad.value_and_grad),
            ("list tape", dot_list_tape), ("list tape, Python sweep", dot_list_tape_python_sweep),
            ("C tape", dot_ctape), ("C tape, no modulo", dot_ctape_no_modulo)]


def check(ctape, xs, ys):
    expected = repr(astad.reverse_diff(programs.dot).value_and_grad(xs, ys))
    for label, fn in variants(ctape, xs, ys)[2:]:
        if repr(fn(xs, ys)) != expected:
            raise run.BenchmarkError(f"{label}: gradient differs from astad's")


def peak_bytes(fn, xs, ys):
    fn(xs, ys)
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    result = fn(xs, ys)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    del result
    return peak


def _child(build_dir, label, n, reps):
    ctape = build(build_dir)
    xs, ys = _inputs(n)
    fn = dict(variants(ctape, xs, ys))[label]
    fn(xs, ys)

    def calls(count):
        for _ in range(count):
            fn(xs, ys)

    sys.call_tracing(calls, (reps,))  # callgrind collects inside this call only


def _inputs(n):
    import random
    rng = random.Random(12345)
    return ([rng.uniform(-1.0, 1.0) for _ in range(n)],
            [rng.uniform(-1.0, 1.0) for _ in range(n)])


def callgrind_counts(build_dir, labels, n, reps):
    counts = {}
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        for label in labels:
            out = os.path.join(tmp, "cg.out")
            subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                            "--toggle-collect=sys_call_tracing*",
                            f"--callgrind-out-file={out}", sys.executable,
                            os.path.abspath(__file__), "--child", build_dir, label, str(n),
                            str(reps)], env=env, check=True, capture_output=True)
            with open(out) as fh:
                total = next(int(line.split()[1]) for line in fh
                             if line.startswith(("summary:", "totals:")))
            counts[label] = total / reps
            print(f"  {label}: {counts[label] / 1e6:.2f}M instructions per call",
                  file=sys.stderr)
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        build_dir, label, n, reps = args.child
        _child(build_dir, label, int(n), int(reps))
        return 0
    if runtime.RUNTIME != "native":
        raise SystemExit("the compiled sweep is not in use: build astad with a C compiler")
    sizes = [100, 1000, 10_000] if args.quick else [100, 1000, 10_000, 100_000]
    samples, target = (3, 0.005) if args.quick else (9, 0.02)
    build_dir = tempfile.mkdtemp(prefix="astad-ctape-")
    ctape = build(build_dir)
    rows = []
    for n in sizes:
        xs, ys = _inputs(n)
        check(ctape, xs, ys)
        t = run.time_interleaved([(label, fn, (xs, ys)) for label, fn in
                                  variants(ctape, xs, ys)], samples, target)
        primal = t["primal"]["median"]
        row = {"n": n, "timings": t,
               "median_s": {label: v["median"] for label, v in t.items()},
               "over_primal": {label: v["median"] / primal for label, v in t.items()}}
        if n == 10_000:
            row["peak_bytes_per_entry"] = {
                label: peak_bytes(fn, xs, ys) / n for label, fn in variants(ctape, xs, ys)[2:]
                if label != "list tape, Python sweep"}
        rows.append(row)
    labels = [label for label, _ in variants(ctape, *_inputs(1))]
    lines = ["| n | " + " | ".join(labels) + " |", "|--:|" + "--:|" * len(labels)]
    for row in rows:
        cells = [f"{run.fmt_time(row['median_s'][label])}"
                 + ("" if label == "primal" else f" ({row['over_primal'][label]:.1f}x)")
                 for label in labels]
        lines.append(f"| {row['n']} | " + " | ".join(cells) + " |")
    print("Median time per call (ratio to the primal):\n")
    print("\n".join(lines))
    for row in rows:
        if "peak_bytes_per_entry" in row:
            print("\nPeak memory of one call per entry (n = 10^4, tracemalloc): " + ", ".join(
                f"{label} {b:.0f} B" for label, b in row["peak_bytes_per_entry"].items()))
    result = {"environment": run.environment(),
              "settings": {"samples": samples, "target_s": target}, "rows": rows}
    if args.callgrind:
        n = 10_000
        counts = callgrind_counts(build_dir, labels, n, 3)
        result["callgrind"] = {"n": n, "instructions_per_call": counts}
        print(f"\nInstructions per call, n = {n} (valgrind --tool=callgrind): " + ", ".join(
            f"{label} {c / 1e6:.2f}M ({c / counts['primal']:.2f}x)"
            for label, c in counts.items()))
    out = os.path.join(_HERE, "results", "ctape-quick.json" if args.quick else "ctape.json")
    run.write_json(result, out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
