"""astad quickstart: the gradient of a hanging rope's energy.

A rope is modelled as a chain of point masses joined by springs. A spring pulls when
it is stretched past its rest length and goes slack when compressed (a branch), and
every mass has a gravitational energy. We differentiate the total energy with respect
to every coordinate, check the gradient against finite differences, and say where to
read the code astad generated.

Run it with:  python examples/quickstart.py
"""
import math

import astad

STIFFNESS = 50.0   # spring constant k
REST = 1.0         # rest length of each spring
GRAVITY = 9.81     # g, with unit masses


@astad.reverse_diff
def rope_energy(xs, ys):
    """Elastic plus gravitational energy of a chain of unit masses at (xs[i], ys[i])."""
    energy = 0.0
    for i in range(len(xs) - 1):
        length = math.hypot(xs[i + 1] - xs[i], ys[i + 1] - ys[i])
        stretch = length - REST
        if stretch > 0.0:               # a rope pulls when stretched...
            energy += 0.5 * STIFFNESS * stretch ** 2
        # ...and is slack when compressed: no elastic energy
    for y in ys:
        energy += GRAVITY * y
    return energy


@astad.reverse_diff
def spring_lengths(xs, ys):
    """The length of every spring: a function with a list result, for .vjp."""
    return [math.hypot(xs[i + 1] - xs[i], ys[i + 1] - ys[i]) for i in range(len(xs) - 1)]


def central_difference(f, xs, ys, h=1e-6):
    """The gradient of f(xs, ys) by central finite differences, one coordinate at a time."""
    def partial(which, i):
        plus = [list(xs), list(ys)]
        minus = [list(xs), list(ys)]
        plus[which][i] += h
        minus[which][i] -= h
        return (f(*plus) - f(*minus)) / (2 * h)
    return ([partial(0, i) for i in range(len(xs))],
            [partial(1, i) for i in range(len(ys))])


def show(label, values):
    print(f"  {label:<10}" + " ".join(f"{v:>10.5f}" for v in values))


def main():
    # Five masses hanging between two ends; the second spring is slack (length < REST).
    xs = [0.0, 1.1, 1.9, 3.0, 4.2]
    ys = [0.0, -0.6, -0.9, -0.7, 0.0]

    # 1. Calling the decorated function runs the original Python code.
    energy = rope_energy(xs, ys)
    print(f"energy = {energy:.6f}")

    # 2. .grad gives d(energy)/d(xs) and d(energy)/d(ys): one gradient per positional
    #    argument, each shaped like its argument (here: lists of floats).
    grad_xs, grad_ys = rope_energy.grad(xs, ys)
    fd_xs, fd_ys = central_difference(rope_energy, xs, ys)
    print("gradient with respect to xs:")
    show("astad", grad_xs)
    show("finite-d", fd_xs)
    print("gradient with respect to ys:")
    show("astad", grad_ys)
    show("finite-d", fd_ys)
    error = max(abs(a - b) for a, b in zip(grad_xs + grad_ys, fd_xs + fd_ys))
    print(f"largest difference from finite differences: {error:.2e}")
    assert error < 1e-4, "astad's gradient disagrees with finite differences"

    # 3. .vjp works for any result shape. Here the result is a list (one length per
    #    spring); the pullback maps a cotangent of that shape to gradients of the inputs.
    lengths, pullback = spring_lengths.vjp(xs, ys)
    print("spring lengths =", [round(length, 4) for length in lengths])
    cotangent = [1.0, 0.0, 0.0, 0.0]   # pick out d(lengths[0]) / d(inputs)
    d_xs, d_ys = pullback(cotangent)
    print("d lengths[0] / d xs =", [round(v, 4) for v in d_xs])
    print("d lengths[0] / d ys =", [round(v, 4) for v in d_ys])
    print(f"operations recorded on the tape: {pullback.tape_length}")

    # 4. The generated code: astad rewrote rope_energy's source into Python you can read
    #    (each original line kept as a comment above its rewrite). It is long, so it is
    #    not printed here; one line prints it.
    lines = rope_energy.source.count("\n")
    print()
    print(f"the generated code ({lines} lines): print(rope_energy.source), or from a shell:")
    print("  python -m astad show --original examples/quickstart.py:rope_energy")

if __name__ == "__main__":
    main()
