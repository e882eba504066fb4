"""Complex values and numpy.fft, with JAX's convention: the gradient of a real function of
``z = x + iy`` is ``dL/dx - i dL/dy``; a cotangent ``w`` pairs with ``dz`` as
``Re(sum(w * dz))``; ``jvp`` of a holomorphic function is ``f'(z) t``.

Every rule is checked against central differences in the real and the imaginary
directions (reverse, forward, and a derivative of the gradient), and against JAX where it
is installed.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import astad
from astad.errors import InputError, NotDifferentiableError

RNG = np.random.default_rng(35)
H = 1e-6


def complex_gradient(f, z):
    """dL/dx - i dL/dy of the real function f, by central differences, element by
    element (z complex; a real z: the real derivative)."""
    z = np.asarray(z)
    out = np.zeros(z.shape, dtype=z.dtype)
    for index in np.ndindex(z.shape):
        step = np.zeros(z.shape, dtype=z.dtype)
        step[index] = H
        out[index] = (f(z + step) - f(z - step)) / (2 * H)
        if z.dtype.kind == "c":
            out[index] -= 1j * (f(z + 1j * step) - f(z - 1j * step)) / (2 * H)
    return out


def directional(f, z, t):
    """d/dh f(z + h t) at 0, by central differences (f's value may be complex)."""
    return (np.asarray(f(z + H * t)) - np.asarray(f(z - H * t))) / (2 * H)


def complex_normal(*shape):
    return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


def check_real_function(f, z, rtol=1e-6, atol=1e-7):
    """f real-valued: astad's gradient against differences; its jvp against the
    gradient's pairing; a derivative of the gradient against differences of it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no ComplexWarning: imaginary parts kept or taken)
        g = astad.grad(f)(z)
    assert np.asarray(g).dtype == np.asarray(z).dtype
    np.testing.assert_allclose(g, complex_gradient(f, z), rtol=rtol, atol=atol)
    t = complex_normal(*np.shape(z)) if np.iscomplexobj(z) else RNG.normal(size=np.shape(z))
    _, tangent = astad.jvp(f, (z,), (t,))
    # dL = Re(sum(g * dz)) for the real function L
    np.testing.assert_allclose(tangent, np.real(np.sum(g * t)), rtol=rtol, atol=atol)
    v = complex_normal(*np.shape(z)) if np.iscomplexobj(z) else RNG.normal(size=np.shape(z))

    def along(w):
        return np.real(np.sum(astad.grad(f)(w) * v))
    np.testing.assert_allclose(astad.grad(along)(z), complex_gradient(along, z),
                               rtol=1e-4, atol=1e-5)


# -- holomorphic functions: the real rules, unchanged ---------------------------------------
HOLOMORPHIC = {
    "add": lambda z: z + 2.0 * z, "multiply": lambda z: z * z, "divide": lambda z: 1.0 / z,
    "power": lambda z: z ** 3, "square": np.square, "reciprocal": np.reciprocal,
    "exp": np.exp, "expm1": np.expm1, "exp2": np.exp2, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
    "arccosh": np.arccosh, "arctanh": np.arctanh, "cumprod": np.cumprod,
    "prod": lambda z: np.prod(z) * z, "matmul": lambda z: np.outer(z, z) @ z,
    "einsum": lambda z: np.einsum("i,j->ij", z, z).sum(axis=0),
    "inv": lambda z: np.linalg.inv(np.outer(z, z) + np.eye(3)) @ z,
    "det": lambda z: np.linalg.det(np.outer(z, z) + np.diag(z)) * z,
    "solve": lambda z: np.linalg.solve(np.outer(z, z) + np.eye(3) * 2, z),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_function(name):
    fn = HOLOMORPHIC[name]
    z = 0.4 * complex_normal(3) + 0.3
    c = complex_normal(3)
    check_real_function(lambda z: np.real(np.sum(fn(z) * c)), z)
    # jvp is holomorphic: f'(z) t, the difference along t
    t = complex_normal(3)
    _, tangent = astad.jvp(fn, (z,), (t,))
    np.testing.assert_allclose(tangent, directional(fn, z, t), rtol=1e-6, atol=1e-7)


# -- the functions that are not holomorphic: rules of their own ----------------------------
NOT_HOLOMORPHIC = {
    "abs": lambda z: np.sum(np.abs(z) ** 1.5),
    "abs method": lambda z: np.sum(abs(z) * np.arange(3.0)),
    "real": lambda z: np.sum(np.real(z) ** 3),
    "imag": lambda z: np.sum(np.imag(z * z)),
    "attributes": lambda z: np.sum(z.real * z.imag),
    "conj": lambda z: np.real(np.sum(np.conj(z) * z * (1 + 2j) + z.conj() * 3j)),
    "angle": lambda z: np.sum(np.angle(z) * np.arange(1.0, 4.0)),
    "angle deg": lambda z: np.sum(np.angle(z, deg=True) ** 2),
    "real_if_close": lambda z: np.sum(np.real(np.real_if_close(z * 1j) ** 2)),
    "vdot": lambda z: np.real(np.vdot(z, z * (2 + 1j)) + np.vdot(z * 1j, np.arange(3.0))),
    "element": lambda z: np.abs(z[1] * z[2] - z[0]),
    "loop": lambda z: sum(abs(z[i] - z[i + 1]) for i in range(2)),
}


@pytest.mark.parametrize("name", sorted(NOT_HOLOMORPHIC))
def test_function_of_complex_values(name):
    check_real_function(NOT_HOLOMORPHIC[name], complex_normal(3) + 0.2)


@pytest.mark.parametrize("name", ["abs", "real", "conj", "angle"])
def test_complex_intermediate_of_a_real_input(name):
    """A real input through complex values: its gradient is real (the real part of the
    complex cotangent reaching it), never a ComplexWarning."""
    c = complex_normal(3)
    fns = {"abs": lambda x: np.sum(np.abs(x * c)), "real": lambda x: np.sum(np.real(
        np.exp(1j * x) * c)), "conj": lambda x: np.real(np.sum(np.conj(x + c) * c)),
        "angle": lambda x: np.sum(np.angle(x + c))}
    x = RNG.normal(size=3)
    check_real_function(fns[name], x)


def test_abs_of_a_real_array_times_a_complex_constant():
    """Once silently wrong: |x c| took sign(x c), not its conjugate over its modulus."""
    c = np.array([1 + 2j, 3 - 1j])
    g = astad.grad(lambda x: np.sum(np.abs(x * c)))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, np.abs(c))


def test_complex_array_written_into():
    def f(z):
        y = np.zeros(3, dtype=complex)
        for i in range(3):
            y[i] = z[i] * z[(i + 1) % 3]
        y[1:] += 1j * z[:2]
        return np.sum(np.abs(y) ** 2)
    check_real_function(f, complex_normal(3))


def test_complex_scalars_from_floats():
    """Python's complex scalars as constants of array code: x * 1j, x + 0.5j."""
    check_real_function(lambda x: np.sum(np.abs(x * 1j + 0.5j) ** 2 + np.angle(x + 1j)),
                        RNG.normal(size=3))


# -- numpy.fft ----------------------------------------------------------------------------
FFTS = [
    ("fft", lambda a: np.fft.fft(a)), ("fft n=6", lambda a: np.fft.fft(a, n=6)),
    ("fft n=3 ortho", lambda a: np.fft.fft(a, n=3, norm="ortho")),
    ("ifft forward", lambda a: np.fft.ifft(a, norm="forward")),
    ("ifft n=7", lambda a: np.fft.ifft(a, 7)),
    ("fft axis 0", lambda a: np.fft.fft(np.reshape(a, (2, 2)), axis=0)),
    ("fft2", lambda a: np.fft.fft2(np.reshape(a, (2, 2)))),
    ("ifft2 s", lambda a: np.fft.ifft2(np.reshape(a, (2, 2)), s=(3, 2), norm="ortho")),
    ("fftn", lambda a: np.fft.fftn(np.reshape(a, (2, 2)), axes=(0,))),
    ("ifftn s", lambda a: np.fft.ifftn(np.reshape(a, (2, 2)), s=(2, 1), axes=(0, 1))),
    ("rfft", lambda a: np.fft.rfft(np.real(a))),
    ("rfft n=5", lambda a: np.fft.rfft(np.real(a), n=5)),
    ("rfft n=3 forward", lambda a: np.fft.rfft(np.real(a), 3, norm="forward")),
    ("irfft", lambda a: np.fft.irfft(a)), ("irfft n=5", lambda a: np.fft.irfft(a, n=5)),
    ("irfft n=8 ortho", lambda a: np.fft.irfft(a, 8, norm="ortho")),
    ("irfft n=2", lambda a: np.fft.irfft(a, n=2)),
    ("rfft2", lambda a: np.fft.rfft2(np.reshape(np.real(a), (2, 2)))),
    ("rfftn s", lambda a: np.fft.rfftn(np.reshape(np.real(a), (2, 2)), s=(3, 4),
                                       axes=(0, 1))),
    ("irfft2", lambda a: np.fft.irfft2(np.reshape(a, (2, 2)))),
    ("irfftn s ortho", lambda a: np.fft.irfftn(np.reshape(a, (2, 2)), s=(2, 3), axes=(0, 1),
                                               norm="ortho")),
    ("hfft", lambda a: np.fft.hfft(a)), ("hfft n=5 ortho", lambda a: np.fft.hfft(a, 5, -1,
                                                                                  "ortho")),
    ("ihfft", lambda a: np.fft.ihfft(np.real(a))),
    ("ihfft n=6 forward", lambda a: np.fft.ihfft(np.real(a), 6, norm="forward")),
    ("fftshift", lambda a: np.fft.fftshift(np.reshape(a, (2, 2)))),
    ("ifftshift axes", lambda a: np.fft.ifftshift(np.reshape(a, (2, 2)), axes=1)),
]


@pytest.mark.parametrize("name", [name for name, _ in FFTS])
@pytest.mark.parametrize("kind", ["complex", "real"])
def test_fft(name, kind):
    transform = dict(FFTS)[name]
    a = complex_normal(4) if kind == "complex" else RNG.normal(size=4)
    shape = np.shape(transform(a))
    c = complex_normal(*shape)
    check_real_function(lambda a: np.real(np.sum(transform(a) * c)) +
                        np.sum(np.abs(transform(a))), a, rtol=1e-5, atol=1e-6)
    # forward mode: the transform of the tangent
    t = complex_normal(4) if kind == "complex" else RNG.normal(size=4)
    _, tangent = astad.jvp(transform, (a,), (t,))
    np.testing.assert_allclose(tangent, directional(transform, a, t), rtol=1e-6, atol=1e-7)


def test_fft_jacobians_of_a_real_signal():
    """jacrev (all rows in one sweep), jacfwd and hessian through rfft and irfft, against
    each other and differences."""
    def spectrum(x):
        return np.abs(np.fft.rfft(x * np.hanning(6))) ** 2

    x = RNG.normal(size=6)
    rows = astad.jacrev(spectrum)(x)
    np.testing.assert_allclose(rows, astad.jacfwd(spectrum)(x), rtol=1e-9, atol=1e-12)
    differences = np.array([(spectrum(x + H * e) - spectrum(x - H * e)) / (2 * H)
                            for e in np.eye(6)]).T
    np.testing.assert_allclose(rows, differences, rtol=1e-5, atol=1e-6)

    def energy(x):
        y = np.fft.irfft(np.fft.rfft(x) * np.exp(-np.arange(4.0)))
        return np.sum(y ** 3)
    hessian = astad.hessian(energy)(x)
    gradient = astad.grad(energy)
    differences = np.array([(gradient(x + H * e) - gradient(x - H * e)) / (2 * H)
                            for e in np.eye(6)])
    np.testing.assert_allclose(hessian, differences, rtol=1e-5, atol=1e-6)


# -- eig and eigvals ----------------------------------------------------------------------
def test_eigvals_of_a_real_matrix_with_complex_eigenvalues():
    a = np.array([[0.0, -2.0, 0.3], [1.5, 0.1, 0.2], [0.4, 0.3, -1.0]]) + \
        0.1 * RNG.normal(size=(3, 3))  # (a rotation's block: a complex pair)
    assert np.iscomplexobj(np.linalg.eigvals(a))
    check_real_function(lambda a: np.sum(np.abs(np.linalg.eigvals(a)) ** 2), a,
                        rtol=1e-5, atol=1e-6)


def test_eig_of_a_complex_matrix():
    """Eigenvalues and eigenvectors as numpy gives them (unit length, the largest
    component real: the derivative keeps both)."""
    a = complex_normal(3, 3)
    c = complex_normal(3)
    d = complex_normal(3, 3)

    def f(a):
        w, v = np.linalg.eig(a)
        return np.real(np.sum(w * c) + np.sum(v * d))
    check_real_function(f, a, rtol=1e-5, atol=1e-6)


# -- what is refused ----------------------------------------------------------------------
@pytest.mark.parametrize("f, name", [
    (lambda z: np.var(z), "numpy.var"),
    (lambda z: np.sum(np.maximum(z, 0.5)), "numpy.maximum"),
    (lambda z: np.linalg.norm(z), "numpy.linalg.norm"),
    (lambda z: np.sum(np.sort(z).real), "numpy.sort"),
    (lambda z: np.real(np.sum(np.linalg.cholesky(np.outer(z, z.conj()) + np.eye(3)))),
     "numpy.linalg.cholesky"),
])
def test_rules_for_real_values_refuse_complex_ones(f, name):
    with pytest.raises(NotDifferentiableError, match=name.replace(".", r"\.")):
        astad.grad(f)(complex_normal(3))


def test_a_complex_constant_reaching_a_real_rule_is_refused():
    with pytest.raises(NotDifferentiableError, match=r"numpy\.maximum"):
        astad.grad(lambda x: np.sum(np.real(np.maximum(x, np.full(3, 1j)))))(np.ones(3))


def test_grad_of_a_complex_result_is_refused():
    with pytest.raises(InputError, match="complex"):
        astad.grad(lambda z: np.sum(z * z))(complex_normal(3))


def test_vjp_of_a_complex_result_takes_a_complex_cotangent():
    """vjp of a holomorphic function: w * f'(z) (the cotangent not conjugated)."""
    z = complex_normal(3)
    w = complex_normal(3)
    result, pullback = astad.vjp(np.sin, z)
    np.testing.assert_allclose(result, np.sin(z))
    np.testing.assert_allclose(pullback(w)[0], w * np.cos(z))


# -- JAX, the convention's owner --------------------------------------------------------
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    z = complex_normal(4)
    x = RNG.normal(size=4)
    cases = [
        (lambda np_: lambda z: np_.sum(np_.abs(np_.fft.fft(z, n=6, norm="ortho")) ** 2 *
                                       np_.arange(6.0)), z),
        (lambda np_: lambda x: np_.sum(np_.fft.irfft(np_.fft.rfft(x) * (1 + 2j)) ** 3), x),
        (lambda np_: lambda z: np_.sum(np_.angle(z) + np_.imag(np_.exp(z)) * np_.real(z)), z),
        (lambda np_: lambda z: np_.real(np_.vdot(z, z * 1j + 2)) + np_.abs(z[0] * z[1]), z),
        (lambda np_: lambda x: np_.sum(np_.abs(np_.linalg.eigvals(np_.reshape(x, (2, 2))))),
         x),
    ]
    for make, arg in cases:
        expected = jax.grad(make(jnp))(jnp.asarray(arg))
        np.testing.assert_allclose(astad.grad(make(np))(arg), expected, rtol=1e-9,
                                   atol=1e-12)


# -- Python's complex numbers and cmath ---------------------------------------------------
def test_complex_scalars_and_cmath():
    import cmath

    def f(z):
        w = cmath.exp(z) * z + cmath.sqrt(z) - cmath.phase(z) + cmath.log(z) / (2 + 1j)
        return abs(w) ** 2 + w.real - cmath.tanh(z).imag

    z = 0.3 + 0.7j
    g = astad.grad(f)(z)
    assert type(g) is complex
    expected = (f(z + H) - f(z - H)) / (2 * H) - 1j * (f(z + 1j * H) - f(z - 1j * H)) / (2 * H)
    assert abs(g - expected) < 1e-6
    # a float through complex numbers: a real derivative
    x = 0.4
    h = astad.grad(lambda x: abs(cmath.exp(1j * x ** 2) + x) ** 2)(x)
    assert type(h) is float
    assert abs(h - (abs(cmath.exp(1j * (x + H) ** 2) + x + H) ** 2 -
                    abs(cmath.exp(1j * (x - H) ** 2) + x - H) ** 2) / (2 * H)) < 1e-6
    # forward mode is holomorphic where the function is: f'(z) t
    value, tangent = astad.jvp(lambda z: cmath.sin(z) * z, (z,), (1 + 0.5j,))
    assert abs(tangent - (cmath.cos(z) * z + cmath.sin(z)) * (1 + 0.5j)) < 1e-12
    # a second derivative through complex values
    second = astad.hessian(lambda x: abs(cmath.exp(1j * x ** 2) + x) ** 2)(x)
    first = astad.grad(lambda x: abs(cmath.exp(1j * x ** 2) + x) ** 2)
    assert abs(second - (first(x + H) - first(x - H)) / (2 * H)) < 1e-5


def test_holomorphic_jacobians():
    """jacfwd and jacrev of a complex function: refused unless it is said to be
    holomorphic (JAX's holomorphic=True); then f'(z)."""
    z = complex_normal(3)

    def f(z):
        return np.sin(z) * z[0]
    with pytest.raises(InputError, match="holomorphic=True"):
        astad.jacrev(f)(z)
    with pytest.raises(InputError, match="holomorphic=True"):
        astad.jacfwd(lambda z: np.abs(z))(z)
    expected = np.diag(np.cos(z) * z[0]) + np.outer(np.sin(z), [1, 0, 0])
    np.testing.assert_allclose(astad.jacrev(f, holomorphic=True)(z), expected, rtol=1e-12)
    np.testing.assert_allclose(astad.jacfwd(f, holomorphic=True)(z), expected, rtol=1e-12)
    np.testing.assert_allclose(astad.jacobian(f, holomorphic=True)(z), expected,
                               rtol=1e-12)
    # a real function of complex values: jacrev's rows are its gradients, as grad's
    np.testing.assert_allclose(astad.jacrev(lambda z: np.abs(z) ** 2)(z),
                               np.diag(2 * np.conj(z)), rtol=1e-12)


def test_complex_of_floats():
    """complex(re, im) of differentiated floats: their gradients are real."""
    def f(x, y):
        z = complex(x, y * 2.0)
        return abs(z * z + 1.0)
    gx, gy = astad.grad(f, argnums=(0, 1))(0.3, 0.7)
    assert type(gx) is float and type(gy) is float
    assert abs(gx - (f(0.3 + H, 0.7) - f(0.3 - H, 0.7)) / (2 * H)) < 1e-6
    assert abs(gy - (f(0.3, 0.7 + H) - f(0.3, 0.7 - H)) / (2 * H)) < 1e-6


# -- the user's own rules, and check_grads --------------------------------------------------
def test_a_users_rule_holds_for_complex_values_only_when_it_says_so():
    def square(z):
        return z * z

    def f(z):
        return np.sum(np.abs(square(z)))
    z = complex_normal(3)
    astad.register_vjp(square, lambda g, r, z: 2.0 * g * z)
    with pytest.raises(NotDifferentiableError, match="square of complex values"):
        astad.grad(f)(z)
    astad.register_vjp(square, lambda g, r, z: 2.0 * g * z, complex=True)
    np.testing.assert_allclose(astad.grad(f)(z), complex_gradient(f, z), rtol=1e-6)


def test_check_grads_checks_both_parts_of_complex_entries():
    from astad.testing import check_grads

    def f(z, w):
        return np.sum(np.abs(np.fft.fft(z) * w) ** 2) + abs(w) ** 2
    result = check_grads(f, complex_normal(4), 0.5 - 1j)
    paths = [r.path for r in result.comparisons]
    assert "args[0][0] (imaginary part)" in paths and "args[1] (imaginary part)" in paths

    def wrong(z):  # a vjp conjugated: the imaginary parts disagree
        return z * 1.0
    astad.register_vjp(wrong, lambda g, r, z: np.conj(g), complex=True)
    with pytest.raises(AssertionError, match=r"imaginary part"):
        check_grads(lambda z: np.sum(np.abs(wrong(z) - 1j) ** 2), complex_normal(3))


def test_powers_in_the_exponent_and_a_singular_determinant():
    """The exponent's derivative of z ** y is r log z (the real rule reads log x only for
    x > 0); a singular complex matrix's det has the cofactors of its SVD conjugated."""
    z = np.array([-0.5 + 0.7j, 0.3 - 0.2j, -1.0 + 0.3j])  # (off log's cut)
    y = np.array([1.3 + 0.2j, 0.7 - 0.1j, 0.5 + 0.0j])
    for op in (np.power, np.float_power, lambda a, b: a ** b):
        check_real_function(lambda y, op=op: np.real(np.sum(op(z, y) * (1 + 2j))), y)
        check_real_function(lambda x, op=op: np.real(np.sum(op(x, y) * (1 - 1j))), z)
    at_zero = np.array([0j, 0j, 0j, 0.5 + 0.2j])  # (0 ** y: y = 1, y = 0, Re y > 1)
    exponents = np.array([1 + 0j, 0j, 2.5 - 1j, 1.5 - 0.3j])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the derivative's own arithmetic warns nowhere)
        g = astad.grad(lambda z: np.real(np.sum(z ** exponents)))(at_zero)
    np.testing.assert_allclose(g[:3], [1.0, 0.0, 0.0])
    singular = np.array([[1 + 1j, 2 - 1j], [0.5 + 0.5j, 1 - 0.5j]])
    assert abs(np.linalg.det(singular)) < 1e-14
    g = astad.grad(lambda a: np.real(np.linalg.det(a) * (1 + 2j)))(singular)
    cofactors = np.array([[singular[1, 1], -singular[1, 0]], [-singular[0, 1], singular[0, 0]]])
    np.testing.assert_allclose(g, (1 + 2j) * cofactors, atol=1e-12)


@pytest.mark.parametrize("name", ["tanh", "arcsinh", "arctan", "sinh", "exp", "log", "sqrt",
                                  "arcsin", "arccos", "arctanh", "tan", "expm1", "log1p"])
def test_holomorphic_functions_far_from_zero(name):
    """Where the real rules switch to other forms for large |x| (tanh's sech^2 by
    exp(-2|x|)), the complex derivative still holds."""
    fn = getattr(np, name)
    z = np.array([3.5 + 0.5j, -4.0 - 1.2j, 0.2 + 5.0j, -6.0 + 2.0j])
    check_real_function(lambda z: np.real(np.sum(fn(z) * (1 + 2j))), z, rtol=1e-5,
                        atol=1e-6)
