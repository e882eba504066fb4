"""A Gaussian process's kernel fitted by its marginal likelihood, with scipy.linalg.

Forty noisy values of a smooth function are modelled by a Gaussian process with a
squared-exponential kernel, k(x, x') = s^2 exp(-(x - x')^2 / (2 l^2)), plus noise of
variance n^2. The three hyperparameters (log l, log s, log n) maximise the log marginal
likelihood

    log p(y) = -1/2 y^T K^-1 y - 1/2 log det K - N/2 log 2 pi,

computed with scipy.linalg.cho_factor and cho_solve, the way one writes it with scipy.
astad differentiates through both (the factor as numpy code reading the triangle scipy
reads); the gradient is checked against finite differences first, then Adam climbs the
likelihood and the fitted process predicts held-out points.

Run it with:  python examples/gaussian_process.py
"""
import numpy as np
from scipy.linalg import cho_factor, cho_solve

import astad
from astad.testing import check_grads


def kernel(a, b, log_length, log_scale):
    squared = (a[:, None] - b[None, :]) ** 2
    return np.exp(2 * log_scale) * np.exp(-0.5 * squared / np.exp(2 * log_length))


def log_marginal_likelihood(params, x, y):
    log_length, log_scale, log_noise = params[0], params[1], params[2]
    k = kernel(x, x, log_length, log_scale) + np.exp(2 * log_noise) * np.eye(len(x))
    factor = cho_factor(k, lower=True)
    alpha = cho_solve(factor, y)
    return (-0.5 * y @ alpha - np.sum(np.log(np.diag(factor[0])))
            - 0.5 * len(x) * np.log(2 * np.pi))


def predict(params, x, y, x_new):
    log_length, log_scale, log_noise = params
    k = kernel(x, x, log_length, log_scale) + np.exp(2 * log_noise) * np.eye(len(x))
    return kernel(x_new, x, log_length, log_scale) @ cho_solve(cho_factor(k), y)


def data(seed=0, n=40):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3.0, 3.0, size=n))
    return x, np.sin(2.0 * x) + 0.3 * x + 0.1 * rng.normal(size=n)


def fit(x, y, steps=200, rate=0.05, b1=0.9, b2=0.999):
    params = np.array([0.0, 0.0, -1.0])
    m, v = np.zeros(3), np.zeros(3)
    gradient = astad.grad(log_marginal_likelihood)
    for t in range(1, steps + 1):
        g = -gradient(params, x, y)  # (Adam descends: the negative likelihood)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        params = params - rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-8)
    return params


def main():
    x, y = data()
    check_grads(log_marginal_likelihood, np.array([0.2, -0.1, -1.5]), x, y, argnums=0)
    print("OK: the log marginal likelihood's gradient matches finite differences")
    start = np.array([0.0, 0.0, -1.0])
    print(f"log marginal likelihood at the start: {log_marginal_likelihood(start, x, y):.4f}")
    params = fit(x, y)
    print(f"log marginal likelihood after the fit: {log_marginal_likelihood(params, x, y):.4f}")
    length, scale, noise = np.exp(params)
    print(f"length scale {length:.4f}, signal scale {scale:.4f}, noise {noise:.4f}")
    x_new = np.linspace(-2.5, 2.5, 11)
    error = np.max(np.abs(predict(params, x, y, x_new) - (np.sin(2.0 * x_new) + 0.3 * x_new)))
    print(f"largest error of the prediction at 11 new points: {error:.4f}")


if __name__ == "__main__":
    main()
