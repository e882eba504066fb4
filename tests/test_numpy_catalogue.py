"""The catalogue's functions as people call them (issue 13, item 2): in differentiated
programs, through every route a call takes (numpy's dispatch, a call resolved when the
function is transformed, one found at run time), with the refusals the catalogue lists.

tests/test_systematic.py checks each rule alone; here whole functions are checked
against finite differences with ``astad.testing.check_grads``.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.special as sc

import astad
from astad.rules import catalogue
from astad.testing import check_grads

ROOT = Path(__file__).resolve().parent.parent


def rand(shape, seed, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


# -- scipy.special: registered the first time a scipy callable reaches astad -----------------
_SCIPY_ROUTES = {
    # the first scipy callable astad meets is resolved when f is transformed
    "transform": """
        from scipy.special import logsumexp
        def f(x):
            return logsumexp(x * 2.0)
        expected = 2.0 * sc.softmax(2.0 * x)
    """,
    # a scipy ufunc reaches numpy's dispatch first
    "dispatch": """
        def f(x):
            return np.sum(sc.expit(x) ** 2)
        s = sc.expit(x)
        expected = 2.0 * s * s * (1.0 - s)
    """,
    # a scipy function known only at run time (passed as an argument)
    "run time": """
        def pick_second(fn):
            def f(x):
                return fn(x)[1]
            return f
        f = pick_second(sc.log_softmax)
        expected = np.eye(4)[1] - sc.softmax(x)
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("route", list(_SCIPY_ROUTES))
def test_scipy_rules_are_registered_on_first_use(route, tmp_path):
    script = tmp_path / "first_use.py"
    script.write_text("import sys\nimport numpy as np\nimport astad\n"
                      "assert 'scipy' not in sys.modules, 'import astad imported scipy'\n"
                      "import scipy.special as sc\nfrom astad.rules import scipy_loader\n"
                      "assert scipy_loader.pending\nx = np.array([0.3, -1.2, 0.5, 2.0])\n" +
                      textwrap.dedent(_SCIPY_ROUTES[route]) +
                      "g = astad.reverse_diff(f).grad(x)\n"
                      "np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-14)\n"
                      "assert not scipy_loader.pending\nprint('ok')\n")
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_scipy_functions_in_a_program():
    x, b = rand((3, 4), 1), rand((4,), 2, 0.5, 2.0)

    def f(x, b):
        return (np.sum(sc.logsumexp(x, axis=1, b=b)) + np.sum(sc.gammaln(x * x + 1.0))
                + np.sum(sc.xlogy(x, b) * sc.erf(x)) + np.sum(sc.log_softmax(x, axis=0)[0]))

    check_grads(astad.reverse_diff(f), x, b)


def test_a_scipy_function_without_a_rule_names_itself():
    def f(x):
        return np.sum(sc.struve(1.0, x))

    with pytest.raises(astad.NotDifferentiableError, match="scipy.special.struve"):
        astad.reverse_diff(f).grad(rand((3,), 3))


def test_a_scipy_argument_with_no_derivative_names_itself():
    def f(v):
        return np.sum(sc.jv(v, 2.0))

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"scipy\.special\.jv is not differentiable in its order v "
                             r"\(argument 0\)"):
        astad.reverse_diff(f).grad(rand((3,), 3))


# -- np.r_, np.c_, ufunc methods, np.full in user code -------------------------------------
def test_index_tricks_in_a_program():
    x, y = rand((3,), 4), rand((3, 2), 5)

    def f(x, y):
        row = np.r_[x, 0:2, 2.0, x[::-1]]
        columns = np.c_[x, y, x * x]
        return np.sum(row * np.arange(row.size)) + np.sum(columns ** 2 * 0.5)

    check_grads(astad.reverse_diff(f), x, y)
    np.testing.assert_array_equal(astad.reverse_diff(f).value_and_grad(x, y)[0], f(x, y))


def test_an_index_trick_string_directive_is_refused():
    def f(x):
        return np.sum(np.r_["0,2", x, x])

    with pytest.raises(astad.NotDifferentiableError, match="np.r_"):
        astad.reverse_diff(f).grad(rand((3,), 6))


def test_ufunc_methods_in_a_program():
    x = rand((4, 3), 7, 0.5, 1.5)

    def f(x):
        return (np.sum(np.add.accumulate(x, axis=0)[-1] * np.multiply.reduce(x, axis=1)[:3])
                + np.sum(np.add.reduceat(x, [0, 2], axis=0)) + np.maximum.reduce(x, axis=None)
                + np.sum(np.multiply.outer(x[0], x[:, 1])))

    check_grads(astad.reverse_diff(f), x)


def test_ufunc_at_writes_into_an_array_made_inside():
    def f(x):
        y = np.zeros(3)
        np.add.at(y, [0, 0], x[:2])  # each repetition adds (tests/test_array_writes.py)
        return np.sum(y * y)

    x = rand((3,), 8)
    np.testing.assert_allclose(astad.reverse_diff(f).grad(x), [2 * (x[0] + x[1])] * 2 + [0])


def test_a_differentiated_fill_value():
    def f(v, w):
        return np.sum(np.full((2, 3), v) * np.arange(6.0).reshape(2, 3)) + np.sum(
            np.full_like(np.zeros((3,)), w) ** 2)

    check_grads(astad.reverse_diff(f), 0.7, -1.3)


# -- programs built from the catalogue --------------------------------------------------------
def test_gaussian_log_likelihood_through_cholesky_and_slogdet():
    x, mean, root = rand((5, 3), 9), rand((3,), 10), rand((3, 3), 11)

    def loglik(x, mean, root):
        cov = root @ root.T + 3.0 * np.eye(3)
        chol = np.linalg.cholesky(cov)
        sign, logdet = np.linalg.slogdet(cov)
        z = np.linalg.solve(chol, (x - mean).T)
        return -0.5 * np.sum(z * z) - 0.5 * x.shape[0] * logdet

    check_grads(astad.reverse_diff(loglik), x, mean, root)


def test_low_rank_reconstruction_through_svd_qr_and_eigh():
    a = rand((5, 4), 12)

    def f(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        low = (u[:, :2] * s[:2]) @ vh[:2]
        q, r = np.linalg.qr(a)
        w, v = np.linalg.eigh(a.T @ a)
        return (np.sum((a - low) ** 2) + np.sum(np.abs(np.diag(r))) + np.sum(w * w)
                + np.sum(v[:, -1] ** 2) + np.linalg.norm(a, "nuc"))

    check_grads(astad.reverse_diff(f), a)


def test_statistics_and_shapes_in_a_program():
    x = rand((4, 6), 13)

    def f(x):
        q = np.percentile(x, [20.0, 80.0], axis=1)
        parts = np.split(x, 3, axis=1)
        padded = np.pad(np.tril(x[:, :4]), 1, mode="reflect")
        grid = np.einsum("...ij,...ij->...", padded[None], padded[None])
        return (np.sum(q * q) + np.sum(parts[1] * parts[2]) + np.sum(grid)
                + np.sum(np.cumprod(1.0 + 0.1 * x, axis=0)) + np.median(x)
                + np.sum(np.gradient(x, axis=1) ** 2) + np.sum(np.kron(x[:2, :2], x[0])))

    check_grads(astad.reverse_diff(f), x)


def test_split_pieces_and_multi_output_results_keep_their_types():
    x = rand((4, 4), 14) + 4.0 * np.eye(4)

    def f(x):
        pieces = np.array_split(x, 3)
        result = np.linalg.eigh(x)
        assert isinstance(pieces, list) and len(pieces) == 3
        assert type(result).__name__ == type(np.linalg.eigh(np.eye(2))).__name__
        return np.sum(result.eigenvalues) + np.sum(pieces[2])

    check_grads(astad.reverse_diff(f), x)


# -- refusals ---------------------------------------------------------------------------------
ONES = np.ones(9)
_KEYWORD_CALLS = {}  # every curated refused keyword, in a call


def refusing(name):
    def register(fn):
        _KEYWORD_CALLS[name] = fn
        return fn
    return register


@refusing("numpy.var")
def _var_mean(x):
    return np.var(x, mean=np.mean(x, keepdims=True))


@refusing("numpy.std")
def _std_mean(x):
    return np.std(x, mean=np.mean(x, keepdims=True))


@refusing("numpy.nanvar")
def _nanvar_mean(x):
    return np.nanvar(x, mean=np.mean(x, keepdims=True))


@refusing("numpy.nanstd")
def _nanstd_mean(x):
    return np.nanstd(x, mean=np.mean(x, keepdims=True))


@refusing("numpy.take")
def _take_mode(x):
    return np.sum(np.take(x, [0, 9], mode="wrap"))


@refusing("numpy.diff")
def _diff_prepend(x):
    return np.sum(np.diff(x, prepend=0.0))


@refusing("numpy.matmul")
def _matmul_axes(x):
    return np.sum(np.matmul(x, x, axes=[(0,), (0,), ()]))


@refusing("numpy.quantile")
def _quantile_weights(x):
    return np.quantile(x, 0.5, method="inverted_cdf", weights=ONES)


@refusing("numpy.percentile")
def _percentile_weights(x):
    return np.percentile(x, 50.0, method="inverted_cdf", weights=ONES)


@refusing("numpy.nanquantile")
def _nanquantile_weights(x):
    return np.nanquantile(x, 0.5, method="inverted_cdf", weights=ONES)


@refusing("numpy.nanpercentile")
def _nanpercentile_weights(x):
    return np.nanpercentile(x, 50.0, method="inverted_cdf", weights=ONES)


def test_the_curated_refused_keywords_are_those_tested():
    assert set(_KEYWORD_CALLS) == set(catalogue.REFUSED_KEYWORDS)


@pytest.mark.parametrize("name", sorted(_KEYWORD_CALLS))
def test_every_curated_refused_keyword_is_refused(name):
    with pytest.raises(astad.NotDifferentiableError,
                       match="|".join(catalogue.REFUSED_KEYWORDS[name])):
        astad.reverse_diff(_KEYWORD_CALLS[name]).grad(rand((9,), 15))


@pytest.mark.parametrize("call, match", [
    (lambda x: np.sum(np.linalg.svd(x[:, :2])[0]), "full_matrices=False"),
    (lambda x: np.sum(np.linalg.svd(x, hermitian=True)[1]), "hermitian"),
    (lambda x: np.sum(np.linalg.pinv(x, hermitian=True)), "hermitian"),
    (lambda x: np.sum(np.linalg.qr(x[:, :2], mode="complete")[0]), "complete"),
    (lambda x: np.sum(np.linalg.qr(x, mode="raw")[0]), "raw"),
    (lambda x: np.sum(np.pad(x, 1, mode="mean")), "np.pad"),
    (lambda x: np.quantile(x, 0.3, method="weibull"), "weibull"),
    (lambda x: np.median(x, overwrite_input=True), "overwrite_input"),
    (lambda x: np.average(x, weights=x * 0.0 + 1.0, returned=True)[0], "returned"),
    (lambda x: np.sum(np.linspace(x[0, 0], 1.0, 4, retstep=True)[0]), "retstep"),
    (lambda x: sc.logsumexp(x, return_sign=True)[0], "return_sign"),
    (lambda x: np.sum(np.gradient(x[0], x[1])), "spacing"),
    (lambda x: np.sum(np.repeat(x, [1, 2, 3], axis=0)), "repeat"),
])
def test_limits_are_refused_with_their_reason(call, match):
    def f(x):
        return call(x)

    with pytest.raises(astad.NotDifferentiableError, match=match):
        astad.reverse_diff(f).grad(rand((3, 3), 16) + 3.0 * np.eye(3))


def test_float_arguments_reach_the_array_rules_as_scalar_duals():
    def f(a, b, c):
        ramp = np.linspace(a, b, 5)
        picked = np.select([ramp > 0.5], [ramp], c)
        return (np.sum(picked * ramp) + np.sinc(a) + sc.expit(b) * np.arcsinh(c)
                + np.sum(np.clip(ramp, c, 2.0)) + np.sum(np.append(ramp, np.array([a, c])) ** 2)
                + np.sum(np.diag(np.full(2, c))) + np.sum(np.r_[a, ramp, c]))

    check_grads(astad.reverse_diff(f), 0.3, 1.7, -0.4)
