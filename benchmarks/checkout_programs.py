"""Programs of benchmarks/checkouts.py beside the ones of programs.py: structured
arguments, numpy on small arrays, an MLP, a vector-valued function."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Layer:
    w: list
    b: float


def structured(layers, d):
    s = 0.0
    for layer in layers:
        for w in layer.w:
            s = s + w * layer.b
    return s + d["a"] * d["b"][0]


def small_chain(x):
    y = x
    for _ in range(10):
        y = np.tanh(y) * x + np.sin(y)
    return np.sum(y)


W1 = np.random.default_rng(2).normal(size=(20, 30)) * 0.1
W2 = np.random.default_rng(3).normal(size=(30, 5)) * 0.1
X = np.random.default_rng(1).normal(size=(16, 20))


def mlp(w, x):
    h = np.tanh(x @ w)
    return np.sum(np.tanh(h @ W2) ** 2)


def vector_field(x):
    return np.sin(x) * x[::-1] + np.cumsum(x)


def elementwise(x):
    """numpy's element-wise functions whose partials come from the scalar rules' text."""
    return np.sum(np.tanh(x) * np.sqrt(x) + np.arctan(x) + np.arcsinh(x) * np.cbrt(x))


ELEMENTWISE_SMALL = np.random.default_rng(4).normal(size=1000) ** 2 + 0.1
ELEMENTWISE_LARGE = np.random.default_rng(5).normal(size=100_000) ** 2 + 0.1
