"""Fit a Gaussian mixture to samples by gradient descent on the negative log-likelihood.

Samples are drawn from a mixture of three Gaussians on the line. The model's parameters
are a dict of numpy arrays (mixture logits, means and log standard deviations); the
negative log-likelihood is plain numpy with a log-sum-exp over the components, and astad
differentiates it with respect to the whole dict. Adam does the rest.

Run it with:  python examples/gmm.py
"""
import numpy as np

import astad
from astad.testing import check_grads

TRUE_WEIGHTS = np.array([0.5, 0.3, 0.2])
TRUE_MEANS = np.array([-2.0, 1.0, 4.0])
TRUE_SIGMAS = np.array([0.6, 0.8, 0.5])


def log_sum_exp(a, axis):
    top = np.max(a, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(a - top), axis=axis)) + np.squeeze(top, axis=axis)


@astad.reverse_diff(argnums=0)
def negative_log_likelihood(params, x):
    log_weights = params["logits"] - log_sum_exp(params["logits"], axis=0)
    sigmas = np.exp(params["log_sigmas"])
    z = (x[:, None] - params["means"][None, :]) / sigmas          # (samples, components)
    log_density = -0.5 * z ** 2 - params["log_sigmas"] - 0.5 * np.log(2.0 * np.pi)
    return -np.mean(log_sum_exp(log_weights + log_density, axis=1))


def samples(n, rng):
    component = rng.choice(len(TRUE_WEIGHTS), size=n, p=TRUE_WEIGHTS)
    return rng.normal(TRUE_MEANS[component], TRUE_SIGMAS[component])


def adam(params, x, steps, rate=0.05, b1=0.9, b2=0.999):
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for t in range(1, steps + 1):
        g = negative_log_likelihood.grad(params, x)
        for k in params:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            params[k] = params[k] - rate * (m[k] / (1 - b1 ** t)) / (
                np.sqrt(v[k] / (1 - b2 ** t)) + 1e-8)
    return params


def main():
    rng = np.random.default_rng(0)
    x = samples(600, rng)
    params = {"logits": np.zeros(3), "means": np.array([-1.0, 0.0, 1.0]),
              "log_sigmas": np.zeros(3)}
    print(check_grads(negative_log_likelihood, params, x))

    print(f"negative log-likelihood per sample, start: "
          f"{negative_log_likelihood(params, x):.4f}")
    params = adam(params, x, steps=1500)
    print(f"negative log-likelihood per sample, after 1500 Adam steps: "
          f"{negative_log_likelihood(params, x):.4f}")
    weights = np.exp(params["logits"]) / np.sum(np.exp(params["logits"]))
    order = np.argsort(params["means"])
    print(f"{'':>8}{'weight':>14}{'mean':>16}{'sigma':>16}")
    print(f"{'':>8}{'true':>7}{'fit':>7}{'true':>8}{'fit':>8}{'true':>8}{'fit':>8}")
    for k, j in enumerate(order):
        print(f"{'comp ' + str(k):>8}{TRUE_WEIGHTS[k]:>7.2f}{weights[j]:>7.2f}"
              f"{TRUE_MEANS[k]:>8.2f}{params['means'][j]:>8.2f}"
              f"{TRUE_SIGMAS[k]:>8.2f}{np.exp(params['log_sigmas'][j]):>8.2f}")


if __name__ == "__main__":
    main()
