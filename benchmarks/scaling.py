"""Scaling: time against problem size (n, 2n, 4n, 8n) for astad and the peers.

Run from the repository root:

    python benchmarks/scaling.py            # about a minute
    python benchmarks/scaling.py --quick    # smoke run

For each scalable program (dot: length n; sum_matvec: n x n; chain: recursion depth n;
kepler: n Newton solves) it checks and times the primal, astad's value_and_grad, the
hand-written gradient and every installed peer exactly as run.py does (same checks,
interleaved samples, medians; a peer that would be too slow at a size is skipped and
said so), then prints the time per call and the growth factor time(2n) / time(n) of
every column. Linear-time reverse AD gives a factor of about 2 (about 4 for sum_matvec,
whose work grows as n^2). It writes benchmarks/results/scaling.json and, if matplotlib
is installed, benchmarks/results/scaling.png (time against n, log-log).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_ROOT, _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import run  # noqa: E402  (benchmarks/run.py: checks, timing, tables)

FULL_BASE = {"dot": 250, "sum_matvec": 10, "chain": 125, "kepler": 10}
QUICK_BASE = {"dot": 100, "sum_matvec": 5, "chain": 50, "kepler": 5}
STEPS = 4   # n, 2n, 4n, 8n
EXPECTED_GROWTH = {"dot": 2, "sum_matvec": 4, "chain": 2, "kepler": 2}


def _columns(peer_list):
    cols = [("primal", "primal"), ("astad", "astad grad"), ("hand", "hand-written")]
    cols += [(p.key, p.label) for p in peer_list]
    cols += [(p.key + ":compile", p.label + " compile") for p in peer_list if p.compiles]
    return cols


def _value(row, col):
    """Seconds for a column of a run.py row, or None (with the row's status)."""
    if col == "primal":
        return row.get("primal_s")
    if col == "astad":
        return row.get("grad_s")
    if col == "hand":
        return row.get("hand_s")
    if col.endswith(":compile"):
        e = row["peers"][col.split(":")[0]]
        return e.get("compile_s") if e.get("status") == "ok" else None
    e = row["peers"][col]
    return e.get("median_s") if e.get("status") == "ok" else None


def _status(row, col):
    if col in ("primal", "astad", "hand"):
        return "-"
    e = row["peers"][col.split(":")[0]]
    return e.get("status", "-")


def tables(program, rows, peer_list, notes):
    cols = _columns(peer_list)
    head = ["n"] + [label for _, label in cols]
    lines = [f"### {program}: time per call", "",
             "| " + " | ".join(head) + " |", "|--:|" + "--:|" * len(cols)]
    for r in rows:
        cells = [str(r["size"])]
        for col, _ in cols:
            v = _value(r, col)
            if v is not None:
                cells.append(run.fmt_time(v))
            else:
                st = _status(r, col)
                if st in ("-", "not installed"):
                    cells.append(st)
                else:
                    e = r["peers"][col.split(":")[0]]
                    cells.append(f"{st} [{notes.ref(e.get('reason', ''))}]")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"### {program}: growth factor time(2n) / time(n) "
                  f"(linear in the work: {EXPECTED_GROWTH[program]})", "",
              "| n -> 2n | " + " | ".join(label for _, label in cols) + " |",
              "|---|" + "--:|" * len(cols)]
    for a, b in zip(rows, rows[1:]):
        cells = [f"{a['size']} -> {b['size']}"]
        for col, _ in cols:
            va, vb = _value(a, col), _value(b, col)
            cells.append(f"{vb / va:.2f}" if va and vb else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def growth(rows, col):
    out = []
    for a, b in zip(rows, rows[1:]):
        va, vb = _value(a, col), _value(b, col)
        out.append(vb / va if va and vb else None)
    return out


def plot(results, peer_list, path):
    """Time against n (log-log), one panel per program. Returns the path, or None if
    matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return None
    programs = list(results)
    fig, axes = plt.subplots(1, len(programs), figsize=(4.2 * len(programs), 4.0),
                             squeeze=False)
    cols = [c for c in _columns(peer_list) if c[0] != "hand"]
    styles = {"primal": dict(color="0.5", linestyle=":"),
              "astad": dict(color="black", linewidth=2.5),
              "autograd": dict(color="C0"), "torch": dict(color="C1"),
              "jax": dict(color="C2"), "jax_jit": dict(color="C3"),
              "jax_jit:compile": dict(color="C3", linestyle="--", alpha=0.6)}
    for ax, program in zip(axes[0], programs):
        rows = results[program]
        for col, label in cols:
            pts = [(r["size"], _value(r, col)) for r in rows]
            pts = [(n, v) for n, v in pts if v is not None]
            if not pts:
                continue
            style = styles.get(col, dict(linestyle="--" if col.endswith(":compile")
                                         else "-"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                    **style)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        xlabel = {"dot": "n (list length)", "sum_matvec": "n (n x n matrix)",
                  "chain": "recursion depth n", "kepler": "n (Newton solves)"}[program]
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds per call")
        ax.set_title(program)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("value and gradient: time per call against n\n"
                 "(a missing point: skipped as too slow, or not applicable)", fontsize=10)
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, shorter samples")
    ap.add_argument("--peers", default="all",
                    help="all (default), none, or a comma-separated list of peers")
    ap.add_argument("--only", action="append", default=None, metavar="PROGRAM",
                    help="only these programs (dot, sum_matvec, chain, kepler)")
    ap.add_argument("--samples", type=int, default=None, help="default 3")
    ap.add_argument("--target", type=float, default=None,
                    help="seconds per sample (default 0.02, 0.005 with --quick)")
    ap.add_argument("--max-call", type=float, default=None,
                    help="skip a peer whose call is (estimated) longer (default 1 s, "
                         "0.2 s with --quick)")
    ap.add_argument("--max-compile", type=float, default=None,
                    help="skip jax jit where compiling is estimated longer (default 8 s, "
                         "1.5 s with --quick)")
    ap.add_argument("--out", default=None,
                    help="JSON path (default benchmarks/results/scaling.json, "
                         "scaling-quick.json with --quick)")
    ap.add_argument("--plot", default=None,
                    help="PNG path (default benchmarks/results/scaling.png, "
                         "scaling-quick.png with --quick)")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)

    import programs
    import peers as peers_mod
    base = QUICK_BASE if args.quick else FULL_BASE
    samples = args.samples or 3
    target = args.target or (0.005 if args.quick else 0.02)
    limits = {"call": args.max_call or (0.2 if args.quick else 1.0),
              "compile": args.max_compile or (1.5 if args.quick else 8.0),
              "slow": 0.2, "rtol": 1e-6}
    suffix = "-quick" if args.quick else ""
    out = args.out or os.path.join(_HERE, "results", f"scaling{suffix}.json")
    png = args.plot or os.path.join(_HERE, "results", f"scaling{suffix}.png")
    peer_list = peers_mod.make_peers(run.parse_peers(args.peers))
    for p in peer_list:
        d = p.describe()
        print(f"  peer {p.label:<12} " + (d["version"] if d["available"] else d["reason"]),
              flush=True)
    run.freeze_imported_objects()
    names = [p for p in programs.SCALABLE if not args.only or p in args.only]
    programs.ensure_recursion_limit(base["chain"] * 2 ** (STEPS - 1))

    t_start = time.perf_counter()
    ladder = run.Ladder()
    results = {}
    failures = []
    for program in names:
        rows = []
        rng = random.Random(12345)
        for k in range(STEPS):
            n = base[program] * 2 ** k
            case = programs.make_case(program, n, rng)
            try:
                row = run.bench_case_peers(case, peer_list, samples, target, limits, ladder)
            except run.BenchmarkError as exc:
                print(f"\nFAILED {case.name}:\n{exc}\n", file=sys.stderr)
                failures.append(f"{case.name}: {exc}")
                break
            rows.append(row)
            failures += [f"{case.name} / {e['label']}: {e['reason']}"
                         for e in row["peers"].values() if e.get("status") == "failed"]
            print(f"  {case.name:<24} astad {run.fmt_time(row['grad_s']):>10}  | "
                  + run._peer_progress(row, peer_list)
                  + f"  ({time.perf_counter() - t_start:.0f} s)", flush=True)
        results[program] = rows

    notes = run._Notes()
    print()
    for program, rows in results.items():
        if rows:
            print(tables(program, rows, peer_list, notes))
            print()
    for line in notes.lines():
        print(line)
    total = time.perf_counter() - t_start

    summary = {program: {col: growth(rows, col) for col, _ in _columns(peer_list)}
               for program, rows in results.items()}
    result = {
        "benchmark": "astad scaling: time against n, 2n, 4n, 8n (astad and peers)",
        "mode": "quick" if args.quick else "full",
        "environment": run.environment(),
        "settings": {"samples": samples, "target_sample_seconds": target,
                     "max_call_seconds": limits["call"],
                     "max_compile_seconds": limits["compile"],
                     "base_sizes": base, "steps": STEPS, "statistic": "median",
                     "interleaved": True},
        "peers": {p.key: p.describe() for p in peer_list},
        "total_seconds": total,
        "results": results,
        "growth_factors": summary,
        "expected_growth_if_linear_in_work": EXPECTED_GROWTH,
        "notes": notes.lines(),
        "failures": failures,
    }
    run.write_json(result, out)
    print(f"\n{total:.1f} s; JSON written to {os.path.relpath(out)}")
    if not args.no_plot:
        made = plot(results, peer_list, png)
        print(f"plot written to {os.path.relpath(made)}" if made
              else "matplotlib is not installed: no plot")
    if failures:
        print("\nFAILURES:\n  " + "\n  ".join(failures), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
