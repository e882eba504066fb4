"""The examples run as users run them, print what they claim, and their gradients check.

Each example runs in a subprocess of this interpreter; its printed findings are parsed
and checked against the known answer (the data are synthetic, so the truth is known).
``examples/fit_numpy.py`` (the MLP) is run by ``tests/test_numpy.py``.
"""
import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from astad.testing import check_grads

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TESTED_ELSEWHERE = {"fit_numpy.py",  # tests/test_numpy.py::test_fit_numpy_example_runs...
                    "variational_gaussian.py"}  # tests/test_scipy_stats.py


def run(name: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def load(name: str):
    """The example as a module (its main() is not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", EXAMPLES / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def numbers(line: str) -> list:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?", line)]


def test_every_example_is_tested():
    tested = {"quickstart.py", "curve_fit.py", "projectile.py", "soft_tree.py", "gmm.py",
              "saddle.py", "particle.py", "scale_out.py", "newton_chain.py", "ode_fit.py",
              "gaussian_process.py", "equilibrium.py", "fft_filter.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested | TESTED_ELSEWHERE


def test_quickstart_runs_and_checks_its_gradient():
    out = run("quickstart.py")
    assert "energy = " in out
    assert "finite-d" in out and "largest difference from finite differences" in out
    assert "operations recorded on the tape:" in out
    quickstart = load("quickstart.py")
    assert "def rope_energy(" in quickstart.rope_energy.source
    # a first run prints results, not ~200 lines of generated code: it says how to see it
    assert "def rope_energy(" not in out and len(out.splitlines()) < 25
    assert "print(rope_energy.source)" in out
    assert "python -m astad show --original examples/quickstart.py:rope_energy" in out
    check_grads(quickstart.rope_energy, [0.0, 1.1, 1.9, 3.0], [0.0, -0.6, -0.9, -0.7])
    check_grads(quickstart.spring_lengths, [0.0, 1.1, 1.9], [0.0, -0.6, -0.9])


@pytest.mark.slow
def test_curve_fit_recovers_the_parameters():
    out = run("curve_fit.py")
    assert out.startswith("OK: loss: 4 gradient entries match")
    errors = [numbers(line) for line in out.splitlines() if "mean squared error" in line]
    assert errors[-1][0] < errors[0][0] / 50  # from 0.2 down to the noise level (0.05^2)
    for name in ("a", "tau", "omega", "phase"):
        true, guess, fitted = numbers(next(line for line in out.splitlines()
                                           if line.split()[0] == name))
        assert abs(fitted - true) < 0.1 * max(1.0, abs(true)), name
    module = load("curve_fit.py")
    ts, ys = module.measurements(n=12)
    check_grads(module.loss, {"a": 1.3, "tau": 0.7, "omega": 5.0, "phase": -1.0}, ts, ys)


@pytest.mark.slow
def test_projectile_best_angle():
    out = run("projectile.py")
    assert out.startswith("OK: flight_range: 1 gradient entry matches")
    rows = [numbers(line) for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == [0.0, 0.005, 0.02]
    for _, angle, _, grid in rows:
        assert abs(angle - grid) <= 0.1  # bisection on astad's slope meets the grid search
    angles = [row[1] for row in rows]
    assert abs(angles[0] - 45.0) < 0.2  # no drag: 45 degrees, up to the time step
    assert angles[0] > angles[1] > angles[2]  # drag lowers the best angle
    distance = rows[0][2]
    assert abs(distance - 30.0 ** 2 / 9.81) < 0.01 * distance  # v^2 / g without drag
    module = load("projectile.py")
    for angle, drag in ((0.3, 0.0), (0.9, 0.05), (1.2, 0.01)):
        check_grads(module.flight_range, angle, 25.0, drag, argnums=(0, 1, 2))


@pytest.mark.slow
def test_soft_tree_finds_the_splits():
    out = run("soft_tree.py")
    assert out.startswith("OK: loss: 5 gradient entries match")
    assert "the gradient is a tree too: Split with right child Split splitting on " \
           "feature 1" in out
    before = numbers(next(line for line in out.splitlines() if "before" in line))[0]
    after = numbers(next(line for line in out.splitlines() if "after" in line))[0]
    assert after < before / 5
    thresholds = [numbers(line)[0] for line in out.splitlines() if " < " in line]
    assert abs(thresholds[0] - 0.3) < 0.1 and abs(thresholds[1] + 0.2) < 0.1
    module = load("soft_tree.py")
    Leaf, Split = module.Leaf, module.Split
    deeper = Split(1, 0.1, Split(0, -0.4, Leaf(0.2), Leaf(-1.0)),
                   Split(0, 0.5, Leaf(2.0), Split(1, 0.6, Leaf(0.0), Leaf(1.5))))
    xs = [[0.3, -0.1], [-0.5, 0.7], [0.45, 0.65], [0.9, 0.2]]
    result = check_grads(module.loss, deeper, xs, [1.0, 0.0, 2.0, -1.0], argnums=(0, 1))
    assert result.checked == 4 + 5 + 8  # thresholds, leaves, the inputs' coordinates


@pytest.mark.slow
def test_gmm_fit():
    out = run("gmm.py")
    assert out.startswith("OK: negative_log_likelihood: 9 gradient entries match")
    lines = out.splitlines()
    start = numbers(next(line for line in lines if "start" in line))[-1]
    end = numbers(next(line for line in lines if "after" in line))[-1]
    assert end < start - 1.0
    rows = [numbers(line) for line in lines if line.strip().startswith("comp")]
    assert len(rows) == 3
    for true_w, w, true_mu, mu, true_sigma, sigma in rows:
        assert abs(w - true_w) < 0.1 and abs(mu - true_mu) < 0.2
        assert abs(sigma - true_sigma) < 0.15
    module = load("gmm.py")
    rng = np.random.default_rng(1)
    params = {"logits": rng.normal(size=3), "means": rng.normal(size=3),
              "log_sigmas": 0.3 * rng.normal(size=3)}
    check_grads(module.negative_log_likelihood, params, module.samples(40, rng))
    # the mixture density integrates to one, so its likelihood is a true one
    grid = np.linspace(-12.0, 12.0, 4001)
    density = [math.exp(-module.negative_log_likelihood(params, np.array([g])))
               for g in grid]
    assert sum(density) * (grid[1] - grid[0]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow
def test_scale_out_fits_every_batch_on_worker_processes():
    out = run("scale_out.py", "--batches", "6", "--workers", "2")
    assert out.startswith("OK: misfit: 2 gradient entries match")
    rows = [numbers(line) for line in out.splitlines() if line.strip()[:1].isdigit()
            and "batches" not in line]
    assert len(rows) == 6
    for k1, fitted_k1, k2, fitted_k2, misfit in rows:
        assert abs(fitted_k1 - k1) < 0.03 * k1 and abs(fitted_k2 - k2) < 0.03 * k2
        assert misfit < 4 * 2 * 0.01 ** 2  # down to the noise (0.01 on two species)
    assert "6 batches fitted by 2 worker processes (2 workers)" in out
    module = load("scale_out.py")
    truth, measured = module.experiment(3)
    check_grads(module.misfit, math.log(truth[0]) + 0.2, math.log(truth[1]) - 0.3, measured)


@pytest.mark.slow
def test_scale_out_on_a_scheduler_given_by_address():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        out = run("scale_out.py", "--scheduler", cluster.scheduler_address, "--batches", "3")
    assert "3 batches fitted by 1 worker processes (1 workers)" in out


@pytest.mark.slow
def test_saddle_nested_optimisation():
    """Siskind and Pearlmutter's "saddle": the outer gradient differentiates an inner
    gradient-ascent loop; checked against finite differences and by hand."""
    out = run("saddle.py")
    line = next(x for x in out.splitlines() if x.startswith("outer gradient"))
    g1, h1, fd1, fdh = numbers(line)[2:]
    assert (g1, h1) == pytest.approx((fd1, fdh), abs=1e-8)
    # by hand: the inner best reply is x2 = c x1 / 2 (up to 0.4^30), so the outer
    # objective is x1^2 (1 + c^2 / 4) + y1^2 - (its converged y2)^2: at (0.8, -0.3)
    saddle = load("saddle.py")
    c = saddle.COUPLING
    assert (g1, h1) == pytest.approx((2 * 0.8 * (1 + c * c / 4), -0.6), abs=1e-9)
    point = numbers(next(x for x in out.splitlines() if x.startswith("saddle point")))
    assert max(abs(v) for v in point) < 1e-10


@pytest.mark.slow
def test_particle_nested_derivatives():
    """Siskind and Pearlmutter's "particle": derivatives through a simulation whose force
    is a gradient; first and second derivatives against finite differences, and the
    optimised control lands the particle on the target."""
    out = run("particle.py")
    lines = out.splitlines()
    first = numbers(next(x for x in lines if x.startswith("d error")))
    second = numbers(next(x for x in lines if x.startswith("d2 error")))
    assert first[1] == pytest.approx(first[2], rel=1e-7)
    assert second[1] == pytest.approx(second[2], rel=1e-6)
    particle = load("particle.py")
    w = numbers(next(x for x in lines if x.startswith("best control")))[0]
    assert abs(particle.landing(w)) < 1e-9
    # the landing point's derivative against finite differences at the optimum
    h = 1e-6
    fd = (particle.landing(w + h) - particle.landing(w - h)) / (2 * h)
    assert particle.landing_slope(w) == pytest.approx(fd, rel=1e-6)


@pytest.mark.slow
def test_newton_chain_with_the_hessian():
    """Newton's method with astad.hessian: the Hessian against finite differences of the
    gradient, quadratic convergence, and a rest shape that is a minimum and symmetric
    (the hooks are level, so the chain hangs as its own mirror image)."""
    out = run("newton_chain.py")
    lines = out.splitlines()
    assert numbers(next(x for x in lines if x.startswith("Hessian")))[-1] < 1e-5
    steps = int(next(x for x in lines if x.startswith("Newton steps")).split()[-1])
    norms = numbers(next(x for x in lines if x.startswith("gradient norm")))
    assert steps <= 12 and norms[-1] < 1e-10
    assert norms[-2] < 10 * norms[-3] ** 2  # quadratic convergence before roundoff
    chain = load("newton_chain.py")
    start = np.column_stack([np.linspace(0.0, 10.0, chain.N + 2)[1:-1],
                             np.zeros(chain.N)]).ravel()
    rest, _ = chain.newton(start)
    points = rest.reshape(-1, 2)
    mirrored = np.column_stack([10.0 - points[::-1, 0], points[::-1, 1]])
    np.testing.assert_allclose(points, mirrored, atol=1e-9)
    # the Hessian is symmetric positive definite there; the energy rises in every direction
    h = chain.hessian(rest)
    np.testing.assert_allclose(h, h.T, atol=1e-9)
    assert np.linalg.eigvalsh(h)[0] > 0
    rng = np.random.default_rng(0)
    for _ in range(5):
        d = 1e-3 * rng.standard_normal(rest.size)
        assert chain.energy(rest + d) > chain.energy(rest)
        # second order: E(x + d) - E(x) = d H d / 2 + O(|d|^3) at a minimum
        assert chain.energy(rest + d) - chain.energy(rest) == pytest.approx(
            0.5 * d @ h @ d, rel=1e-3)


@pytest.mark.slow
def test_ode_fit_recovers_the_rates():
    out = run("ode_fit.py")
    assert out.startswith("OK: the misfit's gradient matches finite differences")
    start = numbers(next(line for line in out.splitlines() if "at the start" in line))[0]
    after = numbers(next(line for line in out.splitlines() if "after the fit" in line))[0]
    assert after < start / 100
    for line in out.splitlines():
        if line[:2] in ("a ", "b ", "c ", "d "):
            true, fitted = numbers(line)
            assert abs(fitted - true) < 0.05 * true, line


@pytest.mark.slow
def test_gaussian_process_fits_its_kernel():
    out = run("gaussian_process.py")
    assert out.startswith("OK: the log marginal likelihood's gradient matches")
    before = numbers(next(line for line in out.splitlines() if "at the start" in line))
    after = numbers(next(line for line in out.splitlines() if "after the fit" in line))
    assert after[0] > before[0] + 10
    length, scale, noise = numbers(next(line for line in out.splitlines()
                                        if line.startswith("length scale")))
    assert abs(noise - 0.1) < 0.04  # the noise the data were made with
    assert numbers(next(line for line in out.splitlines() if "largest error" in line))[0] < 0.3
    module = load("gaussian_process.py")
    x, y = module.data(n=12)
    check_grads(module.log_marginal_likelihood, np.array([0.3, 0.1, -1.2]), x, y, argnums=0)


@pytest.mark.slow
def test_equilibrium_model_trains():
    out = run("equilibrium.py")
    assert out.startswith("OK: the loss's gradient matches finite differences")
    start = numbers(next(line for line in out.splitlines() if "at the start" in line))[0]
    after = numbers(next(line for line in out.splitlines() if "after the fit" in line))[0]
    assert after < start / 20
    assert numbers(next(line for line in out.splitlines() if "largest error" in line))[0] < 0.3


def test_fft_filter_recovers_the_resonance():
    """Complex parameters through numpy.fft (the conjugate gradient step), then a real
    parametrisation with complex values in between."""
    out = run("fft_filter.py")
    assert out.startswith("OK: the gradients match finite differences")
    free = numbers(next(line for line in out.splitlines() if line.startswith("free")))
    assert free[0] < 0.0030 and free[1] < 0.25  # (the noise's variance is 0.0025)
    for line in out.splitlines():
        if line.split(" ")[0] in ("gain", "frequency", "quality"):
            true, fitted = numbers(line)
            assert abs(fitted - true) < 0.03 * true, line
