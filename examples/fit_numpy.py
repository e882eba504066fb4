"""Fit a small neural network with numpy and astad: gradient descent on synthetic data.

The model is a 2-layer MLP (tanh hidden layer) regressing y = sin(3 x1) + 0.5 x2^2 from
noisy samples. The loss is written with plain numpy; astad differentiates it with
respect to the parameters, a dict of float arrays, and returns a dict of the same
shape. Run it:

    python examples/fit_numpy.py
"""
import time

import numpy as np

import astad


def predict(params, X):
    hidden = np.tanh(X @ params["W1"] + params["b1"])
    return (hidden @ params["W2"] + params["b2"])[:, 0]


@astad.reverse_diff(argnums=0)
def loss(params, X, y):
    residual = predict(params, X) - y
    return np.mean(residual ** 2)


def make_data(n, rng):
    X = rng.uniform(-1.0, 1.0, size=(n, 2))
    y = np.sin(3.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y


def init_params(n_in, n_hidden, rng):
    return {
        "W1": rng.normal(size=(n_in, n_hidden)) / np.sqrt(n_in),
        "b1": np.zeros(n_hidden),
        "W2": rng.normal(size=(n_hidden, 1)) / np.sqrt(n_hidden),
        "b2": np.zeros(1),
    }


def gradient_check(params, X, y, rng, eps=1e-6):
    """Compare a few gradient entries with central finite differences."""
    grads = loss.grad(params, X, y)
    worst = 0.0
    for name in params:
        for _ in range(2):
            idx = tuple(int(rng.integers(s)) for s in params[name].shape)
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][idx] += eps
            minus[name][idx] -= eps
            fd = (loss(plus, X, y) - loss(minus, X, y)) / (2 * eps)
            worst = max(worst, abs(fd - grads[name][idx]) / max(1.0, abs(fd)))
    return worst


def main():
    rng = np.random.default_rng(0)
    X, y = make_data(256, rng)
    params = init_params(2, 32, rng)

    print(f"gradient check: largest relative difference from finite differences = "
          f"{gradient_check(params, X, y, rng):.2e}")

    learning_rate, momentum = 0.1, 0.9
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    initial = loss(params, X, y)
    print(f"initial loss = {initial:.6f}")
    start = time.perf_counter()
    steps = 600
    for step in range(1, steps + 1):
        value, grads = loss.value_and_grad(params, X, y)
        for k in params:
            velocity[k] = momentum * velocity[k] - learning_rate * grads[k]
            params[k] = params[k] + velocity[k]
        if step % 100 == 0:
            print(f"step {step:4d}: loss = {value:.6f}")
    elapsed = time.perf_counter() - start
    final = loss(params, X, y)
    print(f"final loss = {final:.6f}  ({initial / final:.1f}x lower, {steps} steps in "
          f"{elapsed:.2f} s)")


if __name__ == "__main__":
    main()
