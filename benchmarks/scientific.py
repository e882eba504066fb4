"""The scientific stack: gradients through scipy.stats, scipy.integrate.odeint and
scipy.linalg.expm, against the primal and the peers (issue 26).

Run from the repository root:

    python benchmarks/scientific.py            # about a minute
    python benchmarks/scientific.py --quick    # smaller sizes, fewer samples
    python benchmarks/scientific.py --peers none

Programs:

- ``norm n=...``: the log-likelihood ``sum(norm.logpdf(x, mu, sigma))`` of n = 10^3 and
  10^6 points, gradient in (mu, log sigma); autograd's ``autograd.scipy.stats.norm``,
  JAX's ``jax.scipy.stats.norm`` (eager, and under jit with the compile apart);
- ``gamma n=...``: ``sum(gamma.logpdf(x, a, scale=s))``, gradient in (a, s);
- ``odeint``: the least-squares misfit of a Lotka-Volterra trajectory (9 output times,
  rtol 1e-7) in its four rates and two initial values; astad's adjoint against
  autograd's ``odeint`` (also an adjoint), central differences (12 solves) and astad
  differentiating an unrolled fixed-step RK4 integrator (800 steps) of the same model,
  time and peak memory (tracemalloc) of one gradient side by side;
- ``solve_ivp``: the same misfit through ``scipy.integrate.solve_ivp`` (RK45);
- ``expm n=...``: ``sum(expm(A) * W)`` for A of 10x10 and 40x40, gradient in A; JAX's
  ``jax.scipy.linalg.expm``.

Every gradient is checked against the others (and against central differences) before
it is timed. Timings are medians of interleaved samples (run.time_interleaved); the
table gives each gradient over the primal (scipy's own call) and the peers' times over
astad's. Results: ``results/scientific.json`` and ``results/scientific.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import astad  # noqa: E402
import run  # noqa: E402  (timing, environment: the conventions of run.py)
from run import fmt_time  # noqa: E402
import scipy.linalg as sl  # noqa: E402
import scipy.stats as st  # noqa: E402
from scipy.integrate import odeint, solve_ivp  # noqa: E402


def _peer(name):
    try:
        if name == "autograd":
            import autograd
            return autograd
        import jax
        jax.config.update("jax_enable_x64", True)
        return jax
    except ImportError:
        return None


# -- the programs: the primal, astad's gradient, the peers' ------------------------------------
def norm_case(n, peers):
    x = np.random.default_rng(0).normal(1.0, 2.0, size=n)

    def loglik(params):
        return np.sum(st.norm.logpdf(x, params[0], np.exp(params[1])))
    params = np.array([0.5, 0.3])
    forms = {"astad": (astad.grad(loglik), (params,))}
    if peers.get("autograd"):
        import autograd
        import autograd.numpy as anp
        from autograd.scipy.stats import norm as anorm
        forms["autograd"] = (autograd.grad(
            lambda p: anp.sum(anorm.logpdf(x, p[0], anp.exp(p[1])))), (params,))
    if peers.get("jax"):
        forms.update(_jax_forms(lambda jnp, jst, p: jnp.sum(
            jst.norm.logpdf(x, p[0], jnp.exp(p[1]))), params))
    return f"norm n={n}", (loglik, (params,)), forms


def gamma_case(n, peers):
    x = np.random.default_rng(1).gamma(2.0, 1.5, size=n)

    def loglik(params):
        return np.sum(st.gamma.logpdf(x, params[0], scale=params[1]))
    params = np.array([1.8, 1.2])
    forms = {"astad": (astad.grad(loglik), (params,))}
    if peers.get("autograd"):
        import autograd
        import autograd.numpy as anp
        from autograd.scipy.stats import gamma as agamma
        forms["autograd"] = (autograd.grad(
            lambda p: anp.sum(agamma.logpdf(x / p[1], p[0]) - anp.log(p[1]))), (params,))
    if peers.get("jax"):
        forms.update(_jax_forms(lambda jnp, jst, p: jnp.sum(
            jst.gamma.logpdf(x, p[0], scale=p[1])), params))
    return f"gamma n={n}", (loglik, (params,)), forms


RATES, START = np.array([1.0, 0.5, 0.3, 0.8]), np.array([2.0, 1.0])
TIMES = np.linspace(0.0, 8.0, 9)


def _predator_prey(state, t, a, b, c, d):
    prey, predators = state
    return np.array([a * prey - b * prey * predators, c * prey * predators - d * predators])


def ode_case(peers):
    data = odeint(_predator_prey, START, TIMES, args=tuple(RATES), rtol=1e-10) * 1.02

    def misfit(theta):
        ys = odeint(_predator_prey, theta[4:], TIMES, args=tuple(theta[:4]), rtol=1e-7,
                    atol=1e-9)
        return np.sum((ys - data) ** 2)
    theta = np.concatenate([RATES * 1.1, START * 0.9])

    def differences(theta, h=1e-6):
        return np.array([(misfit(theta + h * e) - misfit(theta - h * e)) / (2 * h)
                         for e in np.eye(len(theta))])
    forms = {"astad": (astad.grad(misfit), (theta,)),
             "differences": (differences, (theta,))}
    if peers.get("autograd"):
        import autograd
        import autograd.numpy as anp
        from autograd.builtins import tuple as boxed_tuple  # (autograd's args container)
        from autograd.scipy.integrate import odeint as aodeint

        def rhs(state, t, rates):
            a, b, c, d = rates[0], rates[1], rates[2], rates[3]
            return anp.array([a * state[0] - b * state[0] * state[1],
                              c * state[0] * state[1] - d * state[1]])
        forms["autograd"] = (autograd.grad(lambda th: anp.sum((aodeint(
            rhs, th[4:], TIMES, boxed_tuple((th[:4],)), rtol=1e-7, atol=1e-9) - data) ** 2)),
            (theta,))

    def unrolled(theta, steps=800):
        """The same misfit by fixed-step RK4, differentiated step by step."""
        h, state, out = 8.0 / steps, theta[4:], [theta[4:]]
        rates = tuple(theta[:4])
        for k in range(steps):
            k1 = _predator_prey(state, 0.0, *rates)
            k2 = _predator_prey(state + h / 2 * k1, 0.0, *rates)
            k3 = _predator_prey(state + h / 2 * k2, 0.0, *rates)
            k4 = _predator_prey(state + h * k3, 0.0, *rates)
            state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            if (k + 1) % (steps // 8) == 0:
                out.append(state)
        return np.sum((np.stack(out) - data) ** 2)
    forms["unrolled"] = (astad.grad(unrolled), (theta,))
    return "odeint", (misfit, (theta,)), forms


def ivp_case(peers):
    data = odeint(_predator_prey, START, TIMES, args=tuple(RATES), rtol=1e-10) * 1.02

    def rhs(t, state, a, b, c, d):
        return _predator_prey(state, t, a, b, c, d)

    def misfit(theta):
        ys = solve_ivp(rhs, (0.0, 8.0), theta[4:], t_eval=TIMES, args=tuple(theta[:4]),
                       rtol=1e-7, atol=1e-9).y
        return np.sum((ys.T - data) ** 2)
    theta = np.concatenate([RATES * 1.1, START * 0.9])

    def differences(theta, h=1e-6):
        return np.array([(misfit(theta + h * e) - misfit(theta - h * e)) / (2 * h)
                         for e in np.eye(len(theta))])
    return "solve_ivp", (misfit, (theta,)), {"astad": (astad.grad(misfit), (theta,)),
                                             "differences": (differences, (theta,))}


def expm_case(n, peers):
    rng = np.random.default_rng(n)
    a, w = rng.normal(size=(n, n)) / np.sqrt(n), rng.normal(size=(n, n))

    def f(a):
        return np.sum(sl.expm(a) * w)
    forms = {"astad": (astad.grad(f), (a,))}
    if peers.get("jax"):
        import jax
        import jax.numpy as jnp
        import jax.scipy.linalg as jsl
        g = jax.grad(lambda a: jnp.sum(jsl.expm(a) * w))
        forms["jax"] = (lambda a: np.asarray(g(a)), (a,))
        forms.update(_jit_form(g, a))
    return f"expm n={n}", (f, (a,)), forms


def _jax_forms(body, params):
    import jax
    import jax.numpy as jnp
    import jax.scipy.stats as jst
    g = jax.grad(lambda p: body(jnp, jst, p))
    return {"jax": (lambda p: np.asarray(g(p)), (params,)), **_jit_form(g, params)}


def _jit_form(g, arg):
    import jax
    compiled = jax.jit(g)
    np.asarray(compiled(arg))  # (compiled now: the timing is of calls)
    return {"jax jit": (lambda p: np.asarray(compiled(p)), (arg,))}


# -- checks, timing, report -------------------------------------------------------------------
def check(name, forms) -> dict:
    """Every form's gradient against astad's: the largest relative difference."""
    ours = np.asarray(forms["astad"][0](*forms["astad"][1]))
    out = {}
    for label, (fn, args) in forms.items():
        theirs = np.asarray(fn(*args))
        err = float(np.max(np.abs(theirs - ours)) / max(1.0, np.max(np.abs(ours))))
        limit = 1e-5 if label == "differences" or name in ("odeint", "solve_ivp") else 1e-8
        if not err <= limit:
            raise run.BenchmarkError(f"{name}: {label}'s gradient differs from astad's "
                                     f"by {err:.2e}")
        out[label] = err
    return out


def peak_memory(fn, args) -> int:
    """The peak of Python's allocations (tracemalloc, numpy's included) during one call."""
    import tracemalloc
    fn(*args)  # (warm: transforms and caches made)
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peers", default="all", help="all, none, or autograd,jax")
    parser.add_argument("--out", default=None)
    options = parser.parse_args(argv)
    wanted = {"autograd", "jax"} if options.peers == "all" else \
        set() if options.peers == "none" else set(options.peers.split(","))
    peers = {name: _peer(name) for name in sorted(wanted)}
    sizes = (1000, 100_000) if options.quick else (1000, 1_000_000)
    cases = [norm_case(n, peers) for n in sizes] + [gamma_case(n, peers) for n in sizes] + \
        [ode_case(peers), ivp_case(peers)] + [
            expm_case(n, peers) for n in ((6, 10) if options.quick else (10, 40))]
    samples, target = (3, 0.01) if options.quick else (5, 0.05)
    rows = []
    for name, (primal, primal_args), forms in cases:
        errors = check(name, forms)
        timed = run.time_interleaved([("primal", primal, primal_args)] + [
            (label, fn, args) for label, (fn, args) in forms.items()], samples, target)
        medians = {label: t["median"] for label, t in timed.items()}
        rows.append({"program": name, "median_s": medians, "check": errors,
                     "grad_over_primal": medians["astad"] / medians["primal"],
                     "peer_over_astad": {label: medians[label] / medians["astad"]
                                         for label in forms if label != "astad"}})
        if name == "odeint":  # the adjoint's memory against the unrolled integrator's
            rows[-1]["peak_bytes"] = {label: peak_memory(fn, args)
                                      for label, (fn, args) in forms.items()}
        print(f"{name}: primal {fmt_time(medians['primal'])}, astad "
              f"{fmt_time(medians['astad'])} ({rows[-1]['grad_over_primal']:.1f}x)", flush=True)
    labels = ["autograd", "jax", "jax jit", "differences", "unrolled"]
    table = ["| program | primal | astad grad | grad / primal | " +
             " | ".join(f"{label} / astad" for label in labels) + " |",
             "|---|--:|--:|--:|" + "--:|" * len(labels)]
    for row in rows:
        cells = [f"{row['peer_over_astad'][label]:.2f}" if label in row["peer_over_astad"]
                 else "-" for label in labels]
        table.append(f"| {row['program']} | {fmt_time(row['median_s']['primal'])} | "
                     f"{fmt_time(row['median_s']['astad'])} | "
                     f"{row['grad_over_primal']:.1f}x | " + " | ".join(cells) + " |")
    for row in rows:
        if "peak_bytes" in row:
            table += ["", f"Peak memory of one gradient, {row['program']} (tracemalloc): " +
                      ", ".join(f"{label} {peak / 1e6:.2f} MB"
                                for label, peak in row["peak_bytes"].items()) + "."]
    print("\n".join(table))
    out = options.out or os.path.join(HERE, "results", "scientific-quick.json"
                                      if options.quick else "scientific.json")
    result = {"mode": "quick" if options.quick else "full", "environment": run.environment(),
              "peers": {name: module is not None for name, module in peers.items()},
              "programs": rows}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    with open(out[:-5] + ".md", "w") as f:
        f.write("# The scientific stack (benchmarks/scientific.py)\n\n" + "\n".join(table) +
                "\n\nA peer's column is its time over astad's (above 1: astad is faster).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
