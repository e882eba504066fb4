"""Throw a ball as far as possible against air drag: optimise the launch angle.

The flight is simulated step by step (semi-implicit Euler) with quadratic drag, in a
``while`` loop that stops at impact; the landing point is interpolated between the last
two steps, so the range is a continuous function of the angle. astad differentiates the
whole simulation, loop and all, giving d range / d angle; a bisection on the sign of that
slope finds the best angle (checked against a grid search). Without drag the answer would
be 45 degrees; drag makes it lower.

Run it with:  python examples/projectile.py
"""
import math

import astad
from astad.testing import check_grads

G = 9.81          # m/s^2
DT = 0.01         # s, the simulation step


@astad.reverse_diff(argnums=0)
def flight_range(angle, speed, drag):
    """Horizontal distance (m) at which a ball launched at ``angle`` (radians) with
    ``speed`` (m/s) lands, with drag acceleration ``drag * |v| * v``."""
    x, y = 0.0, 0.0
    vx, vy = speed * math.cos(angle), speed * math.sin(angle)
    while True:
        v = math.hypot(vx, vy)
        vx -= drag * v * vx * DT
        vy -= (G + drag * v * vy) * DT
        x_next, y_next = x + vx * DT, y + vy * DT
        if y_next < 0.0:
            # impact between the two steps: interpolate where y crosses zero
            return x + (x_next - x) * y / (y - y_next)
        x, y = x_next, y_next


def best_angle(speed, drag, low=20.0, high=60.0, steps=40):
    """The angle (radians) where d range / d angle changes sign, by bisection on astad's
    slope between ``low`` and ``high`` degrees."""
    low, high = math.radians(low), math.radians(high)
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if flight_range.grad(middle, speed, drag) > 0.0:
            low = middle    # still climbing: the best angle is higher
        else:
            high = middle
    return 0.5 * (low + high)


def main():
    speed = 30.0
    print(check_grads(flight_range, 0.7, speed, 0.01, argnums=0))
    print(f"launch speed {speed} m/s")
    print(f"{'drag (1/m)':>10}  {'best angle':>10}  {'range (m)':>9}  {'grid search':>11}")
    for drag in (0.0, 0.005, 0.02):
        angle = best_angle(speed, drag)
        grid = max((k / 10 for k in range(300, 601)),
                   key=lambda deg: flight_range(math.radians(deg), speed, drag))
        print(f"{drag:>10}  {math.degrees(angle):>9.2f}°  "
              f"{flight_range(angle, speed, drag):>9.2f}  {grid:>10.1f}°")


if __name__ == "__main__":
    main()
