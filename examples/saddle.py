"""A saddle point by nested optimisation: min over (x1, y1) of max over (x2, y2).

The "saddle" problem of Siskind and Pearlmutter's nested-derivative benchmarks, written
as plain Python: the outer minimisation takes gradient steps whose objective is itself
the result of an inner maximisation by gradient steps, with gradients taken inside. So
the outer gradient differentiates through the inner loop and the inner gradients (a
derivative of code that takes derivatives). astad keeps the two apart: the inner
``astad.grad`` is a differentiation of its own, and the outer one still sees how its
values were used inside (no perturbation confusion).

The objective f = (x1^2 + y1^2) - (x2^2 + y2^2) + c x1 x2 couples the two players
through c; the saddle point is the origin.

Run it with:  python examples/saddle.py
"""
import astad

COUPLING = 0.5
START = (1.0, 1.0)


def f(x1, y1, x2, y2):
    return (x1 * x1 + y1 * y1) - (x2 * x2 + y2 * y2) + COUPLING * x1 * x2


inner_gradient = astad.grad(f, argnums=(2, 3))


def inner_argmax(x1, y1, steps=30, rate=0.3):
    """The inner player's best reply, by gradient ascent from START."""
    x2, y2 = START
    for _ in range(steps):
        g2, h2 = inner_gradient(x1, y1, x2, y2)
        x2, y2 = x2 + rate * g2, y2 + rate * h2
    return x2, y2


def inner_max(x1, y1):
    """The value of the inner maximisation: the outer player's objective."""
    x2, y2 = inner_argmax(x1, y1)
    return f(x1, y1, x2, y2)


outer_gradient = astad.grad(inner_max, argnums=(0, 1))


def saddle(steps=40, rate=0.3):
    """The outer player's best move against the best reply, by gradient descent."""
    x1, y1 = START
    for _ in range(steps):
        g1, h1 = outer_gradient(x1, y1)
        x1, y1 = x1 - rate * g1, y1 - rate * h1
    return (x1, y1) + inner_argmax(x1, y1)


def main():
    # the outer gradient (through the inner loop and its gradients) against finite
    # differences of the same computation
    h = 1e-6
    g1, h1 = outer_gradient(0.8, -0.3)
    fd1 = (inner_max(0.8 + h, -0.3) - inner_max(0.8 - h, -0.3)) / (2 * h)
    fdh = (inner_max(0.8, -0.3 + h) - inner_max(0.8, -0.3 - h)) / (2 * h)
    print(f"outer gradient at (0.8, -0.3): ({g1:.9f}, {h1:.9f}), "
          f"finite differences ({fd1:.9f}, {fdh:.9f})")
    point = saddle()
    print("saddle point:", " ".join(f"{v:.3e}" for v in point))


if __name__ == "__main__":
    main()
