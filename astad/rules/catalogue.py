"""The catalogue of astad's array rules: every numpy, numpy.linalg and scipy.special
function astad differentiates, read from the rule tables themselves (and scipy.stats'
distributions and scipy.linalg's solvers, from their modules' tables), and ``render()``,
which writes docs/numpy.md from it (``python tests/test_systematic.py`` rewrites the page;
the test suite checks it, and tests every rule).

``OWN`` is astad's own registry: the rules registered when astad was imported (and
scipy.special's, when they are registered on first use), not the rules a user added
later with ``register_vjp``. The refusals at the end of the page are curated: what astad
does not differentiate, and why.
"""
from __future__ import annotations

import inspect
import sys
import textwrap

import numpy as np

from ..registry import RECORDS, lookup
from .array_building import INDEX_TRICKS
from .array_gather import UfuncMethod
from .array_shapes import take_index

OWN: dict = {}  # callable -> "element-wise" | "vjp" | "no derivative"
_OWN_RECORDS: dict = {}  # callable -> the record astad gave it


def overridden(fn) -> bool:
    """Has a rule the user registered replaced astad's own for ``fn``? (Every
    registration a user makes renews the callable's record: astad/registry.py.)"""
    return fn in _OWN_RECORDS and RECORDS.get(fn) is not _OWN_RECORDS[fn]


def _kind(found) -> str | None:
    if found.partials is not None:
        return "element-wise"
    if found.vjps is not None or found.jvps is not None:
        return "vjp"
    return "no derivative" if found.primal_only else None


def record_own_rules(callables=None) -> None:
    """Record the rules of ``callables`` (every callable with a record: astad's own,
    when astad's import ends) as astad's own."""
    for fn in list(RECORDS) if callables is None else callables:
        found = RECORDS.get(fn)
        if found is None:
            continue
        _OWN_RECORDS[fn] = found
        kind = _kind(found)
        if kind is not None:
            OWN.setdefault(fn, kind)


def record_scipy_rules() -> None:
    """Record scipy.special's rules as astad's own (registered on first use)."""
    from . import scipy_special
    record_own_rules(list(scipy_special.ELEMENTWISE) + [
        fn for fn in scipy_special.PYTHON_FUNCTIONS
        if scipy_special.primitive_of(fn) is not None] + [  # (not the user's own)
        fn for fn in scipy_special.NO_DERIVATIVE if RECORDS[fn].primal_only])
    for fn in scipy_special.ELEMENTWISE:  # a rule the user gave it first is not astad's
        if RECORDS[fn].call is not None:
            _OWN_RECORDS[fn] = None
    for fn in scipy_special.PYTHON_FUNCTIONS:
        OWN.setdefault(fn, "vjp")

# Keywords astad refuses (an error naming them, never ignored), beyond out= and where=,
# which are refused for every function. tests/test_systematic.py checks each one.
REFUSED_KEYWORDS = {
    "numpy.var": ("mean",), "numpy.std": ("mean",), "numpy.nanvar": ("mean",),
    "numpy.nanstd": ("mean",), "numpy.take": ("mode",), "numpy.diff": ("prepend", "append"),
    "numpy.matmul": ("axes", "axis"), "numpy.quantile": ("weights",),
    "numpy.percentile": ("weights",), "numpy.nanquantile": ("weights",),
    "numpy.nanpercentile": ("weights",),
}
# Values of arguments astad refuses, by function (checked by the tests that raise them).
LIMITS = {
    "numpy.row_stack": "numpy < 2.5 (removed there; the same function as vstack)",
    "numpy.average": "returned=True is refused",
    "numpy.linspace": "retstep=True is refused",
    "numpy.repeat": "one int repeats count",
    "numpy.quantile": "method in linear, lower, higher, nearest, midpoint; "
                      "overwrite_input=True refused",
    "numpy.pad": "modes constant, edge, reflect, symmetric, wrap",
    "numpy.linalg.svd": "full_matrices=False for a non-square matrix; hermitian=True refused",
    "numpy.linalg.qr": "modes reduced, complete (square or wide), r",
    "numpy.linalg.pinv": "hermitian=True refused; where the rank is constant",
    "numpy.linalg.lstsq": "where the rank is constant",
    "numpy.linalg.eigh": "distinct eigenvalues; one triangle is read",
    "numpy.linalg.cholesky": "one triangle is read",
    "numpy.gradient": "in the array (the spacing is constant)",
    "numpy.einsum": "every form: '...', implicit output, repeated indices, sublists",
    "scipy.special.logsumexp": "return_sign=True is refused",
}
# Functions astad refuses, and why (curated: a numpy function with no rule is refused with
# its name and the user's line, whether it is listed here or not).
REFUSED = [
    ("complex values reaching a rule that holds for real values only (every function not "
     "listed under \"Complex values\" above)", "among them numpy.maximum, numpy.minimum, "
     "numpy.sort, numpy.var, numpy.std, numpy.linalg.norm, numpy.linalg.svd, "
     "numpy.linalg.qr, numpy.linalg.cholesky, numpy.linalg.eigh and scipy.special of "
     "complex arrays"),
    ("writing into arrays by these functions (x[i] = v, the in-place operators, "
     "numpy.add.at, numpy.put_along_axis, numpy.copyto and out= are differentiated: "
     "rules/array_writes.py)",
     "the other ufunc.at, numpy.put, numpy.place, numpy.putmask, numpy.fill_diagonal, "
     "in-place ndarray.sort, ndarray.partition and ndarray.fill"),
    ("a choice among equal elements", "numpy.unique: which of several equal elements a "
     "result stands for is not defined"),
    ("counts and bins", "numpy.histogram, numpy.histogram2d, numpy.bincount (integer "
     "counts; bincount's weights are not differentiated yet)"),
    ("not differentiated yet", "numpy.interp, numpy.convolve, numpy.correlate, "
     "numpy.polyval, numpy.polyfit, numpy.trapezoid, numpy.cov, numpy.corrcoef, "
     "numpy.linalg.cond, numpy.linalg.tensorsolve, numpy.linalg.tensorinv, numpy.block, "
     "numpy.meshgrid of differentiated arrays"),
]


# -- names ---------------------------------------------------------------------------------------
def _namespaces():
    spaces = [("numpy", np), ("numpy.linalg", np.linalg)]
    if "scipy.special" in sys.modules:
        spaces.append(("scipy.special", sys.modules["scipy.special"]))
    return spaces


def _is_astads(fn) -> bool:
    """A function of astad's own in the table (index_scatter, the cotangent of indexing
    as a primitive): tested, not listed."""
    return fn is not take_index and not isinstance(fn, UfuncMethod) and (
        getattr(fn, "__module__", None) or "").startswith("astad.")


def names_of(fn) -> list:
    """Every public name of ``fn`` (numpy's aliases included), qualified."""
    if fn is take_index:
        return ["x[index]"]
    if isinstance(fn, UfuncMethod):
        return [f"numpy.{fn[0].__name__}.{fn[1]}"]
    names = []
    for prefix, module in _namespaces():
        for name, value in vars(module).items():
            if value is fn and not name.startswith("_"):
                names.append(f"{prefix}.{name}")
    if not names:  # a private function behind a public one (scipy's zeta as a ufunc)
        names.append(f"{getattr(fn, '__module__', None) or 'scipy.special'}."
                     f"{getattr(fn, '__name__', repr(fn))}".replace("._ufuncs", ""))
    return sorted(names, key=lambda n: (len(n), n))


def _parameters(derivative):
    try:
        return list(inspect.signature(derivative).parameters.values())
    except (TypeError, ValueError):
        return []


def differentiable_in(fn) -> str:
    """The arguments a derivative is given for, by the names its rule gives them."""
    found = RECORDS[fn]
    if found.partials is not None:
        partials = found.partials
        params = _parameters(next(p for p in partials if p is not None))
        return ", ".join(p.name if k < len(params) else f"argument {k}" for k, p in
                         enumerate(params[:len(partials)]) if partials[k] is not None)
    derivatives = found.vjps or found.jvps or ()
    if len(derivatives) > 8:
        return "every operand"
    names = []
    for k, derivative in enumerate(derivatives):
        if derivative is None:
            continue
        params = [p for p in _parameters(derivative) if p.kind is p.POSITIONAL_OR_KEYWORD]
        names.append(params[2 + k].name if len(params) > 2 + k else f"argument {k}")
    return ", ".join(names)


def keywords_of(fn) -> str:
    """The keywords the rule's derivatives read (numpy's others are passed through)."""
    found = RECORDS[fn]
    if found.partials is not None:
        return "ufunc keywords" if isinstance(fn, np.ufunc) else "-"
    derivatives = [d for d in (found.vjps or ()) if d is not None][:1]
    if not derivatives:
        return "-"
    skip = {"g", "r", "t", "out", "self"}
    params = _parameters(derivatives[0])
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    differentiable = {positional[2 + k].name for k, d in enumerate(found.vjps or ())
                      if d is not None and len(positional) > 2 + k}
    words = [p.name for p in params[2:] if p.name not in skip | differentiable and
             p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and
             p.default is not inspect.Parameter.empty]
    return ", ".join(words) or "-"


def forward_mode(fn) -> str:
    found = RECORDS[fn]
    if found.partials is not None:
        return "from the partials"
    if found.jvps is not None:
        return "jvp, batched" if found.batched_jvps else "jvp"
    return "no"


def _reverse(fn) -> str:
    found = RECORDS[fn]
    if found.partials is not None:
        return "partials"
    return "vjp, batched" if found.batched_vjps else "vjp"


# -- the page ------------------------------------------------------------------------------------
def _section(fn) -> str:
    name = names_of(fn)[0]
    if RECORDS[fn].partials is not None and not name.startswith("scipy"):
        return "Element-wise"
    if name.startswith("scipy"):
        return "scipy.special"
    if name.startswith("numpy.linalg"):
        return "numpy.linalg"
    if name.startswith(("numpy.fft", "cmath")):
        return "numpy.fft and cmath"
    if isinstance(fn, UfuncMethod):
        return "ufunc methods"
    if fn is take_index or fn in INDEX_TRICKS or name in ("numpy.array",
                                                                 "numpy.asarray"):
        return "Indexing and building arrays from values"
    return "numpy functions"


SECTIONS = ("Element-wise", "numpy functions", "ufunc methods", "numpy.linalg",
            "numpy.fft and cmath", "Indexing and building arrays from values",
            "scipy.special")


def _scipy_rules() -> dict:
    """scipy.special's rules as declared (registered on first use, so read from its table)."""
    try:
        from . import scipy_special
    except ImportError:  # scipy is optional
        return {}
    rules = {fn: "element-wise" for fn in scipy_special.ELEMENTWISE}
    rules.update(dict.fromkeys(scipy_special.PYTHON_FUNCTIONS, "vjp"))
    return rules


def catalogue_rows() -> dict:
    """{section: [(names, differentiable in, keywords, reverse, forward, limits)]}."""
    own = dict(OWN)
    scipy_rules = _scipy_rules()
    missing = [fn for fn in scipy_rules if fn not in RECORDS]
    if missing:
        lookup(missing[0])  # (scipy.special's rules: registered on first use)
    own.update(scipy_rules)
    rows = {section: [] for section in SECTIONS}
    twins = complex_twins()
    for fn, kind in own.items():
        if kind == "no derivative" or _is_astads(fn) or fn in twins:
            continue
        names = names_of(fn)
        limits = LIMITS.get(names[0], "")
        refusals = RECORDS[fn].refusals if fn in RECORDS else None
        if refusals:  # (arguments with no derivative: rules/refusals.refuse_arguments)
            limits = "; ".join(x for x in (limits, "not differentiable in " + ", ".join(
                what for what, _ in refusals[1].values())) if x)
        refused = REFUSED_KEYWORDS.get(names[0])
        if refused:
            limits = "; ".join(x for x in (limits, ", ".join(f"{k}=" for k in refused) +
                                           " refused") if x)
        rows[_section(fn)].append((names[0], (", ".join(f"`{n}`" for n in names),
                                   differentiable_in(fn), keywords_of(fn), _reverse(fn),
                                   forward_mode(fn), limits)))
    _rows_of_removed_functions(rows)
    return {section: [row for _, row in sorted(entries)] for section, entries in rows.items()}


def _rows_of_removed_functions(rows: dict) -> None:
    """numpy.row_stack's row under a numpy that no longer has it (the page does not depend on
    the installed numpy): vstack's row under its name."""
    if hasattr(np, "row_stack"):
        return
    for entries in rows.values():
        for name, row in list(entries):
            if name == "numpy.vstack":
                entries.append(("numpy.row_stack", ("`numpy.row_stack`", *row[1:5],
                                                    LIMITS["numpy.row_stack"])))


def _stats_section() -> list:
    """The distributions of scipy.stats astad differentiates (rules/scipy_stats.py: each
    a function of numpy and scipy.special, registered for scipy's bound methods)."""
    try:
        from . import scipy_stats
    except ImportError:  # scipy is optional
        return []
    intro = textwrap.wrap(
        "These distributions' functions are written in astad as numpy and "
        "scipy.special code (`astad/rules/scipy_stats.py`), which astad "
        "differentiates in both modes and to any order. Called as scipy's methods "
        "(`scipy.stats.norm.logpdf(x, loc, scale)`, parameters positional or by "
        "keyword) or frozen (`scipy.stats.norm(loc, scale).logpdf(x)`, with "
        "differentiated parameters or scipy's own frozen object). With no "
        "differentiated argument scipy's own method runs. Another distribution or "
        "method of scipy.stats is refused when a differentiated value reaches it, with "
        "an error naming it (`scipy.stats.weibull_min.logpdf`) and its `register_vjp` "
        "line.", width=88)
    lines = ["## scipy.stats", "", *intro, "",
             "| distribution | functions | differentiable in | limits |", "|---|---|---|---|"]
    for family in scipy_stats.FAMILIES.values():
        lines.append(f"| `scipy.stats.{family.name}` | {', '.join(family.methods)} | "
                     f"{scipy_stats.differentiable_in(family)} | "
                     f"{scipy_stats.limits(family) or '-'} |")
    lines.append("")
    return lines


def _linalg_section() -> list:
    """scipy.linalg's solvers astad differentiates (rules/scipy_linalg.py: each a function
    of numpy's, registered for scipy's function)."""
    try:
        from . import scipy_linalg, scipy_matrix_functions
    except ImportError:  # scipy is optional
        return []
    intro = textwrap.wrap(
        "These are written in astad as numpy code (`astad/rules/scipy_linalg.py`: "
        "`numpy.linalg.solve` and `numpy.linalg.cholesky` of the matrix scipy reads), "
        "which astad differentiates in both modes and to any order. The triangle scipy "
        "reads is the one differentiated: the entries it ignores get a zero gradient. "
        "With no differentiated argument scipy's own function runs. `overwrite_a`, "
        "`overwrite_b` and `check_finite` are accepted and ignored. `expm`, `sqrtm` "
        "and the Sylvester and Lyapunov equations are primitives whose derivatives are "
        "calls of the same functions (`astad/rules/scipy_matrix_functions.py`), so "
        "they too differentiate to any order. These functions of "
        "scipy.linalg are refused by name when a differentiated value reaches them: "
        + ", ".join(f"`{name}`" for name in scipy_linalg.REFUSED) + ".", width=88)
    lines = ["## scipy.linalg", "", *intro, "",
             "| function | differentiable in | limits |", "|---|---|---|"]
    rows = {**{name: (differentiable, limits) for name, (_, differentiable, limits)
               in scipy_linalg.FUNCTIONS.items()}, **scipy_matrix_functions.TABLE}
    for name, (differentiable, limits) in rows.items():
        lines.append(f"| `scipy.linalg.{name}` | {differentiable} | {limits} |")
    lines += ["", "## scipy.integrate and scipy.optimize", "", *textwrap.wrap(
        "`scipy.integrate.odeint` is differentiable in `y0`, `t` and `args`: reverse "
        "mode by the adjoint method, forward mode by sensitivities, each integrated with "
        "the call's tolerances (`astad/api/integrate.py`); once, not to second order; "
        "`full_output=True` is refused. `scipy.integrate.solve_ivp` likewise in `y0` and "
        "`args` (its solution `.y` at its times `.t`), every method, each piece "
        "integrated by solve_ivp with the call's method and tolerances; `dense_output` "
        "and `events` are refused. scipy.optimize's root finders (`brentq`, `brenth`, "
        "`ridder`, `bisect`, `toms748`, `newton`, `fsolve`, `root_scalar`'s `.root`, "
        "`root`'s `.x`) are differentiable in `args`, and `astad.fixed_point` in its "
        "parameters, by the implicit function theorem (`astad/api/roots.py`, "
        "`astad/api/implicit.py`); `root`'s other entries are constants (its residual's "
        "derivative is zero at a root).",
        width=88), ""]
    return lines


def complex_twins() -> set:
    """The functions standing for others on complex values (rules/complex_values.py):
    listed under the function they stand for."""
    return {r.complex for r in RECORDS.values() if callable(r.complex)}


def _complex_section() -> list:
    names = {names_of(fn)[0] for fn, r in list(RECORDS.items())
             if r.complex is not None and fn not in complex_twins() and
             not _is_astads(fn) and fn in OWN}
    if "numpy.vstack" in names:  # (the page does not depend on numpy's version)
        names.add("numpy.row_stack")
    names = sorted(names)
    return ["## Complex values", ""] + textwrap.wrap(
        "Complex arrays and numbers are differentiated with JAX's convention "
        "(docs/complex.md: the gradient of a real function of z = x + iy is "
        "df/dx - i df/dy) by these rules, which hold for complex values: holomorphic and "
        "linear functions as they are, the others (abs, real, imag, conj, angle, "
        "real_if_close, vdot, eig's eigenvectors, arccosh) by rules of their own. Every "
        "other rule holds for real values only, and a complex value reaching it is "
        "refused with the function's name. " + ", ".join(f"`{n}`" for n in names) + ".",
        width=88) + [""]


def render() -> str:
    """The text of docs/numpy.md."""
    rows = catalogue_rows()
    lines = [
        "# numpy, numpy.linalg, scipy.special, scipy.linalg and scipy.stats: what astad "
        "differentiates",
        "",
        "<!-- generated by astad.rules.catalogue.render(): do not edit; regenerate with",
        "     python tests/test_systematic.py -->",
        "",
        "Every function below has a derivative rule in astad's rule table: a vjp (reverse",
        "mode) and a jvp (forward mode), or, for an element-wise function, its partial",
        "derivatives (both modes derive from them). *batched*: the rule takes many",
        "directions at once (a Jacobian's rows or columns in one call). Every rule is",
        "checked against finite differences by `tests/test_systematic.py`, and its vjp and",
        "jvp are themselves differentiated there (derivatives of derivatives).",
        "",
        "Keywords: those listed are the ones a rule reads; numpy's other keywords are",
        "passed to numpy as they are. `out=` (one output array) is a write into that array,",
        "differentiated as `out[...] = result` is; `where=` is refused for every function",
        "(select with `np.where` instead). A numpy function that is not listed is refused",
        "when a differentiated value reaches it, with an error naming it and the line of",
        "your code that called it.",
        "",
    ]
    total = sum(len(r) for r in rows.values())
    lines += [f"{total} functions have rules.", ""]
    for section in SECTIONS:
        if not rows[section]:
            continue
        lines += [f"## {section}", "",
                  "| function | differentiable in | keywords read | reverse | forward | limits |",
                  "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cell or "-" for cell in row) + " |"
                  for row in rows[section]]
        lines.append("")
    lines += _complex_section()
    lines += _linalg_section()
    lines += _stats_section()
    lines += ["## No derivative: computed on primal values", "",
              "These give integer or bool results, or are piecewise constant: astad runs them "
              "on the primal values and the result carries no derivative.", ""]
    plain = sorted(names_of(fn)[0] for fn, kind in OWN.items() if kind == "no derivative")
    lines += [", ".join(f"`{n}`" for n in plain), ""]
    lines += ["## Refused", ""]
    lines += [f"- {why}: {what}." for why, what in REFUSED]
    lines.append("")
    return "\n".join(lines)

