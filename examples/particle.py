"""Steer a charged particle onto a target: an optimisation through a simulation whose
force is itself a gradient.

The "particle" problem of Siskind and Pearlmutter's nested-derivative benchmarks, written
as plain Python: a particle starts at (0, 8) moving right; two charges pull it, one at
(10, 10 - w) and one at (10, 0), through the potential p(x) = sum 1 / |x - charge|, so its
acceleration is -grad p(x), a gradient taken inside the simulation. It moves by Euler
steps until it crosses the ground (y = 0); the objective is the square of where it lands.
The outer loop chooses the control w by Newton's method on the landing point (its root
minimises the objective), so the outer derivative differentiates the whole simulation
including the inner gradients; the objective's first and second derivatives (three
levels deep) are checked against finite differences too.

Run it with:  python examples/particle.py
"""
import math

import astad

DT = 0.1
START, VELOCITY = (0.0, 8.0), (0.75, 0.0)


def potential(x, y, w):
    """p at (x, y): one over the distance to each charge."""
    return 1.0 / math.hypot(x - 10.0, y - (10.0 - w)) + 1.0 / math.hypot(x - 10.0, y)


force = astad.grad(potential, argnums=(0, 1))  # grad p with respect to the position


def landing(w):
    """The x-coordinate where the particle crosses y = 0."""
    (x, y), (vx, vy) = START, VELOCITY
    while True:
        px, py = force(x, y, w)
        x_new, y_new = x + DT * vx, y + DT * vy
        if y_new < 0.0:
            t = -y / vy  # the time from (x, y) to the ground
            return x + t * vx
        x, y = x_new, y_new
        vx, vy = vx - DT * px, vy - DT * py


def landing_error(w):
    """The objective: the square of the landing point."""
    x = landing(w)
    return x * x


landing_slope = astad.grad(landing)
slope = astad.grad(landing_error)
curvature = astad.grad(slope)  # a third level of differentiation


def optimise(w=0.0, steps=20):
    """Newton's method on the landing point: w <- w - landing / d landing / dw."""
    for _ in range(steps):
        x = landing(w)
        if abs(x) < 1e-12:
            break
        w = w - x / landing_slope(w)
    return w


def main():
    h = 1e-6
    w = 0.1
    fd = (landing_error(w + h) - landing_error(w - h)) / (2 * h)
    print(f"d error / dw at w = {w}: {slope(w):.9f}, finite differences {fd:.9f}")
    fd2 = (slope(w + h) - slope(w - h)) / (2 * h)
    print(f"d2 error / dw2 at w = {w}: {curvature(w):.7f}, finite differences {fd2:.7f}")
    best = optimise()
    print(f"best control w = {best:.12f}, landing error {landing_error(best):.3e}")


if __name__ == "__main__":
    main()
