"""Benchmarks for astad: primal vs astad gradient vs hand-written gradient vs peers.

Run from the repository root:

    python benchmarks/run.py                # full run with the peers (under ~5 minutes)
    python benchmarks/run.py --quick        # smoke run (well under a minute)
    python benchmarks/run.py --peers none   # astad only (the core table, core.json)

The peers (autograd, PyTorch eager, JAX eager, JAX jit) are optional: a peer that is
not installed is reported as such.

See benchmarks/README.md for what is measured and what the columns mean.
"""
from __future__ import annotations

import argparse
import dataclasses
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


def _is_record(x):
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def _is_seq(x):
    """A container of the structures the programs take: list, tuple or dataclass."""
    return isinstance(x, (list, tuple)) or _is_record(x)


def _items(x):
    """The children of a container, in order (a dataclass's fields)."""
    if _is_record(x):
        return [getattr(x, f.name) for f in dataclasses.fields(x)]
    return list(x)


def _leaves(x, path=()):
    """Yield (path, value) for every non-container leaf of a nested structure."""
    if _is_seq(x):
        for k, item in enumerate(_items(x)):
            yield from _leaves(item, path + (k,))
    else:
        yield path, x


def _replace(x, path, value):
    """A copy of nested structure ``x`` with the leaf at ``path`` set to ``value``
    (only the containers along the path are copied)."""
    if not path:
        return value
    k = path[0]
    items = _items(x)
    items[k] = _replace(items[k], path[1:], value)
    if _is_record(x):
        return dataclasses.replace(x, **{dataclasses.fields(x)[k].name: items[k]})
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
            problems.append(f"{label}: expected a {type(want).__name__} of length "
                            f"{len(_items(want))}, got {type(got).__name__} {_short(got)}")
            return 0.0
        if _is_record(want) and type(got) is not type(want):
            problems.append(f"{label}: expected a {type(want).__name__}, got "
                            f"{type(got).__name__} {_short(got)}")
            return 0.0
        got, want = _items(got), _items(want)
        if len(got) != len(want):
            problems.append(f"{label}: expected length {len(want)}, got length {len(got)}")
            return 0.0
        worst = 0.0
        for k, (g, w) in enumerate(zip(got, want)):
            worst = max(worst, _compare(f"{label}[{k}]", g, w, rtol, atol, problems, limit))
            if len(problems) >= limit:
                break
        return worst
    if want is None:  # (an argument with no float has no gradient: astad gives None)
        if got is not None:
            problems.append(f"{label}: expected None, got {_short(got)}")
        return 0.0
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
            g = _items(g)[k]
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
        ref = _grads_tuple(case.hand_grad(*case.args), nargs)
        worst = 0.0
        for ai in case.wrt:
            worst = max(worst, _compare(f"grad of arg {ai}", grads[ai], ref[ai],
                                        1e-9, 1e-12, problems))
        info["checked_against"].append("hand-written")
        info["max_abs_err_vs_hand"] = worst
        # and check the hand-written gradient itself, so a mismatch is attributable
        hand_problems = _fd_check(case, ref)
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
        "gc_frozen_objects": gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else None,
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
# Peers: timing against autograd, PyTorch and JAX (see peers.py)


def time_interleaved_multi(variants, target):
    """Like time_interleaved, but every variant has its own number of samples (slow peers
    take fewer) and an optional known per-call time (a call at least ``target`` long is
    timed once per sample without calibrating). variants: (label, fn, args, samples,
    per_call_hint). Round r times, in turn, every variant that wants more than r samples."""
    runners = [(label, _make_runner(fn, args), ns, hint)
               for label, fn, args, ns, hint in variants]
    numbers = {}
    for label, run, _, hint in runners:
        numbers[label] = 1 if hint is not None and hint >= target else calibrate(run, target)
    out = {label: {"samples": [], "number": numbers[label]} for label, *_ in runners}
    for r in range(max(ns for _, _, ns, _ in runners)):
        for label, run, ns, _ in runners:
            if r < ns:
                n = numbers[label]
                out[label]["samples"].append(run(n) / n)
    for label in out:
        out[label]["median"] = statistics.median(out[label]["samples"])
    return out


class Ladder:
    """Measured costs of each (peer, program, kind) at increasing work, to predict the
    cost at the next size and skip a size that would take too long. The prediction
    extrapolates from the last measured size with the exponent of the last two (clamped
    to [1, 3], or [1.5, 3] for compile times; the lower bound if there is only one)."""

    def __init__(self):
        self.points = {}

    def add(self, key, work, cost, label):
        if work is not None and cost and cost > 0:
            self.points.setdefault(key, []).append((work, cost, label))

    def predict(self, key, work):
        pts = self.points.get(key, [])
        if not pts or work is None:
            return None
        w1, c1, label = pts[-1]
        if work <= w1:
            return None
        lowest = self.min_exponent.get(key[-1], 1.0)
        exponent = lowest
        if len(pts) >= 2:
            w0, c0, _ = pts[-2]
            if w1 > w0:
                exponent = min(max(math.log(c1 / c0) / math.log(w1 / w0), lowest), 3.0)
        return c1 * (work / w1) ** exponent, label, exponent

    # XLA compile time of an unrolled program grows faster than its size (measured:
    # exponent 1.3 for dot from n=100 to 1000, 1.56 for sum_matvec from 30x30 to
    # 100x100), so compile estimates use at least 1.5
    min_exponent = {"compile": 1.5, "call": 1.0}


def record_medians(row: dict, t: dict) -> None:
    """The primal, gradient and hand-written medians of the timings ``t`` into ``row``,
    with their ratios and the time per tape entry."""
    row["primal_s"] = t["primal"]["median"]
    row["grad_s"] = t["grad"]["median"]
    row["hand_s"] = t["hand"]["median"] if "hand" in t else None
    row["grad_over_primal"] = row["grad_s"] / row["primal_s"]
    row["grad_over_hand"] = row["grad_s"] / row["hand_s"] if row["hand_s"] else None
    tl = row["tape_length"]
    row["ns_per_tape_entry"] = row["grad_s"] * 1e9 / tl if tl else float("nan")
    row["overhead_ns_per_tape_entry"] = ((row["grad_s"] - row["primal_s"]) * 1e9 / tl
                                         if tl else float("nan"))


def _ratio_fields(grad_s, peer_s):
    return {"astad_over_peer": grad_s / peer_s, "peer_over_astad": peer_s / grad_s}


def bench_case_peers(case, peer_list, samples, target, limits, ladder):
    """One program at one size: check astad (as bench_case does), then check every
    peer's value and gradient against astad's, then time the primal, astad, the
    hand-written gradient and every peer that agreed, interleaved."""
    import astad
    from peers import PeerCannotRun, PeerUnavailable, compare_with_astad
    ad = case.ad if case.ad_is_decorated else astad.reverse_diff(case.ad)
    row = {"program": case.program, "size": case.size, "size_label": case.size_label,
           "work": case.work}
    row["check"] = check_case(case, ad)
    row["tape_length"] = tape_length(case, ad)
    value, grads = ad.value_and_grad(*case.args)
    grads = _grads_tuple(grads, len(case.args))
    astad_grads = tuple(grads[i] for i in case.wrt)

    variants = [("primal", case.primal, case.args, samples, None),
                ("grad", ad.value_and_grad, case.args, samples, None)]
    if case.hand_grad is not None:
        variants.append(("hand", case.hand_grad, case.args, samples, None))

    entries = {}
    for peer in peer_list:
        entry = entries[peer.key] = {"label": peer.label}
        try:
            peer.load()
        except PeerUnavailable as exc:
            entry.update(status="not installed", reason=str(exc))
            continue
        key = (peer.key, case.program)
        kinds = ("compile", "call") if peer.compiles else ("call",)
        skip = None
        for kind in kinds:
            pred = ladder.predict(key + (kind,), case.work)
            if pred is not None and pred[0] > limits[kind]:
                what = "compile" if kind == "compile" else "one call"
                skip = (f"too slow (>{limits[kind]:g} s): {what} estimated at {pred[0]:.3g} s, "
                        f"extrapolated from {pred[1]} with exponent {pred[2]:.2f}")
                break
        if skip:
            entry.update(status="skipped", reason=skip)
            continue
        try:
            prepared = peer.prepare(case)
        except PeerCannotRun as exc:
            entry.update(status="n/a", reason=str(exc))
            continue
        except Exception as exc:
            entry.update(status="failed", reason=f"preparing it raised {type(exc).__name__}: "
                                                 f"{exc}")
            continue
        t0 = perf_counter()
        try:
            res = prepared.fn(*case.args)
        except Exception as exc:
            status, reason = peer.classify_error(exc)
            entry.update(status=status, reason=reason)
            continue
        first = perf_counter() - t0
        try:
            pv, pg = prepared.decode(res)
            problems = compare_with_astad(case, value, astad_grads, pv, pg, rtol=limits["rtol"])
            del pv, pg
        except Exception as exc:
            problems = [f"decoding its result raised {type(exc).__name__}: {exc}"]
        # drop the peer's result before timing: torch's holds a tensor per input and its
        # graph, and every full garbage collection would walk them during the timings
        del res
        if problems:
            entry.update(status="failed",
                         reason=f"its result disagrees with astad's (rtol {limits['rtol']:g}): "
                                + "; ".join(problems))
            print(f"\nPEER MISMATCH {case.name} / {peer.label}: {entry['reason']}\n",
                  file=sys.stderr, flush=True)
            continue
        entry["check"] = f"value and gradient agree with astad (rtol {limits['rtol']:g})"
        per_call = None
        if peer.compiles:
            entry["compile_s"] = first           # trace + compile + one run
            ladder.add(key + ("compile",), case.work, first, case.size_label)
        else:
            entry["first_call_s"] = first
            per_call = first
            if first > limits["call"] and peer.warms_up:   # the first call warmed up
                t0 = perf_counter()
                prepared.fn(*case.args)
                per_call = perf_counter() - t0
            if per_call > limits["call"]:
                ladder.add(key + ("call",), case.work, per_call, case.size_label)
                entry.update(status="skipped",
                             reason=f"too slow (>{limits['call']:g} s): one call took "
                                    f"{per_call:.3g} s")
                continue
        ns = samples if per_call is None or per_call < limits["slow"] else min(samples, 3)
        variants.append((peer.key, prepared.fn, case.args, ns, per_call))
        entry["status"] = "ok"

    del value, grads, astad_grads      # (not alive during the timings, see above)
    gc.collect()
    t = time_interleaved_multi(variants, target)
    record_medians(row, t)
    for peer in peer_list:
        entry = entries[peer.key]
        if entry.get("status") != "ok":
            continue
        entry["median_s"] = t[peer.key]["median"]
        entry.update(_ratio_fields(row["grad_s"], entry["median_s"]))
        entry["timings"] = t[peer.key]
        ladder.add((peer.key, case.program, "call"), case.work, entry["median_s"],
                   case.size_label)
    row["peers"] = entries
    row["timings"] = {k: v for k, v in t.items() if k in ("primal", "grad", "hand")}
    return row


def _ratio_cell(r):
    """astad time / other time, with the inverse spelled out."""
    if r is None:
        return "-"
    if r <= 1:
        return f"{r:.3g} ({1 / r:.1f}x faster)"
    return f"{r:.3g} ({r:.1f}x slower)"


class _Notes:
    def __init__(self):
        self.reasons = []

    def ref(self, reason):
        if reason not in self.reasons:
            self.reasons.append(reason)
        return self.reasons.index(reason) + 1

    def lines(self):
        return [f"[{k}] {r}" for k, r in enumerate(self.reasons, 1)]


def _peer_cell(entry, notes, field="median_s"):
    status = entry.get("status")
    if status == "ok":
        return fmt_time(entry.get(field))
    if status == "not installed":
        return "not installed"
    return f"{status} [{notes.ref(entry.get('reason', ''))}]"


def peers_tables(rows, peer_list):
    """(time table, ratio table, notes) in markdown."""
    notes = _Notes()
    labels = [p.label for p in peer_list]
    jit = [p for p in peer_list if p.compiles]
    head = (["program", "size", "primal", "astad grad", "hand-written"] + labels
            + [f"{p.label} compile" for p in jit])
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "--:|" * (len(head) - 2)]
    rhead = (["program", "size", "astad grad / primal", "astad / hand-written"]
             + [f"astad / {lab}" for lab in labels])
    rlines = ["| " + " | ".join(rhead) + " |", "|---|---|" + "--:|" * (len(rhead) - 2)]
    for r in rows:
        size = r["size_label"] or "-"
        if r.get("error"):
            ref = notes.ref(r["error"].splitlines()[0][:300])
            lines.append(f"| {r['program']} | {size} | astad FAILED [{ref}] |"
                         + " |" * (len(head) - 3))
            rlines.append(f"| {r['program']} | {size} | astad FAILED [{ref}] |"
                          + " |" * (len(rhead) - 3))
            continue
        cells = [r["program"], size, fmt_time(r["primal_s"]), fmt_time(r["grad_s"]),
                 fmt_time(r["hand_s"])]
        cells += [_peer_cell(r["peers"][p.key], notes) for p in peer_list]
        for p in jit:
            e = r["peers"][p.key]
            cells.append(fmt_time(e["compile_s"]) if "compile_s" in e else "-")
        lines.append("| " + " | ".join(cells) + " |")
        rcells = [r["program"], size, f"{r['grad_over_primal']:.1f}x",
                  _ratio_cell(r["grad_over_hand"])]
        for p in peer_list:
            e = r["peers"][p.key]
            rcells.append(_ratio_cell(e["astad_over_peer"]) if e.get("status") == "ok"
                          else _peer_cell(e, notes))
        rlines.append("| " + " | ".join(rcells) + " |")
    return "\n".join(lines), "\n".join(rlines), notes.lines()


def _peer_progress(row, peer_list):
    parts = []
    for p in peer_list:
        e = row["peers"][p.key]
        st = e.get("status")
        if st == "ok":
            extra = f" (compile {fmt_time(e['compile_s'])})" if "compile_s" in e else ""
            parts.append(f"{p.key} {fmt_time(e['median_s'])}{extra}")
        else:
            parts.append(f"{p.key} {st}")
    return ", ".join(parts)


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
    record_medians(row, t)
    row["timings"] = t
    return row


def freeze_imported_objects():
    """Move every object alive now (mostly the peers' modules: about 220,000 objects for
    torch + jax + autograd) to the garbage collector's permanent generation. The
    collector stays enabled; without this, every full collection triggered while a
    large tape is built walks those objects too, and astad's dot n=10^5 takes 0.24 s
    instead of 0.14 s only because the peers were imported."""
    gc.collect()
    if hasattr(gc, "freeze"):
        gc.freeze()


def parse_peers(spec):
    """--peers value: "all", "none", or a comma-separated list of peer keys."""
    import peers as peers_mod
    spec = (spec or "all").strip().lower()
    if spec == "all":
        return list(peers_mod.PEER_KEYS)
    if spec in ("none", ""):
        return []
    keys = [k.strip().replace("-", "_") for k in spec.split(",") if k.strip()]
    unknown = [k for k in keys if k not in peers_mod.PEER_KEYS]
    if unknown:
        raise SystemExit(f"error: unknown peer(s) {unknown}; known: "
                         f"{', '.join(peers_mod.PEER_KEYS)}, or all / none")
    return keys


def write_json(result, out):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="fast smoke run: smaller sizes, ~5 ms samples, 3 samples, "
                         "tighter limits for slow peers")
    ap.add_argument("--out", default=None,
                    help="JSON output path (default benchmarks/results/peers.json, "
                         "peers-quick.json with --quick; core.json / core-quick.json "
                         "with --peers none)")
    ap.add_argument("--samples", type=int, default=None,
                    help="samples per measurement (default 5, 3 with --quick; a peer "
                         "slower than --slow per call takes at most 3)")
    ap.add_argument("--target", type=float, default=None,
                    help="target seconds per sample (default 0.02, 0.005 with --quick)")
    ap.add_argument("--only", action="append", default=None, metavar="PROGRAM",
                    help="run only programs whose name contains this (repeatable)")
    ap.add_argument("--keep-going", action="store_true",
                    help="on a failed astad check, record it and go on instead of aborting")
    ap.add_argument("--peers", default="all",
                    help="peers to compare with: all (default), none, or a comma-separated "
                         "list of autograd, torch, jax, jax_jit")
    ap.add_argument("--max-call", type=float, default=None,
                    help="skip a peer on a size where one call is (or is estimated to be) "
                         "longer than this many seconds (default 5, 0.3 with --quick)")
    ap.add_argument("--max-compile", type=float, default=None,
                    help="skip jax jit on a size whose compile is estimated to take longer "
                         "than this many seconds (default 25, 1.5 with --quick)")
    ap.add_argument("--slow", type=float, default=0.2,
                    help="a peer call longer than this many seconds gets at most 3 samples "
                         "(default 0.2)")
    ap.add_argument("--no-arrays", action="store_true",
                    help="do not run the numpy benchmarks (benchmarks/arrays.py) at the end")
    args = ap.parse_args(argv)

    peer_keys = parse_peers(args.peers)
    samples = args.samples or (3 if args.quick else 5)
    target = args.target or (0.005 if args.quick else 0.02)
    stem = "peers" if peer_keys else "core"
    out = args.out or os.path.join(
        _HERE, "results", f"{stem}-quick.json" if args.quick else f"{stem}.json")
    limits = {"call": args.max_call or (0.3 if args.quick else 5.0),
              "compile": args.max_compile or (1.5 if args.quick else 25.0),
              "slow": args.slow, "rtol": 1e-6}

    try:
        import astad
        astad.reverse_diff  # noqa: B018 (fails early if the package is broken)
        import programs
    except Exception as exc:
        print(f"error: cannot import astad / the benchmark programs: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        return 2
    programs.ensure_recursion_limit(programs.CHAIN_DEPTH)

    peer_list = []
    if peer_keys:
        import peers as peers_mod
        peer_list = peers_mod.make_peers(peer_keys)
        for p in peer_list:
            d = p.describe()
            print(f"  peer {p.label:<12} " + (f"{d['version']}" if d["available"]
                                               else d["reason"]), flush=True)
        freeze_imported_objects()

    cases = programs.make_cases(quick=args.quick)
    if args.only:
        cases = [c for c in cases if any(s in c.program for s in args.only)]

    t_start = perf_counter()
    rows = []
    failed = []
    aborted = None
    ladder = Ladder()
    for case in cases:
        try:
            if peer_list:
                row = bench_case_peers(case, peer_list, samples, target, limits, ladder)
            else:
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
        line = (f"  {case.name:<24} grad/primal {row['grad_over_primal']:6.1f}x  "
                f"tape {row['tape_length']:>7}")
        if peer_list:
            line += "  | " + _peer_progress(row, peer_list)
        print(line + f"  ({perf_counter() - t_start:.0f} s)", flush=True)
    total = perf_counter() - t_start

    peer_failures = [f"{r['program']}[{r['size_label']}] / {e['label']}: {e['reason']}"
                     for r in rows if "peers" in r for e in r["peers"].values()
                     if e.get("status") == "failed"]
    print()
    if peer_list:
        times, ratios, notes = peers_tables(rows, peer_list)
        print("Median time per call (value and gradient):\n")
        print(times)
        print("\nRatios: astad grad / primal, and astad time / other time "
              "(\"x faster\" = how many times faster astad is):\n")
        print(ratios)
        if notes:
            print()
            print("\n".join(notes))
    else:
        print(markdown_table(rows))

    env = environment()
    result = {
        "benchmark": ("astad vs peers (autograd, PyTorch eager, JAX eager and jit) on the "
                      "Smeding & Vakar POPL 2023 Section 10 programs, recursion, fan-out "
                      "and control flow" if peer_list else
                      "astad core (Smeding & Vakar POPL 2023, Section 10 programs + "
                      "recursion)"),
        "mode": "quick" if args.quick else "full",
        "environment": env,
        "settings": {"samples": samples, "target_sample_seconds": target,
                     "timer": "time.perf_counter", "statistic": "median",
                     "interleaved": True},
        "total_seconds": total,
        "rows": rows,
        "failed": failed,
        "aborted_at": aborted,
    }
    if peer_list:
        result["settings"].update(
            max_call_seconds=limits["call"], max_compile_seconds=limits["compile"],
            slow_call_seconds=limits["slow"], peer_check_rtol=limits["rtol"],
            slow_peer_samples=min(samples, 3))
        result["peers"] = {p.key: p.describe() for p in peer_list}
        result["peer_failures"] = peer_failures
        result["notes"] = notes
    write_json(result, out)
    if peer_failures:
        print("\nPEERS THAT DISAGREE WITH ASTAD:\n  " + "\n  ".join(peer_failures),
              file=sys.stderr)
    print(f"\n{len(rows)} rows in {total:.1f} s; JSON written to {os.path.relpath(out)}")
    summary = targets_summary(rows)
    if summary:
        print("\n" + summary)
    status = 1 if failed or peer_failures else 0
    arrays = os.path.join(_HERE, "arrays.py")
    if not args.no_arrays and not args.only and os.path.exists(arrays):
        print("\nNumPy programs (benchmarks/arrays.py, its own table and JSON):", flush=True)
        done = subprocess.run([sys.executable, arrays] + (["--quick"] if args.quick else []))
        status = status or done.returncode
    return status


def targets_summary(rows):
    """The issue's targets, checked on this run's rows (markdown)."""
    ok_rows = [r for r in rows if not r.get("error")]
    if not ok_rows:
        return ""
    by_program = {}
    for r in ok_rows:
        by_program.setdefault(r["program"], []).append(r)
    lines = ["Targets (this run):", "",
             "| program | worst grad / primal | slowest peer factor: autograd | torch eager "
             "| jax eager |", "|---|--:|--:|--:|--:|"]
    worst = []
    for program, prows in by_program.items():
        ratio = max(r["grad_over_primal"] for r in prows)
        worst.append(ratio)
        cells = []
        for key in ("autograd", "torch", "jax"):
            factors = [r["peers"][key]["peer_over_astad"] for r in prows
                       if r.get("peers", {}).get(key, {}).get("status") == "ok"]
            cells.append(f"{min(factors):.1f}x faster" if factors else "-")
        lines.append(f"| {program} | {ratio:.1f}x | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"median over programs of the worst grad / primal: "
                 f"{statistics.median(worst):.1f}x (target <= 10x); largest {max(worst):.1f}x "
                 f"(target <= 20x)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
