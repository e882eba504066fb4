"""A task's cost when its function travels by value, against by reference (issue 27,
item 2): what a Dask or joblib worker does for each task of a function defined in a
notebook or in ``__main__`` (cloudpickle sends it by value, and each task unpickles a new
function with globals of its own), against one defined in a module the worker imports.

    python benchmarks/by_value.py        # about 10 s

A task is: unpickle the decorated function, then one ``.grad`` (a loop over 20 floats
calling a helper). Medians of interleaved samples, in this process (the worker's side;
the pickles are made once, as a client makes them), beside what a task cost when each
wrote the code again. By value a task also pays for cloudpickle rebuilding the function
and its globals (about 45 us here), which by reference it does not: the goal, no code
written again, shows as the last column against the others. Writes
benchmarks/results/by_value.json and by_value.md.
"""
from __future__ import annotations

import argparse
import linecache
import os
import pickle
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for path in (_ROOT, _HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import cloudpickle  # noqa: E402

from small_arrays import interleaved, save_rows  # noqa: E402

# one model, run twice: as a "notebook cell" (its source only in this process's linecache,
# as a notebook's is; its module __main__: by value) and in this importable module
_CELL = '''\
import math
import astad

RATE = 0.3

def damping(t, c):
    return math.exp(-c * t)

@astad.reverse_diff
def response(a, c, ts):
    s = 0.0
    for t in ts:
        s += a * damping(t, c) * math.cos(RATE * t)
    return s
'''


def _run_cell(filename: str, namespace: dict) -> None:
    linecache.cache[filename] = (len(_CELL), None, _CELL.splitlines(True), filename)
    exec(compile(_CELL, filename, "exec"), namespace)  # noqa: S102 (our own source)


def notebook_function():
    namespace = {"__name__": "__main__"}
    _run_cell("<astad-benchmark-cell-1>", namespace)
    return namespace["response"]


# the same cell run in this module: its functions importable by name (by reference)
_run_cell("<astad-benchmark-module>", globals())


ARGS = (1.3, 0.4, [0.05 * k for k in range(20)])


def task(blob):
    return pickle.loads(blob).grad(*ARGS)


def task_written_again(blob):
    """What a task cost before a function of other globals could take the code written
    for one of equal globals: the code written again in every task."""
    from astad.compile.entry import BY_CODE
    BY_CODE.clear()
    return task(blob)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.02, help="seconds per sample")
    ap.add_argument("--out", default=os.path.join(_HERE, "results", "by_value.json"))
    args = ap.parse_args(argv)
    start_load = os.getloadavg()[0]
    by_value = cloudpickle.dumps(notebook_function())
    import by_value as importable  # (this module by its name: pickled by reference)
    by_reference = cloudpickle.dumps(importable.response)
    assert b"damping" in by_value and len(by_reference) < len(by_value) / 4
    if task(by_value) != task(by_reference):
        raise SystemExit("by value and by reference give different gradients")
    medians = interleaved({"reference": lambda: task(by_reference),
                           "value": lambda: task(by_value),
                           "again": lambda: task_written_again(by_value)},
                          args.samples, args.target)
    rows = [{"pair": "a task: unpickle, one .grad", "by_reference_s": medians["reference"],
             "by_value_s": medians["value"], "written_again_s": medians["again"],
             "value_over_reference": medians["value"] / medians["reference"]}]
    text = "\n".join(["| pair | by reference | by value | value / reference | by value, "
                      "the code written again each task (before) |",
                      "|---|--:|--:|--:|--:|"] + [
        f"| {r['pair']} | {r['by_reference_s'] * 1e6:.1f} us | {r['by_value_s'] * 1e6:.1f} us"
        f" | {r['value_over_reference']:.2f}x | {r['written_again_s'] * 1e6:.0f} us |"
        for r in rows])
    print(text)
    save_rows(args.out, rows, text, args, start_load)


if __name__ == "__main__":
    main()
