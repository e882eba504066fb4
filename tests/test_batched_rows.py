"""jacrev's one sweep runs every array entry on all the rows at once (issue 27, item 5).

``astad.jacrev`` sweeps the tape once with a leading axis of rows; each array entry's
backward step has a batched form in ``runtime/tape.BATCHED_BACKWARDS``, registered beside
it. Here:

- a table test: every backward step astad's rules record (found by reading the rule and
  runtime modules) has a batched form, except the few named in ``PER_ROW`` with why;
- the programs below record every one of them (checked by watching the sweep), and
  jacrev's Jacobian on each equals jacfwd's and the stacked pullbacks of ``f.vjp``;
- on them no entry runs once per row (tape._Row made to raise), except a custom_vjp's
  bwd, the user's own code for one cotangent;
- a Jacobian of a Jacobian (the rows of the inner sweep are duals of the outer one: each
  batched step declines, and the entry runs once per row) equals the Hessian.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import astad
import astad.rules
import astad.runtime
from astad.rules import custom
from astad.runtime import tape

# Backward steps with no batched form, and why.
PER_ROW = {
    custom._backward: "a custom_vjp's bwd (or custom_jvp's transposed map) is the user's "
                      "code, written for one cotangent",
}


def backward_steps() -> dict:
    """Every backward step of an array entry in astad's rules and runtime: a module-level
    function taking ``(adjoint, arrays, k, parents, context)``, by its qualified name."""
    found = {}
    for package in (astad.rules, astad.runtime):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, fn in vars(module).items():
                if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    try:
                        names = list(inspect.signature(fn).parameters)
                    except (TypeError, ValueError):
                        continue
                    if len(names) == 5 and names[:3] == ["adjoint", "arrays", "k"]:
                        found[f"{module.__name__}.{name}"] = fn
    return found


# -- programs: each records one or more kinds of array entry ----------------------------------
def elementwise(x):
    return np.sin(x) * x[::-1] + x ** 2 / (1.0 + x * x)


def reductions_and_products(x):
    m = np.reshape(x, (2, 3))
    return np.concatenate([np.sum(m, axis=0), np.cumsum(x), m @ np.ones((3, 2)).ravel()[:3],
                           [np.max(x), np.mean(m)]])


def joins(x):
    a, b = x[:3], x[3:]
    parts = [np.concatenate([a, b, a]), np.concatenate([np.reshape(a, (3, 1)),
                                                        np.reshape(b, (3, 1))], axis=1).ravel(),
             np.concatenate([np.reshape(a, (1, 3)), np.reshape(b, (1, 3))], axis=None),
             np.stack([a, b]).ravel(), np.stack([a, b], axis=1).ravel(),
             np.stack([a, b], axis=-1).ravel(), np.vstack([a, b]).ravel(), np.hstack([a, b]),
             np.column_stack([a, b]).ravel()]
    return np.concatenate(parts) * 1.5


def scalars_into_arrays(x):
    s, t = x[0] * x[1], np.sum(x)
    return np.concatenate([np.array([s, t, s * t]), np.hstack([s, t]), np.array(s)[None],
                           np.full(2, t)])


def splits(x):
    a, b, c = np.split(x, 3)
    left, right = np.array_split(x[::-1], [2])
    return np.concatenate([a * b, c, left, right * 2.0])


def gathers(x):
    m = np.reshape(x, (2, 3))
    cube = np.reshape(np.concatenate([x, x * x, np.sin(x), np.cos(x)]), (2, 3, 4))
    return np.concatenate([
        x[[0, 2, 2, 5]], m[[1, 0], [2, 2]], m[:, [0, 2]].ravel(), m[m > 0.3],
        cube[0, :, [1, 3]].ravel(),          # numpy moves the indexed axes first
        cube[[1, 0], :, [2, 2]].ravel(), cube[:, [0, 2], [1, 3]].ravel(),
        np.take(x, [1, 1, 4]), [m[1, 2], x[3]]])


def views(x):
    m = np.reshape(x, (2, 3))
    return np.concatenate([m.T.ravel(), x[1:4], m[:, ::-1].ravel(), np.diagonal(
        np.reshape(np.concatenate([x, x[:3]]), (3, 3))), np.squeeze(m[None])[1]])


def einsums(x):
    m = np.reshape(x, (2, 3))
    square = np.reshape(np.concatenate([x, x[:3]]), (3, 3))
    return np.concatenate([
        np.einsum("ij,kj->ik", m, m).ravel(), np.einsum("ii->i", square),
        np.reshape(np.einsum("i,i->", x, x), (1,)),
        np.einsum("ij,jk,kl->il", square, square, square)[0],
        np.einsum("...ij,...j->...i", m[None], x[:3]).ravel(),
        np.einsum("ij,j->ij", m[:1], x[:3]).ravel(),  # a size-1 axis numpy broadcast
        np.reshape(np.einsum("ij->", m), 1), np.einsum("i,j->ij", x[:2], x[2:4]).ravel()])


def writes(x):
    out = np.zeros(8)  # (a constant array: its entry drops what reaches it)
    out[0] = x[0] * x[1]
    out[1:4] = np.sin(x[:3])
    out[[4, 5]] = x[3:5]
    out[[6, 6]] = x[4:]  # repeated: the last write wins
    out[2:5] += x[1:4] ** 2
    out *= 2.0
    grid = np.ones((2, 4))
    grid[:, [0, 3]] = np.reshape(x[:4], (2, 2))
    grid[1] = x[5]  # broadcast
    return np.concatenate([out, grid.ravel()])


def linear_algebra(x):
    a = np.reshape(np.concatenate([x, x[:3] * 0.5]), (3, 3)) + 3.0 * np.eye(3)
    sym = a + a.T
    w, v = np.linalg.eigh(sym)
    q, r = np.linalg.qr(a[:2])
    u, s, vt = np.linalg.svd(a)
    sol, *_ = np.linalg.lstsq(a, x[:3], rcond=None)
    return np.concatenate([w, np.abs(v[:, 0]), np.abs(q).ravel(), np.abs(r).ravel(), s,
                           np.linalg.solve(a, x[3:]), np.linalg.inv(a)[0], sol])


def scaled(x):
    return x * 3.0


astad.register_vjp(scaled, lambda g, r, x: g * 3.0)  # a user's vjp, for one cotangent
astad.register_jvp(scaled, lambda t, r, x: t * 3.0)


def user_vjp(x):
    return np.concatenate([scaled(x[:4]), np.reshape(scaled(np.sum(x)), (1,))]) * x[0]


@astad.custom_vjp
def clipped_norm(x):
    return min(np.sqrt(np.sum(x * x)), 10.0), np.sum(x)


clipped_norm.defvjp(lambda x: (clipped_norm(x), x),
                    lambda x, g: (x / np.sqrt(np.sum(x * x)) * g[0] + g[1],))


def custom_rule(x):
    norm, total = clipped_norm(x)
    return np.concatenate([x * norm, [total, norm * total]])


PROGRAMS = {f.__name__: f for f in (
    elementwise, reductions_and_products, joins, scalars_into_arrays, splits, gathers,
    views, einsums, writes, linear_algebra, user_vjp, custom_rule)}
NO_FORWARD_RULE = {"custom_rule"}  # (a custom_vjp: jacfwd needs a jvp)
X = np.array([0.7, -0.4, 1.3, 0.25, -1.1, 0.9])


def _stacked_pullbacks(fn, x):
    value, pullback = astad.reverse_diff(fn, argnums=0).vjp(x)
    return np.array([pullback(e) for e in np.eye(np.size(value))])


def _close(got, want, what):
    scale = max(1.0, float(np.max(np.abs(want))))
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("name", PROGRAMS)
def test_jacrev_equals_jacfwd_and_pullbacks(name):
    fn = PROGRAMS[name]
    jacobian = astad.jacrev(fn)(X)
    _close(jacobian, _stacked_pullbacks(fn, X), f"{name}: jacrev vs pullbacks")
    if name not in NO_FORWARD_RULE:
        _close(jacobian, astad.jacfwd(fn)(X), f"{name}: jacrev vs jacfwd")


@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - {"custom_rule"}))
def test_no_entry_runs_once_per_row(name, monkeypatch):
    expected = astad.jacrev(PROGRAMS[name])(X)

    class Refused:
        def __init__(self, *args):
            raise AssertionError(f"{name}: an entry ran once per row")
    monkeypatch.setattr(tape, "_Row", Refused)
    _close(astad.jacrev(PROGRAMS[name])(X), expected, name)


def test_every_backward_step_has_a_batched_form():
    steps = backward_steps()
    assert len(steps) >= 12  # (the reading found them)
    missing = sorted(name for name, fn in steps.items()
                     if fn not in tape.BATCHED_BACKWARDS and fn not in PER_ROW)
    assert not missing, f"backward steps with no batched form: {missing}"
    for fn in PER_ROW:
        assert fn in steps.values()


def test_the_programs_record_every_backward_step(monkeypatch):
    """The programs above cover every kind of entry, and every entry the sweep runs is a
    backward step the table test read."""
    seen = set()
    entry = tape._entry

    def watched(e, adjoint, arrays, k, width):
        seen.add(e[0])
        return entry(e, adjoint, arrays, k, width)
    monkeypatch.setattr(tape, "_entry", watched)
    for fn in PROGRAMS.values():
        astad.jacrev(fn)(X)
    steps = backward_steps()
    assert seen <= set(steps.values()), seen - set(steps.values())
    # (index_scatter and friends are the steps' own primitives: recorded by a Jacobian of a
    # Jacobian, below)
    unseen = sorted(name for name, fn in steps.items() if fn not in seen)
    assert not unseen, f"no program records {unseen}"


@pytest.mark.parametrize("name", ["gathers", "writes", "einsums", "joins", "views",
                                  "scalars_into_arrays"])
def test_jacobian_of_a_jacobian(name):
    """Rows that are duals of an enclosing differentiation: the batched steps decline and
    the entry runs once per row; the backward steps' own primitives (index_scatter,
    region_add, zero_region) are recorded and swept in rows by the outer jacrev."""
    fn = PROGRAMS[name]
    twice = astad.jacrev(astad.jacrev(fn))(X)
    _close(twice, astad.hessian(fn)(X), f"{name}: jacrev of jacrev vs hessian")


# -- forward over reverse: the backward steps' primitives take all directions at once -------
# Rules of astad's own whose jvp takes one direction at a time, and why.
PER_DIRECTION = {
    np.block: "its argument is a nested list of arrays, each with its own tangent",
    np.linalg.lstsq: "its jvp solves a least-squares problem per tangent",
}


def test_every_jvp_of_astads_rules_is_batched():
    from astad.registry import RECORDS
    single = sorted(str(fn) for fn, found in RECORDS.items()
                    if found.partials is None and found.jvps is not None and
                    not found.batched_jvps and fn not in PER_DIRECTION and
                    getattr(fn, "__module__", "").startswith(("astad", "numpy")))
    assert not single, f"jvps taking one direction at a time: {single}"


@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - NO_FORWARD_RULE -
                                        {"user_vjp", "linear_algebra"}))
def test_hessian_takes_every_direction_at_once(name, monkeypatch):
    """hessian (forward over reverse) of a weighted sum of each program: the backward
    steps run on forward duals, so their own primitives (region_add, index_scatter...) are
    differentiated forward with a tangent per input; none runs once per direction, and the
    Hessian equals jacrev of jacrev (the next test checks two by hand)."""
    fn = PROGRAMS[name]
    weights = np.linspace(0.5, 1.5, np.size(fn(X)))

    def objective(x):
        return np.sum(fn(x) * weights)
    want = astad.jacrev(astad.jacrev(objective))(X)
    from astad.rules import array_forward

    def refused(terms):
        raise AssertionError(f"{name}: a jvp ran once per direction")
    monkeypatch.setattr(array_forward, "_stacked", refused)
    _close(astad.hessian(objective)(X), want, f"{name}: hessian vs jacrev of jacrev")


def test_hessian_through_views_and_scatters_by_hand():
    """Extended Rosenbrock (slices) and an element loop (x[i] reads): the Hessian by hand,
    and a third derivative (jacfwd of hessian: tangents of tangents, row by row) against
    jacrev of it."""
    def rosenbrock(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def chain(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + x[i] * x[i + 1] ** 2
        return s
    x, n = X, len(X)
    want = np.zeros((n, n))
    for i in range(n - 1):  # d2/dx_i2 = 1200 x_i^2 - 400 x_{i+1} + 2, d2/dx_i dx_i+1 = -400 x_i
        want[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        want[i + 1, i + 1] += 200
        want[i, i + 1] = want[i + 1, i] = -400 * x[i]
    _close(astad.hessian(rosenbrock)(x), want, "rosenbrock")
    want = np.zeros((n, n))
    for i in range(n - 1):  # x_i x_{i+1}^2
        want[i + 1, i + 1] += 2 * x[i]
        want[i, i + 1] += 2 * x[i + 1]
        want[i + 1, i] += 2 * x[i + 1]
    _close(astad.hessian(chain)(x), want, "chain")
    for fn in (rosenbrock, chain):
        _close(astad.jacfwd(astad.hessian(fn))(x), astad.jacrev(astad.hessian(fn))(x),
               f"{fn.__name__}: third derivatives")


def _written(v):
    """A scalar broadcast into a region, added at a repeated index, and empty masks."""
    x = v[:3] * 1.0
    s = v[0] * v[1]
    x[:] = s
    np.add.at(x, [0, 0, 1], v[2] ** 2)
    x[x > 1e9] = v[0]
    x[x > 1e9] += np.tanh(v[1])
    return np.sum(x * x) / 2 + np.sum(v) * 0.0


def _written_out(v):
    """``_written`` with no write: ``((s + 2c^2)^2 + (s + c^2)^2 + s^2) / 2``."""
    s, c2 = v[0] * v[1], v[2] ** 2
    return ((s + 2 * c2) ** 2 + (s + c2) ** 2 + s * s) / 2 + np.sum(v) * 0.0


@pytest.mark.parametrize("size", [3, 4])
@pytest.mark.parametrize("nesting", ["jacfwd(jacrev)", "jacrev(jacfwd)", "jacfwd(jacfwd)",
                                     "jacrev(jacrev)", "hessian"])
def test_second_derivatives_of_broadcast_writes(nesting, size):
    """A value of lower rank written or scattered into a region: with a tangent per input
    the batched step broadcasts each row into its region (with 3 inputs, as many as the
    region's elements, numpy would broadcast the rows across it: a wrong Hessian), and an
    empty region keeps its shape. Against the same function written without writes."""
    v = np.array([0.3, -1.2, 0.7, 2.0])[:size]
    transform = {"hessian": astad.hessian,
                 "jacfwd(jacrev)": lambda f: astad.jacfwd(astad.jacrev(f)),
                 "jacrev(jacfwd)": lambda f: astad.jacrev(astad.jacfwd(f)),
                 "jacfwd(jacfwd)": lambda f: astad.jacfwd(astad.jacfwd(f)),
                 "jacrev(jacrev)": lambda f: astad.jacrev(astad.jacrev(f))}[nesting]
    s, c = v[0] * v[1], v[2]
    want = np.zeros((size, size))  # by hand: f = ((s + 2c^2)^2 + (s + c^2)^2 + s^2) / 2
    d_s, d_c = 3 * s + 3 * c * c, 2 * c * (s + 2 * c * c) * 2 + 2 * c * (s + c * c)
    want[0, 0], want[1, 1] = 3 * v[1] ** 2, 3 * v[0] ** 2
    want[0, 1] = want[1, 0] = 3 * v[0] * v[1] + d_s
    want[0, 2] = want[2, 0] = 6 * c * v[1]
    want[1, 2] = want[2, 1] = 6 * c * v[0]
    want[2, 2] = d_c / c + 2 * c * (8 * c + 2 * c)
    _close(astad.jacrev(astad.jacrev(_written_out))(v), want, "the written-out form by hand")
    _close(transform(_written)(v), want, nesting)
