"""Memory of astad's tape: bytes per recorded operation, measured with tracemalloc.

Run from the repository root:

    python benchmarks/memory.py            # a few seconds
    python benchmarks/memory.py --quick    # smaller sizes

For dot (n = 10^3, 10^4, 10^5) and sum_matvec (n x n, n = 30, 100, 300), with
preaccumulation (the default: one tape entry per executed float statement) and with
``preaccumulate=False`` (one tape entry per primitive operation), it measures under
tracemalloc:

- ``vjp peak``: the peak of traced memory during ``f.vjp(*args)`` (forward pass with
  taping), above what was allocated before the call, divided by
  ``pullback.tape_length``: the cost of one recorded operation while the tape is built;
- ``kept``: what is still allocated after the call, while the pullback is alive (the
  tape, plus the result), per tape entry;
- ``pullback peak``: the peak during ``pullback(1.0)`` (the adjoint array, the backward
  sweep and the gradient lists), per tape entry;
- ``primal peak``: the peak during one call of the plain function, for comparison;
- ``value_and_grad peak / scalar op``: the peak of a whole ``f.value_and_grad(*args)``
  call (tape, adjoints, gradient lists) divided by the number of scalar operations the
  program executes (the entries of the ``preaccumulate=False`` tape). With every argument
  a float or a list of floats this runs the specialised code of astad/scalarloops.py.
  ``result / scalar op``: the size of what that call returns (the value, the gradient
  lists and their floats), the part of any peak that is the answer itself. It is not
  necessarily alive at the peak: a one-shot gradient frees its tape while it sweeps, so
  the peak can come as the sweep starts, before the gradients exist.

The arguments are built before tracing starts, so they are not counted. Every
measurement runs after a warm-up call (code generation and caches are not counted), in
a fresh tracemalloc session. It writes benchmarks/results/memory.json
(memory-quick.json with --quick).
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
import tracemalloc

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_ROOT, _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import run  # noqa: E402

FULL_SIZES = {"dot": [10**3, 10**4, 10**5], "sum_matvec": [30, 100, 300]}
QUICK_SIZES = {"dot": [10**3, 10**4], "sum_matvec": [30, 100]}


def _traced(fn):
    """(result, peak bytes above the start, bytes still allocated at the end)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - base, current - base


def _size(value, seen=None) -> int:
    """Bytes of a result made of tuples, lists and floats, each object counted once
    (not what tracemalloc holds after the call: that includes CPython's free lists, e.g.
    up to 2000 freed tuples of each length, which the tape's entries fill)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    total = sys.getsizeof(value)
    if isinstance(value, (list, tuple)):
        total += sum(_size(v, seen) for v in value)
    return total


def measure(case, preaccumulate):
    import astad
    f = astad.reverse_diff(preaccumulate=preaccumulate)(case.primal)
    args = case.args
    f.vjp(*args)                       # warm up: transform, compile, caches
    case.primal(*args)
    _, primal_peak, _ = _traced(lambda: case.primal(*args))
    (value, pullback), vjp_peak, kept = _traced(lambda: f.vjp(*args))
    tape = pullback.tape_length
    # the backward pass, with the pullback (and its tape) already allocated
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        grads = pullback(1.0)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    back_peak = peak - base
    del grads, pullback
    # the whole value_and_grad call: for all-float arguments this is the specialised code
    # (astad/scalarloops.py), whose tape holds slot numbers and partials but no duals
    f.value_and_grad(*args)
    result, vg_peak, _ = _traced(lambda: f.value_and_grad(*args))
    vg_result = _size(result)
    return {
        "program": case.program, "size": case.size, "size_label": case.size_label,
        "preaccumulate": preaccumulate, "tape_length": tape,
        "primal_peak_bytes": primal_peak,
        "vjp_peak_bytes": vjp_peak, "kept_bytes": kept, "pullback_peak_bytes": back_peak,
        "vjp_peak_bytes_per_entry": vjp_peak / tape if tape else None,
        "kept_bytes_per_entry": kept / tape if tape else None,
        "pullback_peak_bytes_per_entry": back_peak / tape if tape else None,
        "value_and_grad_peak_bytes": vg_peak,
        # what the call returns (the gradient lists and their floats): the answer itself
        "value_and_grad_result_bytes": vg_result,
    }


def _bytes(b):
    if b is None:
        return "-"
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b:.0f} B"


def table(rows):
    head = ("| program | size | preaccumulate | tape entries | primal peak | vjp peak "
            "| vjp peak / entry | kept / entry | pullback peak / entry "
            "| value_and_grad peak / scalar op | result / scalar op |")
    lines = [head, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        per_op = r.get("value_and_grad_peak_bytes_per_op")
        result = r.get("value_and_grad_result_bytes_per_op")
        lines.append(
            f"| {r['program']} | {r['size_label']} | {r['preaccumulate']} "
            f"| {r['tape_length']} | {_bytes(r['primal_peak_bytes'])} "
            f"| {_bytes(r['vjp_peak_bytes'])} | {r['vjp_peak_bytes_per_entry']:.0f} B "
            f"| {r['kept_bytes_per_entry']:.0f} B | {r['pullback_peak_bytes_per_entry']:.0f} B "
            f"| {'-' if per_op is None else f'{per_op:.0f} B'} "
            f"| {'-' if result is None else f'{result:.0f} B'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--out", default=None,
                    help="JSON path (default benchmarks/results/memory.json, "
                         "memory-quick.json with --quick)")
    args = ap.parse_args(argv)
    import programs
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    out = args.out or os.path.join(_HERE, "results",
                                   "memory-quick.json" if args.quick else "memory.json")
    t0 = time.perf_counter()
    rows = []
    for program, ns in sizes.items():
        for n in ns:
            case = programs.make_case(program, n, random.Random(12345))
            pair = []
            for pre in (True, False):
                r = measure(case, pre)
                rows.append(r)
                pair.append(r)
            # scalar operations executed = the entries of the one-entry-per-operation tape
            ops = pair[1]["tape_length"]
            for r in pair:
                r["scalar_ops"] = ops
                r["value_and_grad_peak_bytes_per_op"] = r["value_and_grad_peak_bytes"] / ops
                r["value_and_grad_result_bytes_per_op"] = \
                    r["value_and_grad_result_bytes"] / ops
                print(f"  {case.name:<20} preaccumulate={str(pre):<5} tape "
                      f"{r['tape_length']:>7}  vjp peak {r['vjp_peak_bytes_per_entry']:.0f} "
                      f"B/entry", flush=True)
    print()
    print(table(rows))
    total = time.perf_counter() - t0
    run.write_json({
        "benchmark": "astad tape memory per recorded operation (tracemalloc)",
        "mode": "quick" if args.quick else "full",
        "environment": run.environment(),
        "method": ("tracemalloc peak during f.vjp(*args) above the allocation before the "
                   "call, divided by pullback.tape_length; kept = allocated after the call "
                   "while the pullback is alive; pullback peak = peak during pullback(1.0); "
                   "arguments built before tracing; one warm-up call first"),
        "total_seconds": total,
        "rows": rows,
    }, out)
    print(f"\n{total:.1f} s; JSON written to {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
