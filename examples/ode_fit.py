"""The rates of a predator-prey model fitted to noisy counts, through scipy's ODE solver.

Lotka-Volterra: prey x and predators y with

    x' = a x - b x y,    y' = c x y - d y

are counted at 9 times with 3% noise. The four rates are found by least squares on
the logarithms of the counts, the trajectory computed by scipy.integrate.odeint. astad
differentiates through odeint by the adjoint method (the adjoint equation integrated
backwards with the state: one pullback of the right-hand side per solver step), with
respect to the rates and the initial populations alike; the gradient is checked against
finite differences first, then Adam recovers the rates.

Run it with:  python examples/ode_fit.py
"""
import numpy as np
from scipy.integrate import odeint

import astad
from astad.testing import check_grads

TRUE_RATES = np.array([1.0, 0.5, 0.3, 0.8])
TRUE_START = np.array([2.0, 1.0])
TIMES = np.linspace(0.0, 8.0, 9)


def predator_prey(state, t, a, b, c, d):
    prey, predators = state
    return np.array([a * prey - b * prey * predators, c * prey * predators - d * predators])


def trajectory(log_rates, log_start):
    rates = np.exp(log_rates)
    return odeint(predator_prey, np.exp(log_start), TIMES, args=tuple(rates),
                  rtol=1e-7, atol=1e-9)


def misfit(log_rates, log_start, counts):
    return np.mean((np.log(trajectory(log_rates, log_start)) - np.log(counts)) ** 2)


def counts(seed=0):
    rng = np.random.default_rng(seed)
    clean = odeint(predator_prey, TRUE_START, TIMES, args=tuple(TRUE_RATES), rtol=1e-10)
    return clean * np.exp(0.03 * rng.normal(size=clean.shape))


def fit(observed, steps=120, rate=0.05, b1=0.9, b2=0.999):
    params = [np.log(np.array([0.8, 0.6, 0.25, 1.0])), np.log(np.array([1.5, 1.5]))]
    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    gradient = astad.grad(misfit, argnums=(0, 1))
    for t in range(1, steps + 1):
        for p, g, (m, v) in zip(params, gradient(*params, observed), moments):
            m[:] = b1 * m + (1 - b1) * g
            v[:] = b2 * v + (1 - b2) * g * g
            p -= rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-8)
    return params


def main():
    observed = counts()
    check_grads(misfit, np.log(TRUE_RATES) + 0.1, np.log(TRUE_START) - 0.1, observed,
                argnums=(0, 1))
    print("OK: the misfit's gradient matches finite differences")
    start = [np.log(np.array([0.8, 0.6, 0.25, 1.0])), np.log(np.array([1.5, 1.5]))]
    print(f"misfit at the start: {misfit(*start, observed):.5f}")
    log_rates, log_start = fit(observed)
    print(f"misfit after the fit: {misfit(log_rates, log_start, observed):.5f}")
    for name, true, fitted in zip("abcd", TRUE_RATES, np.exp(log_rates)):
        print(f"{name} {true:.4f} {fitted:.4f}")


if __name__ == "__main__":
    main()
