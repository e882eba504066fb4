"""Fit a damped oscillation to noisy measurements by gradient descent.

We measure a damped spring, y(t) = a * exp(-t / tau) * cos(omega * t + phase), at 60
instants with some noise, and recover the four parameters by minimising the mean squared
error with Adam. The loss is plain Python over lists of floats; astad gives its gradient
with respect to the parameters (a dict of floats, so the gradient is a dict too).

Run it with:  python examples/curve_fit.py
"""
import math
import random

import astad
from astad.testing import check_grads

TRUE = {"a": 2.0, "tau": 1.5, "omega": 4.0, "phase": 0.3}


def model(p, t):
    return p["a"] * math.exp(-t / p["tau"]) * math.cos(p["omega"] * t + p["phase"])


@astad.reverse_diff(argnums=0)
def loss(p, ts, ys):
    total = 0.0
    for t, y in zip(ts, ys):
        r = model(p, t) - y
        total += r * r
    return total / len(ts)


def measurements(n=60, noise=0.05, seed=1):
    rng = random.Random(seed)
    ts = [4.0 * k / (n - 1) for k in range(n)]
    ys = [model(TRUE, t) + rng.gauss(0.0, noise) for t in ts]
    return ts, ys


def adam(p, ts, ys, steps=800, rate=0.02, b1=0.9, b2=0.999):
    """Adam on a dict of floats; returns the fitted parameters and the loss history."""
    m = {k: 0.0 for k in p}
    v = {k: 0.0 for k in p}
    history = []
    for step in range(1, steps + 1):
        value, g = loss.value_and_grad(p, ts, ys)
        history.append(value)
        for k in p:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            m_hat, v_hat = m[k] / (1 - b1 ** step), v[k] / (1 - b2 ** step)
            p[k] -= rate * m_hat / (math.sqrt(v_hat) + 1e-8)
    return p, history


def main():
    ts, ys = measurements()
    guess = {"a": 1.0, "tau": 1.0, "omega": 3.5, "phase": 0.0}
    print(check_grads(loss, guess, ts, ys))  # astad's gradient agrees with finite differences

    fitted, history = adam(dict(guess), ts, ys)
    for step in (0, 50, 200, len(history) - 1):
        print(f"step {step:4d}: mean squared error {history[step]:.5f}")
    print(f"{'parameter':<10}{'true':>8}{'guess':>8}{'fitted':>9}")
    for k in TRUE:
        print(f"{k:<10}{TRUE[k]:>8.3f}{guess[k]:>8.3f}{fitted[k]:>9.3f}")
    worst = max(abs(fitted[k] - TRUE[k]) / TRUE[k] for k in ("a", "tau", "omega"))
    print(f"largest relative error of a, tau, omega: {worst:.1%}")


if __name__ == "__main__":
    main()
