"""A soft decision tree: a model that is a sum type, fitted by gradient descent.

A tree is either a ``Leaf`` holding a value or a ``Split`` on one input feature, which
sends an input left or right through a soft (sigmoid) gate. Prediction is a recursive
function with ``match``; astad differentiates it with respect to the whole tree, and the
gradient is a tree of the same shape: a ``Leaf`` for every leaf, a ``Split`` for every
split, with the feature index (an int) kept as it is.

The data are samples of a step-like surface on the plane; the tree's thresholds and leaf
values are fitted together.

Run it with:  python examples/soft_tree.py
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import astad
from astad.testing import check_grads

SHARPNESS = 10.0  # how steep the gates are


@dataclass
class Leaf:
    value: float


@dataclass
class Split:
    feature: int        # which input coordinate the gate looks at (not differentiated)
    threshold: float
    left: Leaf | Split
    right: Leaf | Split


Tree = Leaf | Split


def predict(tree: Tree, x: list) -> float:
    match tree:
        case Leaf(value):
            return value
        case Split(feature, threshold, left, right):
            gate = 1.0 / (1.0 + math.exp(-SHARPNESS * (x[feature] - threshold)))
            return (1.0 - gate) * predict(left, x) + gate * predict(right, x)


@astad.reverse_diff(argnums=0)
def loss(tree: Tree, xs: list, ys: list) -> float:
    total = 0.0
    for x, y in zip(xs, ys):
        r = predict(tree, x) - y
        total += r * r
    return total / len(xs)


def target(x):
    """The surface to learn: 1 on the right of x0 = 0.3, plus 2 above x1 = -0.2 there."""
    return (1.0 if x[0] > 0.3 else 0.0) + (2.0 if x[0] > 0.3 and x[1] > -0.2 else 0.0)


def step(tree: Tree, grad: Tree, rate: float) -> Tree:
    """One gradient-descent step, walking the tree and its gradient together (thresholds
    move ten times slower than leaf values: the gates are steep)."""
    match tree, grad:
        case Leaf(value), Leaf(g):
            return Leaf(value - rate * g)
        case Split(feature, t, left, right), Split(_, g, g_left, g_right):
            return Split(feature, t - 0.1 * rate * g,
                         step(left, g_left, rate), step(right, g_right, rate))


def show(tree: Tree, indent: str = "") -> None:
    match tree:
        case Leaf(value):
            print(f"{indent}leaf {value:+.3f}")
        case Split(feature, threshold, left, right):
            print(f"{indent}x{feature} < {threshold:+.3f}:")
            show(left, indent + "  ")
            print(f"{indent}else:")
            show(right, indent + "  ")


def main():
    rng = random.Random(0)
    xs = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(120)]
    ys = [target(x) for x in xs]
    tree = Split(0, 0.0, Leaf(0.5), Split(1, 0.0, Leaf(0.5), Leaf(0.5)))
    print(check_grads(loss, tree, xs, ys))

    gradient = loss.grad(tree, xs, ys)
    print("the gradient is a tree too:", type(gradient).__name__, "with right child",
          type(gradient.right).__name__, "splitting on feature", gradient.right.feature)

    print(f"mean squared error before: {loss(tree, xs, ys):.4f}")
    for _ in range(200):
        tree = step(tree, loss.grad(tree, xs, ys), rate=1.0)
    print(f"mean squared error after 200 steps: {loss(tree, xs, ys):.4f}")
    print("fitted tree (the data switch at x0 = +0.3 and x1 = -0.2, to 0, 1 and 3):")
    show(tree)


if __name__ == "__main__":
    main()
