"""An implicit layer: a model whose hidden state is a fixed point, trained by gradients
of the fixed point (astad.fixed_point) rather than of the loop that finds it.

For an input u the hidden state z solves z = tanh(A z + b u + c) (A is kept small, so the
step is a contraction and the iteration converges from z = 0); the output is w . z. The
parameters (A, b, c, w) are fitted to y = sin(2 u) by Adam. The derivative of the fixed
point is the implicit function theorem's, (I - D A)^-1 D (...) with D = diag(1 - z^2),
computed by iterating as the value is, however many steps the value took; differentiating
the loop instead would give the derivative of its last iterate. The gradient is checked
against finite differences first.

Run it with:  python examples/equilibrium.py
"""
import numpy as np

import astad
from astad.testing import check_grads

WIDTH = 6


def step(params):
    a, b, c, _, u = params
    return lambda z: np.tanh(a @ z + b * u + c)


def apart(z, z_previous):
    return np.max(np.abs(z - z_previous))


def output(params, u):
    a, b, c, w = params
    z = astad.fixed_point(step, (a, b, c, w, u), np.zeros(WIDTH), apart, 1e-10)
    return w @ z


def loss(params, us, ys):
    a = params[0]
    penalty = 0.1 * np.sum(a * a)  # (keeps the step a contraction)
    return sum((output(params, u) - y) ** 2 for u, y in zip(us, ys)) / len(us) + penalty


def start(seed=0):
    rng = np.random.default_rng(seed)
    return (0.1 * rng.normal(size=(WIDTH, WIDTH)), rng.normal(size=WIDTH),
            0.1 * rng.normal(size=WIDTH), 0.5 * rng.normal(size=WIDTH))


def fit(params, us, ys, steps=150, rate=0.03, b1=0.9, b2=0.999):
    params = [np.array(p) for p in params]
    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    gradient = astad.grad(loss)
    for t in range(1, steps + 1):
        for p, g, (m, v) in zip(params, gradient(tuple(params), us, ys), moments):
            m[:] = b1 * m + (1 - b1) * g
            v[:] = b2 * v + (1 - b2) * g * g
            p -= rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-8)
    return tuple(params)


def main():
    us = np.linspace(-1.5, 1.5, 12)
    ys = np.sin(2 * us)
    params = start()
    check_grads(loss, params, us[:3], ys[:3], argnums=0)
    print("OK: the loss's gradient matches finite differences")
    print(f"loss at the start: {loss(params, us, ys):.5f}")
    fitted = fit(params, us, ys)
    print(f"loss after the fit: {loss(fitted, us, ys):.5f}")
    worst = max(abs(output(fitted, u) - np.sin(2 * u)) for u in np.linspace(-1.4, 1.4, 9))
    print(f"largest error at 9 new inputs: {worst:.4f}")


if __name__ == "__main__":
    main()
