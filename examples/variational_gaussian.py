"""Variational inference of a Gaussian posterior with scipy.stats, by gradient steps.

The mean theta of noisy measurements y_i ~ Normal(theta, 1.5), with the prior
theta ~ Normal(0, 2), has a Gaussian posterior known in closed form. Here it is found
instead as a variational family q = Normal(m, s) maximising the evidence lower bound
(ELBO), estimated with the reparametrisation z = m + s * eps over fixed draws eps:

    ELBO(m, log s) = mean_j [ sum_i log p(y_i | z_j) + log p(z_j) - log q(z_j) ]

written with scipy.stats.norm.logpdf (the likelihood and prior as scipy's method, the
variational density frozen: scipy.stats.norm(m, s).logpdf). astad differentiates it
with respect to (m, log s); the gradient is checked against finite differences first,
then Adam climbs the ELBO and the fit is compared with the exact posterior.

Run it with:  python examples/variational_gaussian.py
"""
import numpy as np
import scipy.stats as st

import astad
from astad.testing import check_grads

NOISE, PRIOR_SD = 1.5, 2.0
EPS = st.norm.ppf((np.arange(200) + 0.5) / 200)  # fixed draws: normal quantiles


def elbo(params, y):
    m, log_s = params[0], params[1]
    s = np.exp(log_s)
    z = m + s * EPS
    log_likelihood = np.sum(st.norm.logpdf(y[:, None], z[None, :], NOISE), axis=0)
    log_prior = st.norm.logpdf(z, loc=0.0, scale=PRIOR_SD)
    log_q = st.norm(m, s).logpdf(z)
    return np.mean(log_likelihood + log_prior - log_q)


def exact_posterior(y):
    precision = 1.0 / PRIOR_SD ** 2 + len(y) / NOISE ** 2
    return np.sum(y) / NOISE ** 2 / precision, 1.0 / np.sqrt(precision)


def fit(y, steps=400, rate=0.05, b1=0.9, b2=0.999):
    params = np.array([0.0, 0.0])
    m, v = np.zeros(2), np.zeros(2)
    gradient = astad.grad(elbo)
    for t in range(1, steps + 1):
        g = -gradient(params, y)  # (Adam descends: the negative ELBO)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        params = params - rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-8)
    return params


def main():
    rng = np.random.default_rng(0)
    y = rng.normal(1.3, NOISE, size=20)
    check_grads(elbo, np.array([0.4, -0.7]), y, argnums=0)
    print("OK: the ELBO's gradient matches finite differences")
    params = fit(y)
    mean, sd = exact_posterior(y)
    print(f"ELBO at the fit: {elbo(params, y):.4f}")
    print(f"fitted posterior mean and sd: {params[0]:.4f} {np.exp(params[1]):.4f}")
    print(f"exact posterior mean and sd:  {mean:.4f} {sd:.4f}")


if __name__ == "__main__":
    main()
