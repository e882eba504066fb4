"""Decorated methods: the cost of a call through the instance and through the class, and
the recursion depth a recursive method reaches.

Run from the repository root:

    python benchmarks/methods.py

Timings: medians of 15 interleaved samples of 20 000 calls each, in one process:

- a method call, ``obj.f(x)``: undecorated, decorated (``obj.f`` binds a copy of the
  function carrying gradient functions bound to ``obj``), and ``Model.f(obj, x)`` (the
  decorated function itself);
- a gradient: ``obj.f.grad(x)``, ``Model.f.grad(obj, x)``, and the same code as a
  module-level function ``f.grad(k, x)``;
- the deepest recursion through ``self.f(n - 1)`` that runs at a recursion limit of 3000,
  undecorated and decorated (the original call, and ``.grad``).

Writes benchmarks/results/methods.json and prints a table.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import timeit
from dataclasses import dataclass

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import astad  # noqa: E402


@dataclass
class Plain:
    k: float

    def energy(self, x):
        return self.k * x * x

    def down(self, n, x):
        return x if n == 0 else self.down(n - 1, x) * 1.0


@dataclass
class Decorated:  # a dataclass: Model.f.grad(obj, x) differentiates obj.k too
    k: float

    @astad.reverse_diff
    def energy(self, x):
        return self.k * x * x

    @astad.reverse_diff
    def down(self, n, x):
        return x if n == 0 else self.down(n - 1, x) * 1.0


@astad.reverse_diff
def energy(k, x):
    return k * x * x


def medians(statements: dict, namespace: dict, number=20000, samples=15) -> dict:
    times = {name: [] for name in statements}
    for _ in range(samples):
        for name, statement in statements.items():
            times[name].append(timeit.timeit(statement, globals=namespace, number=number)
                               / number)
    return {name: statistics.median(values) for name, values in times.items()}


def deepest(call, limit=3000) -> int:
    """The largest n for which ``call(n)`` runs at this recursion limit (bisection)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        low, high = 0, limit
        while low < high:
            middle = (low + high + 1) // 2
            try:
                call(middle)
                low = middle
            except RecursionError:
                high = middle - 1
        return low
    finally:
        sys.setrecursionlimit(old)


def main():
    plain, decorated = Plain(2.0), Decorated(2.0)
    namespace = {"plain": plain, "decorated": decorated, "Decorated": Decorated,
                 "energy": energy}
    calls = medians({"obj.f(x), undecorated": "plain.energy(1.5)",
                     "obj.f(x), decorated": "decorated.energy(1.5)",
                     "Model.f(obj, x), decorated": "Decorated.energy(decorated, 1.5)"},
                    namespace)
    grads = medians({"obj.f.grad(x)": "decorated.energy.grad(1.5)",
                     "Model.f.grad(obj, x)": "Decorated.energy.grad(decorated, 1.5)",
                     "f.grad(k, x), a module-level function": "energy.grad(2.0, 1.5)"},
                    namespace, number=5000)
    depth = {"undecorated obj.down(n, x)": deepest(lambda n: plain.down(n, 1.0)),
             "decorated obj.down(n, x)": deepest(lambda n: decorated.down(n, 1.0)),
             "decorated obj.down.grad(n, x)": deepest(lambda n: decorated.down.grad(n, 1.0))}
    print(f"Python {platform.python_version()}")
    for title, table, unit in (("call", calls, "us"), ("gradient", grads, "us")):
        print(f"\n{title:<40} {'median':>10}")
        for name, seconds in table.items():
            print(f"{name:<40} {seconds * 1e6:>8.3f} {unit}")
    print(f"\n{'recursion (limit 3000)':<40} {'deepest n':>10}")
    for name, n in depth.items():
        print(f"{name:<40} {n:>10}")
    out = os.path.join(_HERE, "results", "methods.json")
    with open(out, "w") as f:
        json.dump({"python": platform.python_version(), "call_s": calls, "grad_s": grads,
                   "deepest_recursion_at_limit_3000": depth}, f, indent=2)
    print(f"\nwrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
