"""Smoke test of benchmarks/derivatives.py: its --quick mode runs with the peers hidden
(as in CI, where they are not installed), checks every derivative it times, and writes a
well-formed JSON and table. No timing is asserted beyond being positive."""
from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "derivatives.py"
PEERS = ["autograd", "jax", "torch"]

# the peers' imports fail (as when they are not installed), whatever this machine has
RUN_WITHOUT_PEERS = (
    "import runpy, sys\n"
    "sys.modules.update(dict.fromkeys({peers}))\n"
    "sys.argv = [{script!r}, '--quick', '--out', {out!r}]\n"
    "runpy.run_path({script!r}, run_name='__main__')\n")


def _positive(x):
    return isinstance(x, float) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_derivatives_quick_without_peers(tmp_path):
    out = tmp_path / "derivatives.json"
    code = RUN_WITHOUT_PEERS.format(peers=PEERS, script=str(SCRIPT), out=str(out))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "quick"
    assert set(result["peers"]) == {"autograd", "torch", "jax", "jax_jit"}
    assert all(not p["available"] and "not installed" in p["reason"]
               for p in result["peers"].values())

    spec = importlib.util.spec_from_file_location("benchmark_programs",
                                                  ROOT / "benchmarks" / "programs.py")
    programs = sys.modules["benchmark_programs"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(programs)  # (its dataclasses look their module up by name)
    rows = result["programs"]
    assert {r["program"] for r in rows} == {c.program for c in programs.make_cases(quick=True)}
    for r in rows:
        for key in ("primal_s", "jvp_s", "f_jvp_s", "grad_s", "hvp_s"):
            assert _positive(r[key]), (r["program"], key, r[key])
        assert math.isclose(r["jvp_over_primal"], r["jvp_s"] / r["primal_s"])
        assert math.isclose(r["hvp_over_grad"], r["hvp_s"] / r["grad_s"])
        # the script checked jvp and the HVP against the hand-written gradient
        assert r["check"]["astad.jvp"] <= 1e-9 and r["check"]["hvp"] <= 1e-5
        assert r["timings"]["hvp"]["samples"]
    assert len(result["goals"]) == 2

    problems = {(p["problem"], p["variant"]): p for p in result["problems"]}
    assert set(problems) == {("jacobian", "numpy"), ("jacobian", "lists"),
                             ("hessian", "numpy"), ("hessian", "lists")}
    for p in problems.values():
        assert _positive(p["primal_s"])
        astad_methods = [m for m in p["methods"] if m["tool"] == "astad"]
        assert astad_methods and all(m["status"] == "ok" and _positive(m["median_s"])
                                     and "hand-derived" in m["check"] for m in astad_methods)
        assert all(m["status"] in ("not installed", "not run")
                   for m in p["methods"] if m["tool"] != "astad")
    assert {m["method"] for m in problems["jacobian", "numpy"]["methods"]} >= {
        "astad.jacrev", "astad.jacfwd", "astad.jacobian"}

    table = out.with_suffix(".md").read_text()
    assert "| program | size | primal | astad.jvp |" in table
    assert "astad.hessian" in table and "not installed" in table


ARRAYS = ROOT / "benchmarks" / "arrays.py"


def _load_arrays():
    spec = importlib.util.spec_from_file_location("benchmark_arrays", ARRAYS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_arrays_quick_without_peers(tmp_path):
    """benchmarks/arrays.py --quick as in CI: every program (the RNN and the heat stencil,
    which write into arrays, among them) is checked against finite differences and timed;
    the kept-memory child runs without the peers too."""
    out = tmp_path / "arrays.json"
    code = RUN_WITHOUT_PEERS.format(peers=["autograd", "torch"], script=str(ARRAYS),
                                    out=str(out))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "quick"
    assert result["peers"] == {"autograd": "not installed", "torch": "not installed"}
    arrays = _load_arrays()
    rows = result["rows"]
    assert [r["program"] for r in rows] == [c[0] for c in arrays.cases(quick=True)] + ["per-op"]
    for r in rows:
        assert _positive(r["primal_s"]) and _positive(r["astad_s"]), r
        assert math.isclose(r["grad_over_primal"], r["astad_s"] / r["primal_s"])
        assert r["fd_max_relative_error"] <= 1e-4
        assert r["autograd_s"] is None and r["torch_s"] is None
        kept = r["kept_memory"]
        assert _positive(kept["astad_s"]) and kept["torch_s"] is None
    for r in rows:
        if r["program"] in ("rnn", "heat"):
            assert _positive(r["functional_primal_s"])
            assert set(r["peer_forms"]) == {"autograd", "torch"}
    table = out.with_suffix(".md").read_text()
    assert "| rnn |" in table and "| heat |" in table and "not installed" in table


def test_arrays_peer_forms_agree_with_astad():
    """The peers' forms of the programs that write into arrays compute the same value and
    gradient as astad on the imperative code (bench() asserts it before timing; here
    with each peer that is installed, and the functional forms on plain numpy always)."""
    arrays = _load_arrays()
    peers = arrays.load_peers(arrays.PEER_KEYS)
    for name, label, fn, args, wrt in arrays.cases(quick=True):
        if name in ("rnn", "heat"):
            row = arrays.bench(name, label, fn, args, wrt, samples=1, target=1e-4,
                               peers=peers)
            for key, module in peers.items():
                assert (row[f"{key}_s"] is None) == (module is None)


@pytest.mark.slow
def test_hand_jacobian_quick(tmp_path):
    """benchmarks/hand_jacobian.py --quick: jacrev, the pullbacks and jacfwd agree on the
    hand-tracking model, and every variant is timed (no ratio is asserted)."""
    out = tmp_path / "hand_jacobian.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hand_jacobian.py"),
                           "--quick", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "quick" and result["max_relative_difference"] < 1e-10
    assert set(result["medians_s"]) == {"primal", "astad.jacrev", "astad.jacfwd",
                                        "300 pullbacks of one f.vjp"}
    assert all(_positive(t) for t in result["medians_s"].values())
    assert "| astad.jacrev |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_scientific_quick_without_peers(tmp_path):
    """benchmarks/scientific.py --quick --peers none: astad's gradients through
    scipy.stats, odeint, solve_ivp and expm checked against central differences (and
    odeint against the unrolled integrator), timed against the primal (no ratio is
    asserted)."""
    out = tmp_path / "scientific.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scientific.py"),
                           "--quick", "--peers", "none", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["mode"] == "quick" and result["peers"] == {}
    names = [row["program"] for row in result["programs"]]
    assert names == ["norm n=1000", "norm n=100000", "gamma n=1000", "gamma n=100000",
                     "odeint", "solve_ivp", "expm n=6", "expm n=10"]
    for row in result["programs"]:
        assert all(_positive(t) for t in row["median_s"].values())
        assert all(error <= 1e-5 for error in row["check"].values())
    odeint = result["programs"][4]
    assert set(odeint["check"]) == {"astad", "differences", "unrolled"}
    assert "| odeint |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_variants_quick_checks_every_form(tmp_path):
    """benchmarks/variants.py --quick --no-suite: every form checked against the ordinary
    code and differences (a transform against the general path) before it is timed, and
    the helpers, generators, methods and early returns on the specialised code."""
    out = tmp_path / "variants.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "variants.py"),
                           "--quick", "--no-suite", "--samples", "1", "--target", "0.001",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {"helpers", "branches", "lists", "tiny derivatives"} <= {r["family"] for r in rows}
    assert all(r["path"] == "specialised" for r in rows
               if r["family"] in ("helpers", "branches", "lists"))
    assert all(_positive(r["grad_s"]) for r in rows)


@pytest.mark.slow
def test_nested_quick_checks_every_pair(tmp_path):
    """benchmarks/nested.py --quick: saddle and particle give the same answer with
    astad's inner gradients as with hand-written ones, and each closure pair agrees,
    before they are timed; the table and JSON are written."""
    out = tmp_path / "nested.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nested.py"), "--quick",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["pair"] for r in rows][:2] == ["saddle", "particle"]
    assert all(_positive(r["fast_s"]) and _positive(r["slow_s"]) for r in rows)
    assert "| saddle |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_by_value_runs_the_three_forms(tmp_path):
    """benchmarks/by_value.py: a task by reference, by value, and by value writing the
    code again, their gradients checked equal first (no ratio is asserted)."""
    out = tmp_path / "by_value.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "by_value.py"),
                           "--samples", "2", "--target", "0.002", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    row, = json.loads(out.read_text())["rows"]
    assert all(_positive(row[key]) for key in ("by_reference_s", "by_value_s",
                                               "written_again_s"))
    assert "| a task: unpickle, one .grad |" in out.with_suffix(".md").read_text()
