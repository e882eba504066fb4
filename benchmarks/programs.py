"""The benchmark programs (Smeding & Vakar, POPL 2023, Section 10, plus a recursion test).

Every program is written as a plain Python function over floats / lists of floats, in
the style a user would write it. ``run.py`` differentiates these functions with
``astad.reverse_diff`` and times them next to their undifferentiated (primal) call and
a hand-written gradient.

The functions here are deliberately plain: the primal timings use exactly these
function objects, so they carry no wrapper overhead. The one exception is the
recursive ``chain``: its recursive call goes through the module-global name, so the
differentiated version has to be the decorated object itself (``chain``), and the
primal baseline is an identical undecorated twin (``chain_primal``).

Each program has, where short, a hand-written gradient returning the same structure
astad returns: a tuple with one entry per positional argument, lists of floats for
list arguments.
"""
from __future__ import annotations

import dataclasses
import math
import random
import sys

import astad

# ---------------------------------------------------------------------------------------
# 1. scalar multiplication: (Double, Double) -> Double


def scalar_mult(x, y):
    return x * y


def scalar_mult_grad(x, y):
    return (y, x)


# ---------------------------------------------------------------------------------------
# 2. dot product over Python lists: ([Double], [Double]) -> Double


def dot(xs, ys):
    s = 0.0
    for i in range(len(xs)):
        s = s + xs[i] * ys[i]
    return s


def dot_grad(xs, ys):
    # d/dxs = ys, d/dys = xs (fresh lists, as a gradient function would return)
    return (list(ys), list(xs))


# ---------------------------------------------------------------------------------------
# 3. matrix-vector product, then sum: ([[Double]], [Double]) -> Double
#    M is an n x n matrix as a list of row lists.


def sum_matvec(m, v):
    s = 0.0
    for i in range(len(m)):
        row = m[i]
        r = 0.0
        for j in range(len(v)):
            r = r + row[j] * v[j]
        s = s + r
    return s


def sum_matvec_grad(m, v):
    # f = sum_i sum_j M[i][j] v[j]:  df/dM[i][j] = v[j],  df/dv[j] = sum_i M[i][j]
    n = len(v)
    gm = [list(v) for _ in range(len(m))]
    gv = [0.0] * n
    for row in m:
        for j in range(n):
            gv[j] += row[j]
    return (gm, gv)


# ---------------------------------------------------------------------------------------
# 4. rotate_vec_by_quat (Krawiec et al. 2022), x-component, plain scalar arithmetic.
#
#    As in the paper's benchmark (ad-dualrev-th bench/Main.hs), the quaternion is stored
#    as Quaternion x y z w with the *scalar part last*: u = (q0, q1, q2), s = q3, and
#        r = 2 (u.v) u + (s^2 - u.u) v + 2 s (u x v),
#    which is the vector part of the unnormalised sandwich product q v conj(q).
#    At q = (1.1, 2.2, 3.3, 4.4), v = (5.5, 6.6, 7.7) the x-component is 71.874.
#    (The variant r = v + 2w(u x v) + 2 u x (u x v) with w = q0 agrees with this only for
#    unit quaternions; at the point above it gives -90.332, so it is not used.)


def rotate_vec_by_quat_x(q0, q1, q2, q3, v0, v1, v2):
    s = q3
    udotv = q0 * v0 + q1 * v1 + q2 * v2
    udotu = q0 * q0 + q1 * q1 + q2 * q2
    cross_x = q1 * v2 - q2 * v1
    return 2.0 * udotv * q0 + (s * s - udotu) * v0 + 2.0 * s * cross_x


def rotate_vec_by_quat_x_grad(q0, q1, q2, q3, v0, v1, v2):
    udotv = q0 * v0 + q1 * v1 + q2 * v2
    udotu = q0 * q0 + q1 * q1 + q2 * q2
    s = q3
    return (
        2.0 * udotv,                          # d/dq0 (2 v0 q0 + 2 u.v - 2 q0 v0)
        2.0 * v1 * q0 - 2.0 * q1 * v0 + 2.0 * s * v2,
        2.0 * v2 * q0 - 2.0 * q2 * v0 - 2.0 * s * v1,
        2.0 * s * v0 + 2.0 * (q1 * v2 - q2 * v1),
        2.0 * q0 * q0 + (s * s - udotu),
        2.0 * q1 * q0 - 2.0 * s * q2,
        2.0 * q2 * q0 + 2.0 * s * q1,
    )


ROTATE_POINT = (1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7)
ROTATE_EXPECTED_X = 71.874

# 4b. rotate_vec_by_quat written with Vec3 and Quaternion dataclasses (issue 3): the same
#     formula, with small vector helpers. Differentiated with respect to q and v; the
#     gradients are a Quaternion and a Vec3.


@dataclasses.dataclass
class Vec3:
    x: float
    y: float
    z: float


@dataclasses.dataclass
class Quaternion:
    x: float
    y: float
    z: float
    w: float        # the scalar part, last (as in the paper's benchmark)


def vdot(a, b):
    return a.x * b.x + a.y * b.y + a.z * b.z


def vcross(a, b):
    return Vec3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)


def vscale(s, a):
    return Vec3(s * a.x, s * a.y, s * a.z)


def vadd(a, b):
    return Vec3(a.x + b.x, a.y + b.y, a.z + b.z)


def rotate_vec_by_quat_dc(q, v):
    u = Vec3(q.x, q.y, q.z)
    s = q.w
    r = vadd(vadd(vscale(2.0 * vdot(u, v), u), vscale(s * s - vdot(u, u), v)),
             vscale(2.0 * s, vcross(u, v)))
    return r.x


def rotate_vec_by_quat_dc_grad(q, v):
    g = rotate_vec_by_quat_x_grad(q.x, q.y, q.z, q.w, v.x, v.y, v.z)
    return (Quaternion(*g[:4]), Vec3(*g[4:]))


ROTATE_DC_POINT = (Quaternion(1.1, 2.2, 3.3, 4.4), Vec3(5.5, 6.6, 7.7))

# ---------------------------------------------------------------------------------------
# 5. recursive chain of depth n: x_{k+1} = sin(x_k)/2 + x_k/2


CHAIN_DEPTH = 1000


def chain_primal(x, n):
    return x if n == 0 else chain_primal(math.sin(x) * 0.5 + x * 0.5, n - 1)


@astad.reverse_diff
def chain(x, n):
    return x if n == 0 else chain(math.sin(x) * 0.5 + x * 0.5, n - 1)


def chain_grad(x, n):
    # forward accumulation of d x_n / d x_0; n is an integer (not differentiated)
    d = 1.0
    for _ in range(n):
        d = d * (math.cos(x) * 0.5 + 0.5)
        x = math.sin(x) * 0.5 + x * 0.5
    return (d, None)



# ---------------------------------------------------------------------------------------
# 6. fan-out sharing: 12 levels, each using the previous value 8 times.
#    A dual-numbers AD that duplicated shared work would take 8^12 steps here; astad's
#    tape keeps it linear (one tape entry per level with preaccumulation).


FANOUT_LEVELS = 12


def fanout(x):
    for _ in range(12):
        x = (0.4 * x + 0.1 * math.sin(x) + 0.1 * math.cos(x) + 0.05 * x * x
             + 0.1 * math.tanh(x) + 0.05 * math.exp(-x) + 0.1 * math.atan(x))
    return x


def fanout_grad(x):
    # forward accumulation of the derivative through the 12 levels
    d = 1.0
    for _ in range(FANOUT_LEVELS):
        t = math.tanh(x)
        d = d * (0.4 + 0.1 * math.cos(x) - 0.1 * math.sin(x) + 0.1 * x
                 + 0.1 * (1.0 - t * t) - 0.05 * math.exp(-x) + 0.1 / (1.0 + x * x))
        x = (0.4 * x + 0.1 * math.sin(x) + 0.1 * math.cos(x) + 0.05 * x * x
             + 0.1 * math.tanh(x) + 0.05 * math.exp(-x) + 0.1 * math.atan(x))
    return d


# ---------------------------------------------------------------------------------------
# 7. control flow: projectile with quadratic drag, explicit Euler steps in a `while`
#    loop that stops when the projectile is below the ground; the range (linearly
#    interpolated to y = 0 between the last two steps) as a function of the launch speed
#    and angle. The number of loop iterations depends on the inputs.

PROJECTILE_POINT = (30.0, 0.8)      # launch speed (m/s), angle (rad)


def projectile(v0, angle):
    dt = 0.01
    k = 0.005                       # drag coefficient / mass (1/m)
    g = 9.81
    vx = v0 * math.cos(angle)
    vy = v0 * math.sin(angle)
    x = 0.0
    y = 0.0
    x_prev = 0.0
    y_prev = 0.0
    while y >= 0.0:
        x_prev = x
        y_prev = y
        speed = math.sqrt(vx * vx + vy * vy)
        ax = -k * speed * vx
        ay = -g - k * speed * vy
        x = x + vx * dt
        y = y + vy * dt
        vx = vx + ax * dt
        vy = vy + ay * dt
    return x_prev + (x - x_prev) * y_prev / (y_prev - y)


def projectile_grad(v0, angle):
    # forward accumulation of the tangents w.r.t. (v0, angle) along the Euler steps
    dt = 0.01
    k = 0.005
    g = 9.81
    c = math.cos(angle)
    s = math.sin(angle)
    vx, vy = v0 * c, v0 * s
    dvx, dvy = (c, -v0 * s), (s, v0 * c)
    x = y = xp = yp = 0.0
    dx = dy = dxp = dyp = (0.0, 0.0)
    while y >= 0.0:
        xp, yp, dxp, dyp = x, y, dx, dy
        sp = math.sqrt(vx * vx + vy * vy)
        dsp = tuple((vx * dvx[i] + vy * dvy[i]) / sp for i in range(2))
        ax = -k * sp * vx
        ay = -g - k * sp * vy
        dax = tuple(-k * (dsp[i] * vx + sp * dvx[i]) for i in range(2))
        day = tuple(-k * (dsp[i] * vy + sp * dvy[i]) for i in range(2))
        x, dx = x + vx * dt, tuple(dx[i] + dvx[i] * dt for i in range(2))
        y, dy = y + vy * dt, tuple(dy[i] + dvy[i] * dt for i in range(2))
        vx, dvx = vx + ax * dt, tuple(dvx[i] + dax[i] * dt for i in range(2))
        vy, dvy = vy + ay * dt, tuple(dvy[i] + day[i] * dt for i in range(2))
    w = yp / (yp - y)
    return tuple(dxp[i] + (dx[i] - dxp[i]) * w
                 + (x - xp) * (yp * dy[i] - y * dyp[i]) / ((yp - y) * (yp - y))
                 for i in range(2))


# ---------------------------------------------------------------------------------------
# 8. control flow: Newton iterations. For each mean anomaly M in ms, solve Kepler's
#    equation E - e sin E = M by Newton's method (a `while True` loop with a
#    data-dependent `break`), and sum the x-coordinates cos E - e of the orbit points.
#    Differentiated with respect to the eccentricity e and every M.

KEPLER_ECCENTRICITY = 0.5


def kepler(e, ms):
    total = 0.0
    for i in range(len(ms)):
        m = ms[i]
        E = m + e * math.sin(m)
        while True:
            delta = (E - e * math.sin(E) - m) / (1.0 - e * math.cos(E))
            E = E - delta
            if abs(delta) < 1e-12:
                break
        total = total + math.cos(E) - e
    return total


def _kepler_solve(e, m):
    E = m + e * math.sin(m)
    while True:
        delta = (E - e * math.sin(E) - m) / (1.0 - e * math.cos(E))
        E = E - delta
        if abs(delta) < 1e-12:
            return E


def kepler_grad(e, ms):
    # implicit function theorem at the converged root: dE/dM = 1 / (1 - e cos E),
    # dE/de = sin E / (1 - e cos E)
    ge = 0.0
    gms = []
    for m in ms:
        E = _kepler_solve(e, m)
        sin_e = math.sin(E)
        denom = 1.0 - e * math.cos(E)
        gms.append(-sin_e / denom)
        ge += -sin_e * sin_e / denom - 1.0
    return (ge, gms)

def ensure_recursion_limit(depth: int, frames_per_level: int = 8) -> None:
    """Raise the interpreter's recursion limit so depth-``depth`` recursion fits (the
    primal needs one frame per level; the differentiated version may use a few)."""
    need = depth * frames_per_level + 1000
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


# ---------------------------------------------------------------------------------------
# Benchmark cases


class Case:
    """One program at one size.

    primal: plain function timed as the baseline; ad: the function handed to astad
    (``astad.reverse_diff`` is applied by run.py unless ``ad_is_decorated``);
    hand_grad: hand-written gradient or None, with astad's result structure (a tuple
    over the positional arguments; the gradient alone for a one-parameter function);
    wrt: indices of the positional arguments
    whose gradients are checked (the rest, e.g. an int depth, are not differentiated).
    """

    def __init__(self, program, size, primal, ad, args, hand_grad=None, wrt=None,
                 ad_is_decorated=False, size_label=None, expected_value=None, work=None):
        self.program = program
        # work: a number proportional to the operation count (n for dot, n*n for an
        # n x n matrix), used to extrapolate a peer's cost to the next size
        self.work = work if work is not None else size
        self.size = size
        self.size_label = size_label if size_label is not None else (
            "" if size is None else str(size))
        self.primal = primal
        self.ad = ad
        self.args = tuple(args)
        self.hand_grad = hand_grad
        self.wrt = tuple(range(len(self.args))) if wrt is None else tuple(wrt)
        self.ad_is_decorated = ad_is_decorated
        self.expected_value = expected_value

    @property
    def name(self):
        return f"{self.program}[{self.size_label}]" if self.size_label else self.program


FULL_SIZES = {
    "dot": [10**2, 10**3, 10**4, 10**5],
    "sum_matvec": [10, 30, 100, 300],
}
QUICK_SIZES = {
    "dot": [10**2, 10**3, 10**4],
    "sum_matvec": [10, 30, 100],
}
KEPLER_POINTS = 50      # mean anomalies in the kepler case of make_cases


def _floats(rng, n):
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def make_cases(quick: bool = False, seed: int = 12345):
    sizes = QUICK_SIZES if quick else FULL_SIZES
    rng = random.Random(seed)
    cases = [Case("scalar_mult", None, scalar_mult, scalar_mult, (1.25, -3.5),
                  hand_grad=scalar_mult_grad)]
    for n in sizes["dot"]:
        cases.append(Case("dot", n, dot, dot, (_floats(rng, n), _floats(rng, n)),
                          hand_grad=dot_grad, size_label=f"n={n}"))
    for n in sizes["sum_matvec"]:
        m = [_floats(rng, n) for _ in range(n)]
        cases.append(Case("sum_matvec", n, sum_matvec, sum_matvec, (m, _floats(rng, n)),
                          hand_grad=sum_matvec_grad, size_label=f"{n}x{n}", work=n * n))
    cases.append(Case("rotate_vec_by_quat", None, rotate_vec_by_quat_x, rotate_vec_by_quat_x,
                      ROTATE_POINT, hand_grad=rotate_vec_by_quat_x_grad,
                      expected_value=ROTATE_EXPECTED_X))
    cases.append(Case("chain", CHAIN_DEPTH, chain_primal, chain, (0.7, CHAIN_DEPTH),
                      hand_grad=chain_grad, wrt=(0,), ad_is_decorated=True,
                      size_label=f"depth={CHAIN_DEPTH}"))
    # programs added with the peer benchmarks (issue 6); appended so that the inputs
    # of the programs above do not change
    cases.append(Case("fanout", FANOUT_LEVELS, fanout, fanout, (0.7,),
                      hand_grad=fanout_grad, size_label=f"levels={FANOUT_LEVELS}"))
    cases.append(Case("projectile", None, projectile, projectile, PROJECTILE_POINT,
                      hand_grad=projectile_grad, size_label="dt=0.01"))
    cases.append(make_case("kepler", KEPLER_POINTS, rng))
    cases.append(Case("rotate_vec_by_quat_dataclass", None, rotate_vec_by_quat_dc,
                      rotate_vec_by_quat_dc, ROTATE_DC_POINT,
                      hand_grad=rotate_vec_by_quat_dc_grad, expected_value=ROTATE_EXPECTED_X))
    return cases


SCALABLE = ("dot", "sum_matvec", "chain", "kepler")


def make_case(program, n, rng=None, seed=12345):
    """One case of a scalable program at size n (for scaling.py and memory.py):
    dot (length n), sum_matvec (n x n), chain (depth n), kepler (n mean anomalies)."""
    rng = rng or random.Random(seed)
    if program == "dot":
        return Case("dot", n, dot, dot, (_floats(rng, n), _floats(rng, n)),
                    hand_grad=dot_grad, size_label=f"n={n}")
    if program == "sum_matvec":
        m = [_floats(rng, n) for _ in range(n)]
        return Case("sum_matvec", n, sum_matvec, sum_matvec, (m, _floats(rng, n)),
                    hand_grad=sum_matvec_grad, size_label=f"{n}x{n}", work=n * n)
    if program == "chain":
        return Case("chain", n, chain_primal, chain, (0.7, n), hand_grad=chain_grad,
                    wrt=(0,), ad_is_decorated=True, size_label=f"depth={n}")
    if program == "kepler":
        ms = [rng.uniform(0.0, 2.0 * math.pi) for _ in range(n)]
        return Case("kepler", n, kepler, kepler, (KEPLER_ECCENTRICITY, ms),
                    hand_grad=kepler_grad, size_label=f"n={n}")
    raise ValueError(f"not a scalable program: {program!r} (one of {SCALABLE})")
