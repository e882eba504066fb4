"""Loop programs of simulation code for the compiled backend (tests/test_compiled.py,
benchmarks/compiled.py): each as scientists write it, in plain Python."""
import math

import numpy as np

import astad


def dot(x, y):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    return s


def pendulum(theta0, omega0, g, damping, dt, steps=1000):
    """A damped pendulum, ``steps`` steps of classic Runge-Kutta: the angle at the end."""
    th, om = theta0, omega0
    for _ in range(steps):
        k1t, k1o = om, -g * math.sin(th) - damping * om
        th2, om2 = th + 0.5 * dt * k1t, om + 0.5 * dt * k1o
        k2t, k2o = om2, -g * math.sin(th2) - damping * om2
        th3, om3 = th + 0.5 * dt * k2t, om + 0.5 * dt * k2o
        k3t, k3o = om3, -g * math.sin(th3) - damping * om3
        th4, om4 = th + dt * k3t, om + dt * k3o
        k4t, k4o = om4, -g * math.sin(th4) - damping * om4
        th = th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
        om = om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
    return th


def pair_force(a, b):
    d = a - b
    return d / (d * d + 0.01) ** 1.5


def particles(x0, v0, dt, steps=10):
    """Particles on a line with pairwise forces (a helper), explicit Euler: the energy-like
    sum of squares at the end."""
    n = len(x0)
    x = [0.0] * n
    v = [0.0] * n
    for i in range(n):
        x[i] = x0[i]
        v[i] = v0[i]
    for _ in range(steps):
        for i in range(n):
            f = 0.0
            for j in range(n):
                if i != j:
                    f += pair_force(x[i], x[j])
            v[i] = v[i] + dt * f
        for i in range(n):
            x[i] = x[i] + dt * v[i]
    return sum(xi * xi for xi in x)


def tree_fold(w, depth):
    """A binary tree folded recursively: each node mixes its children with weight ``w``."""
    if depth == 0:
        return math.tanh(w)
    left = tree_fold(w * 0.9, depth - 1)
    right = tree_fold(w * 1.1 - 0.05, depth - 1)
    return math.sin(left) * right + w * 0.01


def smoothed_steps(xs, k):
    """Branches, a while loop, math functions, min and max, a reversed loop."""
    total = 0.0
    for i in range(len(xs)):
        v = xs[i]
        if v > 0.5:
            total += math.log1p(v * v) * k
        else:
            total -= math.exp(-v) * max(v, 0.1)
    j = 0
    while j < len(xs) and total < 40.0:
        total += min(xs[j], 0.3) * math.sqrt(abs(xs[j]) + 1.0)
        j += 1
    for v in reversed(xs):
        total = total * 0.5 + math.atan2(v, 1.0 + k)
    return total


def monte_carlo_path(s0, mu, sigma, shocks):
    """A price path driven by given normal shocks; the mean payoff over the path."""
    s = s0
    payoff = 0.0
    dt = 1.0 / len(shocks)
    for z in shocks:
        s = s * math.exp((mu - 0.5 * sigma * sigma) * dt + sigma * math.sqrt(dt) * z)
        payoff += max(s - 1.0, 0.0)
    return payoff / len(shocks)


def rows_weighted(m, w):
    """A list of lists read by element."""
    s = 0.0
    for i in range(len(m)):
        for j in range(len(m[i])):
            s += m[i][j] * w[j] ** 2
    return s


RATE = 0.5  # (a global the code reads: changing it changes the gradient)


def decay(x, n):
    s = x
    for _ in range(n):
        s = s - RATE * s * s
    return s


def growing_int(x, n):
    """An int that grows past 64 bits: numba would wrap it, Python does not."""
    k = 1
    s = 0.0
    for _ in range(n):
        k = k * 3
        s += x * (k % 7)
    return s


def maybe_int(xs):
    s = 0
    for v in xs:
        s += v * v
    return s


def logs(xs):
    s = 0.0
    for v in xs:
        s += math.log(v)
    return s


def shifted(xs, k):
    s = 0.0
    for i in range(len(xs)):
        s += xs[i + k] * xs[i]
    return s


@astad.reverse_diff(compile="numba")
def norm2(xs):
    """Decorated where it is defined: it pickles by reference, with its option."""
    s = 0.0
    for v in xs:
        s += v * v
    return s


def written_then_reduced(xs, w):
    """An array written element by element, then summed and averaged by numpy."""
    n = len(xs)
    y = np.zeros(n)
    for i in range(n):
        y[i] = math.exp(w * xs[i]) - xs[i]
    return np.sum(y) + np.mean(y) * w


def lattice_forces(x, k):
    """The forces on a chain of springs with a cubic term: a tuple of floats (a Jacobian's
    rows), one per site."""
    n = len(x)
    out = []
    for i in range(n):
        left = x[i - 1] if i > 0 else 0.0
        right = x[i + 1] if i < n - 1 else 0.0
        d1, d2 = x[i] - left, right - x[i]
        out.append(-k * (d1 - d2) - 0.1 * (d1 ** 3 - d2 ** 3))
    return tuple(out)


def three_moments(xs):
    s0 = s1 = s2 = 0.0
    for v in xs:
        s0 += math.exp(-v)
        s1 += v * math.exp(-v)
        s2 += v * v * math.exp(-v)
    return s0, s1, s2


def softplus_chain(xs, k):
    """A recurrence of numpy's functions of floats, element by element (numpy's scalar
    functions: numba compiles them as C's)."""
    h = 0.0
    for x in xs:
        h = np.log1p(np.exp(k * x + 0.5 * h)) - np.tanh(h) * np.sqrt(1.0 + x * x)
    return h + np.maximum(h, 0.1) * np.arctan2(h, k)
