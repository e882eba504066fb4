"""Two checkouts of astad side by side: instructions per call (valgrind --tool=callgrind)
and timed medians, interleaved, of the hot calls of every path.

    python benchmarks/checkouts.py BEFORE AFTER [--reps N] [--no-callgrind] [--out PATH]

BEFORE and AFTER are repository roots (a worktree of the commit before a change, and this
one): each child process puts its root first on ``sys.path``. The calls (``CALLS``) are
the paths a change to the package's structure can slow: the code specialised for floats
(loops, straight-line, dataclasses), the taped path (recursion, structured arguments),
forward mode and Hessian-vector products on floats, numpy on small arrays, an MLP, a
Jacobian, a pullback, numpy's element-wise functions on 1e3 and 1e5 elements, and
small_arrays.py's logsumexp of 2,500 elements, softmax cross-entropy and MLP layer. Instruction
counts are repeatable whatever else the machine does; the times (medians of interleaved
samples) show the same in seconds. Writes a table and ``benchmarks/results/checkouts.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CALLS = ["dot_loop", "rotate_floats", "rotate_dataclass", "chain_taped", "structured",
         "jvp_floats", "hvp_floats", "numpy_small", "mlp", "jacrev", "vjp_pullback",
         "elementwise_1e3", "elementwise_1e5", "logsumexp_2500", "softmax_xent",
         "mlp_layer"]


def make(name):
    """A zero-argument callable running one hot call, set up and warmed."""
    import math

    import numpy as np

    import astad
    import programs
    cases = {c.name: c for c in programs.make_cases()}
    if name == "dot_loop":
        case = cases["dot[n=1000]"]
        g, args = astad.reverse_diff(case.ad).value_and_grad, case.args
    elif name in ("rotate_floats", "rotate_dataclass"):
        case = cases["rotate_vec_by_quat" if name == "rotate_floats" else
                     "rotate_vec_by_quat_dataclass"]
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
        g, args = ad.value_and_grad, case.args
    elif name == "chain_taped":
        programs.ensure_recursion_limit(programs.CHAIN_DEPTH)
        case = cases[f"chain[depth={programs.CHAIN_DEPTH}]"]
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
        g, args = ad.value_and_grad, case.args
    elif name == "structured":
        from checkout_programs import Layer, structured
        layers = [Layer([0.1 * k for k in range(6)], 0.5) for _ in range(5)]
        g, args = astad.grad(structured, argnums=(0, 1)), (layers, {"a": 1.0, "b": (2.0, 3)})
    elif name == "jvp_floats":
        case = cases["rotate_vec_by_quat"]
        fun = case.primal
        tangents = tuple(1.0 for _ in case.args)
        call = (lambda: astad.jvp(fun, case.args, tangents))
        call()
        return call
    elif name == "hvp_floats":
        case = cases["rotate_vec_by_quat"]
        grad = astad.grad(case.primal, argnums=tuple(range(len(case.args))))
        tangents = tuple(1.0 for _ in case.args)
        call = (lambda: astad.jvp(grad, case.args, tangents))
        call()
        return call
    elif name == "numpy_small":
        from checkout_programs import small_chain
        g, args = astad.grad(small_chain), (np.array([0.1, 0.2, 0.3]),)
    elif name == "mlp":
        from checkout_programs import W1, X, mlp
        g, args = astad.grad(mlp), (W1, X)
    elif name in ("elementwise_1e3", "elementwise_1e5"):
        import checkout_programs as cp
        x = cp.ELEMENTWISE_SMALL if name.endswith("1e3") else cp.ELEMENTWISE_LARGE
        g, args = astad.grad(cp.elementwise), (x,)
    elif name in ("logsumexp_2500", "softmax_xent", "mlp_layer"):
        import small_arrays  # (small and medium arrays: fixed costs per call and operation)
        row = {"logsumexp_2500": 1, "softmax_xent": 2, "mlp_layer": 4}[name]
        _, fun, args, argnums, _ = small_arrays.cases()[row]
        g = astad.grad(fun, argnums=argnums)
    elif name == "jacrev":
        from checkout_programs import vector_field
        g, args = astad.jacrev(vector_field), (np.array([0.3, 0.5, 0.7, 0.9]),)
    elif name == "vjp_pullback":
        case = cases["fanout[levels=12]"]
        ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)

        def call():
            value, pullback = ad.vjp(*case.args)
            return pullback(math.pi)
        call()
        return call
    else:
        raise KeyError(name)
    g(*args)  # warm: transformed, specialised, caches filled
    return lambda: g(*args)


def child(root, name, reps, counted):
    sys.path[:0] = [root, os.path.join(root, "benchmarks"), HERE]
    call = make(name)
    import astad
    if not os.path.abspath(astad.__file__).startswith(os.path.abspath(root) + os.sep):
        raise RuntimeError(f"astad came from {astad.__file__}, not {root}")

    def calls(n):
        for _ in range(n):
            call()
    if counted:
        sys.call_tracing(calls, (reps,))  # (callgrind collects inside it only)
        return
    calls(reps)  # warm: allocator, branch caches, the interpreter's specialisation
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        calls(reps)
        samples.append((time.perf_counter() - start) / reps)
    print(json.dumps(samples))


def _total(path):
    with open(path) as fh:
        for line in fh:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def counted(root, name, reps, tmp):
    out = os.path.join(tmp, f"{name}-{abs(hash(root))}.out")
    subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                    "--toggle-collect=sys_call_tracing*", f"--callgrind-out-file={out}",
                    sys.executable, __file__, "--child", root, name, str(reps), "counted"],
                   env=dict(os.environ, PYTHONHASHSEED="0"), check=True, capture_output=True)
    return _total(out) / reps


def timed(root, name, reps):
    done = subprocess.run([sys.executable, __file__, "--child", root, name, str(reps),
                           "timed"], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--only", action="append")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "checkouts.json"))
    args = ap.parse_args(argv)
    names = [n for n in CALLS if not args.only or any(o in n for o in args.only)]
    roots = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = {"call": name}
            if not args.no_callgrind:
                for side, root in roots.items():
                    row[f"{side}_instructions"] = counted(root, name, max(args.reps // 10, 5),
                                                          tmp)
            samples = {"before": [], "after": []}
            for _ in range(args.rounds):  # interleaved: before, after, before, after...
                for side, root in roots.items():
                    samples[side] += timed(root, name, args.reps)
            for side in roots:
                row[f"{side}_s"] = statistics.median(samples[side])
            rows.append(row)
            print(_line(row), file=sys.stderr)
    table = _table(rows, not args.no_callgrind)
    print(table)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"before": roots["before"], "after": roots["after"], "rows": rows}, fh,
                  indent=1)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
        fh.write(table + "\n")


def _line(row):
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in row.items())


def _table(rows, instructions: bool):
    head = "| call | " + ("instructions before | after | after / before | "
                          if instructions else "") + "time before | after | after / before |"
    lines = [head, "|---|" + ("--:|" * 3 if instructions else "") + "--:|--:|--:|"]
    for r in rows:
        cells = [r["call"]]
        if instructions:
            cells += [f"{r['before_instructions']:,.0f}", f"{r['after_instructions']:,.0f}",
                      f"{r['after_instructions'] / r['before_instructions']:.3f}"]
        cells += [f"{r['before_s'] * 1e6:.2f} us", f"{r['after_s'] * 1e6:.2f} us",
                  f"{r['after_s'] / r['before_s']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "counted")
    else:
        main()
