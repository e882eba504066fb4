"""Decorated functions that worker processes import by name (tests/test_scale_out.py).

Not a test module: the workers of a process pool or a Dask cluster import it, as they
would import a user's package.
"""
import math
from dataclasses import dataclass

import numpy as np

import astad


@astad.reverse_diff
def loss(w, b, xs, ys):
    """Mean squared error of a tanh unit: lists of floats, a loop, the tape path."""
    total = 0.0
    for x, y in zip(xs, ys):
        err = math.tanh(w * x + b) - y
        total += err * err
    return total / len(xs)


@astad.reverse_diff(argnums=0)
def array_loss(weights, inputs, targets):
    """A numpy model: the gradient with respect to the weights only."""
    return float(np.mean((np.tanh(inputs @ weights) - targets) ** 2))


@astad.reverse_diff
def spiral(r, theta):
    """A list result: for .vjp."""
    return [r * math.cos(theta), r * math.sin(theta), r * theta]


@dataclass
class Oscillator:
    stiffness: float
    damping: float

    @astad.reverse_diff
    def energy(self, x, v):
        """Energy after one damped step from (x, v)."""
        x_next = x + 0.1 * v
        v_next = v - 0.1 * (self.stiffness * x + self.damping * v)
        return 0.5 * self.stiffness * x_next * x_next + 0.5 * v_next * v_next

    @classmethod
    @astad.reverse_diff
    def standard_energy(cls, x):
        return 0.5 * cls.reference * x * x

    reference = 2.5


def plain_energy(x, y):
    """Not decorated: for astad.grad(plain_energy) and the other transforms."""
    return math.exp(-x * y) + x * x * y


def make_loss(data, decorate=True):
    """A closure over its data: not importable, so it travels by value."""
    def fit(a, c):
        return sum((a * math.exp(-c * t) - y) ** 2 for t, y in data)
    return astad.reverse_diff(fit) if decorate else fit


def call(function, args):
    """Run ``function(*args)`` in a worker (the pools' map takes one argument)."""
    return function(*args)


def pull(vjp, args, cotangent):
    """``vjp(*args)``'s pullback applied to ``cotangent``, in a worker (a pullback holds
    its tape and stays in the process that made it)."""
    return vjp(*args)[1](cotangent)


def token_of(obj):
    """Dask's token of ``obj``, computed where this runs."""
    from dask.base import tokenize
    return tokenize(obj, ensure_deterministic=True)


def parameters(count, seed=0):
    """``count`` argument tuples for ``loss``: small data sets with their own parameters."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        xs = [float(x) for x in rng.normal(size=5)]
        ys = [float(y) for y in rng.uniform(-0.5, 0.5, size=5)]
        cases.append((float(rng.normal()), float(rng.normal()), xs, ys))
    return cases

