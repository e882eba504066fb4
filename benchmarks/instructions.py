"""The scalar goals by instruction counts, on every Python given (issue 27).

For each scalar program of programs.py (the quick sizes), the instructions of one call of
the primal and of ``value_and_grad`` (the decorated function's, warm: transformed,
specialised, caches filled), counted by valgrind's callgrind inside ``sys.call_tracing``
alone: repeatable on a busy machine, unlike time. Then, per Python, the suite's median and
worst grad / primal (the goals: median <= 5x, worst <= 10x).

Each Python must import this checkout's astad with its compiled runtime built for it
(``python3.X setup.py build_ext --inplace`` here, or a virtualenv with the package
installed); a child reports which runtime it ran.

    python benchmarks/instructions.py                      # this interpreter, ~2 minutes
    python benchmarks/instructions.py --python /tmp/v312/bin/python --python ...

Writes benchmarks/results/instructions.json and instructions.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _path in (_ROOT, _HERE):  # the astad of this checkout, then the benchmark modules
    if _path not in sys.path:
        sys.path.insert(0, _path)

_FAST = ("scalar_mult", "rotate_vec_by_quat", "rotate_vec_by_quat_dataclass", "fanout")


def _child(reps_fast: int, reps: int) -> None:
    """In the valgrind child: for each program, ``reps`` calls of the primal, then of
    ``value_and_grad``, each inside ``sys.call_tracing`` (callgrind collects there only)
    and each followed by ``time.perf_counter()``, before which callgrind writes what it
    collected as a part of its own (``--dump-before``)."""
    import astad
    import programs
    from astad.runtime.tape import RUNTIME
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
    names = []
    for case in programs.make_cases(quick=True):
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
        n = reps_fast if case.program in _FAST else reps
        for fn in (case.primal, ad.value_and_grad):
            # warm: transformed, specialised, caches filled, and the bytecode quickened
            # (CPython 3.11 quickens a function whose loop is a ``while`` only after 8
            # calls: with 3, the projectile's primal was counted unquickened, 1.23M
            # instructions against 0.97M, flattering its ratio)
            for _ in range(10):
                fn(*case.args)

            def calls(fn=fn, args=case.args, n=n):
                for _ in range(n):
                    fn(*args)

            sys.call_tracing(calls, ())
            time.perf_counter()
        names.append((case.name, n))
    print(json.dumps({"runtime": RUNTIME, "cases": names}))


def _totals(prefix: str) -> list:
    """The totals of the parts callgrind wrote (``prefix.1``, ``prefix.2``...), in order,
    those with nothing collected left out (dumps before the first measurement)."""
    totals, k = [], 1
    while os.path.exists(f"{prefix}.{k}"):
        with open(f"{prefix}.{k}") as fh:
            total = next(int(line.split()[1]) for line in fh
                         if line.startswith(("summary:", "totals:")))
        if total:
            totals.append(total)
        k += 1
    return totals


def measure(python: str, reps_fast: int, reps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no",
             "--toggle-collect=sys_call_tracing*", "--dump-before=time_perf_counter",
             f"--callgrind-out-file={out}", python, os.path.abspath(__file__), "--child",
             str(reps_fast), str(reps)],
            env=dict(os.environ, PYTHONHASHSEED="0"), check=True, capture_output=True,
            text=True)
        told = json.loads(done.stdout.strip().splitlines()[-1])
        totals = _totals(out)
    if len(totals) != 2 * len(told["cases"]):
        raise SystemExit(f"{python}: {len(totals)} measurements for "
                         f"{len(told['cases'])} programs")
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    for k, (name, n) in enumerate(told["cases"]):
        primal, grad = totals[2 * k] / n, totals[2 * k + 1] / n
        rows.append({"program": name, "calls": n, "primal": primal, "grad": grad,
                     "ratio": grad / primal})
        print(f"  Python {version} {name}: {grad / primal:.2f}x", file=sys.stderr)
    ratios = [r["ratio"] for r in rows]
    return {"python": version, "executable": python, "runtime": told["runtime"],
            "rows": rows, "median": statistics.median(ratios), "worst": max(ratios),
            "goals_met": statistics.median(ratios) <= 5.0 and max(ratios) <= 10.0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", help="an interpreter to measure "
                    "(repeatable; default: this one)")
    ap.add_argument("--calls", type=int, default=10, help="calls counted per program "
                    "(100 times more for the smallest)")
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(_HERE, "results", "instructions.json"))
    args = ap.parse_args(argv)
    if args.child:
        return _child(*args.child)
    results = [measure(python, 100 * args.calls, args.calls)
               for python in args.python or [sys.executable]]
    programs_ = [r["program"] for r in results[0]["rows"]]
    lines = ["| program | " + " | ".join(f"Python {r['python']}" for r in results) + " |",
             "|---|" + "--:|" * len(results)]
    for k, name in enumerate(programs_):
        lines.append(f"| {name} | " + " | ".join(
            f"{r['rows'][k]['ratio']:.2f}x" for r in results) + " |")
    lines.append("| **median** | " + " | ".join(f"**{r['median']:.2f}x**" for r in results)
                 + " |")
    lines.append("| **worst** | " + " | ".join(f"**{r['worst']:.2f}x**" for r in results)
                 + " |")
    text = "\n".join(lines)
    print("grad / primal by instructions (valgrind --tool=callgrind), runtime: "
          + ", ".join(sorted({r["runtime"] for r in results})) + "\n\n" + text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": platform.platform(), "results": results}, fh, indent=1)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
        fh.write(text + "\n")
    return results


if __name__ == "__main__":
    main()
