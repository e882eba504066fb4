"""Find where a hanging chain comes to rest: Newton's method with astad's Hessian.

A chain of point masses joined by elastic links hangs between two fixed hooks. Its rest
shape minimises the potential energy (the links' elastic energy plus gravity), a smooth
function of the free masses' positions. Newton's method solves grad E = 0 with the
Hessian: x <- x - H^-1 grad E, and converges in a handful of steps where gradient
descent would take thousands. astad gives both: ``astad.grad`` (reverse mode) and
``astad.hessian`` (forward mode over reverse mode), of the same plain Python function.

Run it with:  python examples/newton_chain.py
"""
import numpy as np

import astad
from astad.testing import check_grads

N = 12               # free masses
LEFT, RIGHT = np.array([0.0, 0.0]), np.array([10.0, 0.0])
REST_LENGTH = 0.75   # m, each of the N + 1 links at rest
STIFFNESS = 400.0    # N/m
MASS, G = 0.2, 9.81  # kg, m/s^2


def energy(x):
    """Potential energy (J) of the chain; ``x`` holds the free masses' (x, y) pairs."""
    points = np.concatenate([LEFT, x, RIGHT]).reshape(-1, 2)
    links = points[1:] - points[:-1]
    stretch = np.sqrt(np.sum(links * links, axis=1)) - REST_LENGTH
    return 0.5 * STIFFNESS * np.sum(stretch * stretch) + MASS * G * np.sum(points[1:-1, 1])


gradient = astad.grad(energy)
hessian = astad.hessian(energy)


def newton(x, steps=20, tolerance=1e-10):
    """Newton's method on grad E = 0; the norms of the gradient along the way."""
    norms = []
    for _ in range(steps):
        g = gradient(x)
        norms.append(float(np.linalg.norm(g)))
        if norms[-1] < tolerance:
            break
        x = x - np.linalg.solve(hessian(x), g)
    return x, norms


def main():
    start = np.column_stack([np.linspace(0.0, 10.0, N + 2)[1:-1], np.zeros(N)]).ravel()
    check_grads(energy, start)  # astad's gradient against finite differences first
    h = hessian(start)
    # the Hessian against finite differences of the gradient, one column at a time
    step = 1e-6
    columns = [(gradient(start + step * e) - gradient(start - step * e)) / (2 * step)
               for e in np.eye(start.size)]
    print(f"Hessian {h.shape}: largest difference from finite differences of the "
          f"gradient {np.max(np.abs(h - np.array(columns).T)):.2e}")
    rest, norms = newton(start)
    print("Newton steps:", len(norms) - 1)
    print("gradient norm per step:", " ".join(f"{n:.1e}" for n in norms))
    lowest = rest.reshape(-1, 2)[:, 1].min()
    print(f"rest shape: lowest point at y = {lowest:.6f} m, energy = {energy(rest):.9f} J")
    eigenvalues = np.linalg.eigvalsh(hessian(rest))
    print(f"smallest Hessian eigenvalue at rest: {eigenvalues[0]:.6f} (positive: a minimum)")


if __name__ == "__main__":
    main()
