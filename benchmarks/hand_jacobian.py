"""Jacobian of a hand-tracking model (issue 27, item 5): ``astad.jacrev`` against as many
pullbacks of one ``.vjp`` as the model has outputs, in one run.

Run from the repository root:

    python benchmarks/hand_jacobian.py            # 26 parameters -> 300 residuals
    python benchmarks/hand_jacobian.py --quick    # smoke run: 3 short samples

The model is the kind a hand tracker fits by Gauss-Newton: 26 parameters (a translation,
three global angles, four angles per finger) pose a kinematic chain (rotations built from
the angles, 3x3 products by ``np.einsum``, joints placed bone by bone) that carries 100
vertices, whose distances to 100 observed points are the 300 residuals. It is numpy code
of the ordinary kind: slicing, ``np.split``, ``np.stack``, ``np.concatenate``, reductions
and einsum. jacrev sweeps the tape once with 300 rows of adjoints at once; the goal is
that this costs under 0.2x of the 300 pullbacks (each a sweep of its own). Every result is
checked against jacfwd and the pullbacks first. Medians of interleaved samples; the table
goes to benchmarks/results/hand_jacobian.md, the JSON beside it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
for _p in (_HERE, _ROOT):  # the astad of this checkout, then the benchmark helpers
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)

import astad  # noqa: E402
import run  # noqa: E402  (timing, environment, JSON: the conventions of run.py)
from run import fmt_time  # noqa: E402

GOAL = 0.2  # jacrev / (one pullback per output)


# ---------------------------------------------------------------------------------------
# The model

N_FINGERS, N_BONES, VERTICES_PER_BONE, PALM_VERTICES = 5, 3, 5, 25


def rotations(axis, angles):
    """A stack of rotation matrices about ``axis`` (0, 1, 2) by ``angles`` (shape (n,))."""
    c, s = np.cos(angles), np.sin(angles)
    zero, one = np.zeros_like(angles), np.ones_like(angles)
    rows = {0: [[one, zero, zero], [zero, c, -s], [zero, s, c]],
            1: [[c, zero, s], [zero, one, zero], [-s, zero, c]],
            2: [[c, -s, zero], [s, c, zero], [zero, zero, one]]}[axis]
    return np.stack([np.stack(row, axis=-1) for row in rows], axis=-2)  # (n, 3, 3)


def hand_residuals(theta, rig, observed):
    """The 300 residuals of the posed hand's 100 vertices against ``observed``."""
    translation, angles = theta[:3], theta[3:6]
    fingers = np.stack(np.split(theta[6:], N_FINGERS))  # (5, 4): spread, three bends
    spread, bends = fingers[:, 0], fingers[:, 1:]
    rx, ry, rz = (rotations(k, angles[k:k + 1])[0] for k in range(3))
    palm = np.einsum("ij,jk,kl->il", rz, ry, rx)  # the global rotation
    palm_vertices = np.einsum("ij,vj->vi", palm, rig["palm"])
    frames = np.einsum("ij,fjk->fik", palm, rotations(2, spread))  # (5, 3, 3)
    joints = np.einsum("ij,fj->fi", palm, rig["knuckles"])  # (5, 3)
    pieces = [palm_vertices]
    for b in range(N_BONES):
        frames = np.einsum("fij,fjk->fik", frames, rotations(0, bends[:, b]))
        skin = np.einsum("fij,fvj->fvi", frames, rig["bones"][b])  # (5, 5, 3)
        pieces.append(np.reshape(joints[:, None, :] + skin, (-1, 3)))
        joints = joints + np.einsum("fij,j->fi", frames, rig["lengths"][b])
    vertices = np.concatenate(pieces, axis=0) + translation  # (100, 3)
    centred = vertices - np.mean(vertices, axis=0) * rig["centring"]
    scale = np.sqrt(np.sum(centred * centred) / len(centred))
    return np.ravel((centred - observed) * (1.0 + 0.01 * scale))


def make_problem(seed=27):
    rng = np.random.default_rng(seed)
    rig = {"palm": rng.normal(0.0, 0.04, (PALM_VERTICES, 3)),
           "knuckles": np.column_stack([np.linspace(-0.03, 0.03, N_FINGERS),
                                        np.full(N_FINGERS, 0.08), np.zeros(N_FINGERS)]),
           "bones": [rng.normal(0.0, 0.01, (N_FINGERS, VERTICES_PER_BONE, 3)) +
                     [0.0, 0.02, 0.0] for _ in range(N_BONES)],
           "lengths": [np.array([0.0, 0.04 - 0.008 * b, 0.0]) for b in range(N_BONES)],
           "centring": 0.5}
    theta = np.concatenate([rng.normal(0.0, 0.05, 3), rng.normal(0.0, 0.3, 3),
                            rng.uniform(0.0, 0.6, 4 * N_FINGERS)])
    observed = rng.normal(0.0, 0.05, (100, 3))
    return theta, rig, observed


# ---------------------------------------------------------------------------------------
# Checking and timing

def methods(theta, rig, observed):
    """label -> a function of no arguments giving the Jacobian (26 columns)."""
    f = astad.reverse_diff(hand_residuals, argnums=0)
    jacrev, jacfwd = astad.jacrev(hand_residuals), astad.jacfwd(hand_residuals)
    n_out = hand_residuals(theta, rig, observed).size
    basis = np.eye(n_out)

    def pullbacks():
        _, pullback = f.vjp(theta, rig, observed)
        return np.array([pullback(e) for e in basis])
    return {"astad.jacrev": lambda: jacrev(theta, rig, observed),
            f"{n_out} pullbacks of one f.vjp": pullbacks,
            "astad.jacfwd": lambda: jacfwd(theta, rig, observed)}


def check(calls) -> float:
    """The largest relative difference between the methods' Jacobians."""
    got = {label: np.asarray(call(), dtype=float) for label, call in calls.items()}
    reference = got["astad.jacfwd"]
    scale = np.max(np.abs(reference))
    worst = max(float(np.max(np.abs(m - reference))) / scale for m in got.values())
    if not worst < 1e-10:
        raise run.BenchmarkError(f"the Jacobians disagree (relative difference {worst:.2g})")
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 short samples")
    ap.add_argument("--samples", type=int, help="samples per measurement (7; 3 --quick)")
    ap.add_argument("--target", type=float, help="seconds per sample (0.5; 0.05 --quick)")
    ap.add_argument("--out", help="JSON path (default benchmarks/results/hand_jacobian.json, "
                    "hand_jacobian-quick.json with --quick); the table goes beside it as .md")
    args = ap.parse_args(argv)
    samples = args.samples or (3 if args.quick else 7)
    target = args.target or (0.05 if args.quick else 0.5)
    out = args.out or os.path.join(_HERE, "results", "hand_jacobian-quick.json" if
                                   args.quick else "hand_jacobian.json")
    theta, rig, observed = make_problem()
    calls = methods(theta, rig, observed)
    worst = check(calls)
    variants = [("primal", lambda: hand_residuals(theta, rig, observed), ())]
    variants += [(label, call, ()) for label, call in calls.items()]
    t0 = time.perf_counter()
    timings = run.time_interleaved(variants, samples, target)
    medians = {label: t["median"] for label, t in timings.items()}
    pullbacks = next(label for label in medians if "pullbacks" in label)
    ratio = medians["astad.jacrev"] / medians[pullbacks]
    lines = ["# Jacobian of a hand-tracking model: 26 parameters, 300 residuals", "",
             "| method | median | / primal | / pullbacks |", "|---|--:|--:|--:|"]
    for label, median in medians.items():
        lines.append(f"| {label} | {fmt_time(median)} | {median / medians['primal']:.0f}x "
                     f"| {median / medians[pullbacks]:.3f}x |")
    env = run.environment()
    lines += ["", f"jacrev / {pullbacks}: {ratio:.3f}x (goal below {GOAL}x: "
              f"{'met' if ratio < GOAL else 'missed'}); Jacobians agree to {worst:.1g}", "",
              f"{env['date']}, Python {sys.version.split()[0]}, {env['platform']}, "
              f"{env['cpu_count']} CPUs, load average {os.getloadavg()[0]:.1f}; astad "
              f"{env.get('git_commit') or '?'}; medians of {samples} interleaved samples"]
    text = "\n".join(lines)
    print(text)
    result = {"benchmark": "jacobian of a hand-tracking model (issue 27, item 5)",
              "mode": "quick" if args.quick else "full", "environment": env,
              "settings": {"samples": samples, "target_sample_seconds": target,
                           "statistic": "median", "interleaved": True, "goal": GOAL},
              "total_seconds": time.perf_counter() - t0, "max_relative_difference": worst,
              "medians_s": medians, "jacrev_over_pullbacks": ratio, "timings": timings}
    run.write_json(result, out)
    with open(os.path.splitext(out)[0] + ".md", "w") as fh:
        fh.write(text + "\n")
    print(f"\nJSON written to {os.path.relpath(out)} (table: .md beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
