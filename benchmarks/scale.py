"""Scale: one gradient over 10^7 recorded operations, its time and peak memory.

Run from the repository root:

    python benchmarks/scale.py            # 10^7 tape entries per case; about a minute,
                                          # and a few GB of memory
    python benchmarks/scale.py --quick    # 10^5 entries, a few seconds

The program is a long scalar recurrence, ``s = sin(s) * 0.5 + x`` repeated n times,
whose gradient needs every entry of the tape. Two cases:

- ``fused`` (the default ``preaccumulate=True``): one tape entry per loop iteration,
  n = 10^7 iterations;
- ``unfused`` (``preaccumulate=False``): one entry per primitive operation (sin, *, +),
  n = 10^7 / 3 iterations.

Each case runs in a fresh child process, so that its peak resident memory (the kernel's
high-water mark, ``VmHWM``) belongs to it alone: the figure reported is the peak during
``f.vjp`` and the pullback, above the resident memory just before the call, and per
tape entry. The gradient is checked against the derivative of the recurrence computed
alongside it in plain floats (ds_k = 0.5 cos(s_{k-1}) ds_{k-1} + 1). Times are single
runs (a 10^7 run is long enough not to need repeats); the primal's time is measured in
the same child for the ratio. Writes benchmarks/results/scale.json (scale-quick.json
with --quick) and prints a table.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

ENTRIES_FULL = 10**7
ENTRIES_QUICK = 10**5


def recurrence(x, n):
    s = x
    for _ in range(n):
        s = math.sin(s) * 0.5 + x
    return s


def recurrence_derivative(x, n):
    """ds/dx of ``recurrence`` by forward differentiation in plain floats."""
    s, ds = x, 1.0
    for _ in range(n):
        s, ds = math.sin(s) * 0.5 + x, 0.5 * math.cos(s) * ds + 1.0
    return s, ds


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def run_case(case: str, entries: int) -> dict:
    """In the child process: one gradient, its times and peak memory."""
    import astad

    preaccumulate = case == "fused"
    n = entries if preaccumulate else -(-entries // 3)
    x = 0.3
    f = astad.reverse_diff(recurrence, argnums=0, preaccumulate=preaccumulate)
    f.grad(x, 10)                      # warm-up: code generation is not counted
    start = time.perf_counter()
    value = recurrence(x, n)
    primal_seconds = time.perf_counter() - start
    expected_value, expected_grad = recurrence_derivative(x, n)
    gc.collect()
    before_kb = _status_kb("VmRSS")
    start = time.perf_counter()
    ad_value, pullback = f.vjp(x, n)
    forward_seconds = time.perf_counter() - start
    start = time.perf_counter()
    grad = pullback(1.0)
    backward_seconds = time.perf_counter() - start
    peak_kb = _status_kb("VmHWM")
    tape_length = pullback.tape_length
    assert ad_value == value == expected_value
    assert abs(grad - expected_grad) <= 1e-9 * abs(expected_grad), (grad, expected_grad)
    peak_bytes = (peak_kb - before_kb) * 1024
    return {
        "case": case, "preaccumulate": preaccumulate, "iterations": n,
        "tape_length": tape_length, "value": value, "gradient": grad,
        "expected_gradient": expected_grad,
        "primal_seconds": primal_seconds, "forward_seconds": forward_seconds,
        "backward_seconds": backward_seconds,
        "gradient_over_primal": (forward_seconds + backward_seconds) / primal_seconds,
        "rss_before_bytes": before_kb * 1024, "peak_rss_bytes": peak_kb * 1024,
        "peak_above_start_bytes": peak_bytes,
        "peak_bytes_per_entry": peak_bytes / tape_length,
    }


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10^5 entries per case")
    parser.add_argument("--out", help="where the JSON goes")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--entries", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:  # one case, in a fresh process: print its row as JSON
        print(json.dumps(run_case(options.child, options.entries)))
        return
    entries = ENTRIES_QUICK if options.quick else ENTRIES_FULL
    rows = []
    for case in ("fused", "unfused"):
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case,
                                "--entries", str(entries)],
                               capture_output=True, text=True, cwd=_ROOT)
        if child.returncode != 0:
            raise SystemExit(f"{case} failed:\n{child.stderr}")
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    print(f"{'case':8s} {'tape entries':>13s} {'primal s':>9s} {'forward s':>10s} "
          f"{'backward s':>11s} {'grad/primal':>12s} {'peak MB':>9s} {'bytes/entry':>12s}")
    for r in rows:
        print(f"{r['case']:8s} {r['tape_length']:13,d} {r['primal_seconds']:9.2f} "
              f"{r['forward_seconds']:10.2f} {r['backward_seconds']:11.2f} "
              f"{r['gradient_over_primal']:12.1f} {r['peak_above_start_bytes'] / 2**20:9.0f} "
              f"{r['peak_bytes_per_entry']:12.0f}")
    out = options.out or os.path.join(_HERE, "results",
                                      "scale-quick.json" if options.quick else "scale.json")
    report = {
        "benchmark": "one gradient over a long tape: s = sin(s) * 0.5 + x, n times",
        "mode": "quick" if options.quick else "full",
        "environment": {"python_version": sys.version, "platform": platform.platform(),
                        "cpu_count": os.cpu_count(), "git_commit": _git_commit(),
                        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "method": "each case in a fresh child process; peak = VmHWM after vjp and pullback "
                  "minus VmRSS just before vjp (after a warm-up call and gc.collect()); "
                  "single runs; gradient checked against forward differentiation of the "
                  "recurrence in plain floats",
        "rows": rows,
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(report, handle, indent=2)
    print(f"wrote {os.path.relpath(out, _ROOT)}")


if __name__ == "__main__":
    main()
