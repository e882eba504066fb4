"""Fit many independent experiments at once on a Dask cluster, each with astad gradients.

A chemist runs the reaction A -> B -> C in many batches (different catalysts) and measures
the concentrations of A and B over time. Each batch has its own rate constants k1 and k2.
The model is a simulation, an explicit Euler loop in plain Python, and each batch is fitted
by Adam on log k1 and log k2, with astad's gradient of the misfit through the whole loop.
The batches are independent: they run as Dask tasks, on a local cluster of worker
processes by default, or on any Dask scheduler given by address.

The functions below are defined in ``__main__``: Dask sends them to the workers by value
(cloudpickle), and astad sends their source with them, so a remote worker needs astad
installed but not this file.

Run it with:  python examples/scale_out.py [--batches 24] [--workers 2]
              python examples/scale_out.py --scheduler tcp://host:8786
(needs ``dask[distributed]``: ``pip install 'dask[distributed]'``)
"""
import argparse
import math
import os
import random

import astad
from astad.testing import check_grads

STEPS, DT = 80, 0.05  # 4 time units, measured at every step


def simulate(log_k1, log_k2, steps=STEPS, dt=DT):
    """Concentrations of A and B at each step, starting from pure A."""
    k1, k2 = math.exp(log_k1), math.exp(log_k2)
    a, b = 1.0, 0.0
    trajectory = []
    for _ in range(steps):
        a, b = a - dt * k1 * a, b + dt * (k1 * a - k2 * b)
        trajectory.append((a, b))
    return trajectory


@astad.reverse_diff(argnums=(0, 1))
def misfit(log_k1, log_k2, measured):
    """Mean squared difference between the simulated and the measured concentrations."""
    total = 0.0
    for (a, b), (a_obs, b_obs) in zip(simulate(log_k1, log_k2), measured):
        total += (a - a_obs) ** 2 + (b - b_obs) ** 2
    return total / len(measured)


def experiment(batch, noise=0.01):
    """The true rate constants of one batch and its noisy measurements."""
    rng = random.Random(batch)
    k1, k2 = rng.uniform(0.5, 2.0), rng.uniform(0.1, 0.6)
    measured = [(a + rng.gauss(0.0, noise), b + rng.gauss(0.0, noise))
                for a, b in simulate(math.log(k1), math.log(k2))]
    return (k1, k2), measured


def fit(batch, steps=300, rate=0.1, b1=0.9, b2=0.999):
    """Fit one batch by Adam from the same initial guess; runs in a worker process."""
    truth, measured = experiment(batch)
    theta = [0.0, math.log(0.3)]  # k1 = 1, k2 = 0.3
    m, v = [0.0, 0.0], [0.0, 0.0]
    for step in range(1, steps + 1):
        value, grad = misfit.value_and_grad(theta[0], theta[1], measured)
        for i in range(2):
            m[i] = b1 * m[i] + (1 - b1) * grad[i]
            v[i] = b2 * v[i] + (1 - b2) * grad[i] ** 2
            theta[i] -= rate * (m[i] / (1 - b1 ** step)) / (
                math.sqrt(v[i] / (1 - b2 ** step)) + 1e-10)
    return {"batch": batch, "truth": truth, "fitted": (math.exp(theta[0]), math.exp(theta[1])),
            "misfit": value, "process": os.getpid()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scheduler", help="address of a running Dask scheduler "
                        "(default: start a local cluster of worker processes)")
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2, help="for the local cluster")
    args = parser.parse_args()
    from dask.distributed import Client, LocalCluster

    _, measured = experiment(0)
    print(check_grads(misfit, 0.1, -1.0, measured))  # astad agrees with finite differences

    if args.scheduler:
        client, cluster = Client(args.scheduler), None
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    with client:
        results = client.gather(client.map(fit, range(args.batches)))
        workers = len(client.run(os.getpid))  # (asked of each worker: the scheduler's
        # cached summary may not list them yet on a busy machine)
    if cluster is not None:
        cluster.close()

    print(f"{'batch':>5} {'k1 true':>8} {'fitted':>8} {'k2 true':>8} {'fitted':>8} "
          f"{'misfit':>9}")
    for r in results:
        print(f"{r['batch']:>5} {r['truth'][0]:>8.3f} {r['fitted'][0]:>8.3f} "
              f"{r['truth'][1]:>8.3f} {r['fitted'][1]:>8.3f} {r['misfit']:>9.2e}")
    worst = max(abs(f - t) / t for r in results for f, t in zip(r["fitted"], r["truth"]))
    processes = {r["process"] for r in results} - {os.getpid()}
    print(f"{len(results)} batches fitted by {len(processes)} worker processes "
          f"({workers} workers); largest relative error of k1, k2: {worst:.1%}")


if __name__ == "__main__":
    main()
