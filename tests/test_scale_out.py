"""Decorated functions reach other processes: pickle, process pools, joblib and Dask.

Each engine computes many gradients in worker processes; every one is compared with the
same gradient computed here (the same code on the same machine: equal, not close). The
functions come from ``scale_out_models`` (imported by name in the workers), from a closure
and a "notebook cell" whose source exists only in this process's ``linecache`` (both
travel by value with cloudpickle, source included), and from a script's ``__main__``.
"""
import linecache
import math
import multiprocessing
import pickle
import subprocess
import sys
import types
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import dask
import joblib
import numpy as np
import pytest
from dask.base import tokenize
from dask.distributed import Client, LocalCluster
from joblib.externals.loky import get_reusable_executor

import astad
import scale_out_models as models
from scale_out_models import Oscillator, array_loss, loss, spiral

CASES = models.parameters(120)
EXPECTED = [loss.grad(*case) for case in CASES]
OSCILLATORS = [(Oscillator(1.0 + 0.1 * k, 0.05 * k), (0.3 * k - 1.0, 0.5)) for k in range(20)]
RNG = np.random.default_rng(3)
ARRAY_CASES = [(RNG.normal(size=3), RNG.normal(size=(6, 3)), RNG.normal(size=6))
               for _ in range(10)]


def other_calls():
    """(callable, args) pairs of every kind, with their gradients computed here."""
    calls = [(o.energy.grad, args) for o, args in OSCILLATORS]
    calls += [(Oscillator.energy.grad, (o, *args)) for o, args in OSCILLATORS[:5]]
    calls += [(Oscillator.standard_energy.value_and_grad, (1.5,))]
    calls += [(array_loss.grad, case) for case in ARRAY_CASES]
    calls += [(models.pull, (spiral.vjp, (2.0, 0.5 * k), [1.0, -1.0, 0.5])) for k in range(5)]
    return calls, [function(*args) for function, args in calls]


def assert_same(results, expected):
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        if isinstance(want, np.ndarray):
            assert np.array_equal(got, want)
        elif isinstance(want, tuple) and want and isinstance(want[0], Oscillator):
            assert got == want  # the gradient of the object, a dataclass
        else:
            assert got == want


def notebook_cells():
    """A decorated function and its helper defined in two "notebook cells": their source
    is only in this process's linecache, as a notebook's is, so another process can
    transform them only if the source travels with the function."""
    namespace = {"__name__": "__main__"}
    cells = [
        """\
import math

def damping(t, c):
    return math.exp(-c * t)
""",
        """\
import astad

@astad.reverse_diff
def response(a, c, ts):
    return sum(a * damping(t, c) * math.cos(3.0 * t) for t in ts)
"""]
    for number, source in enumerate(cells, start=7):
        filename = f"<astad-test-cell-{number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (our own source)
    return namespace["response"]


# -- pickle itself --------------------------------------------------------------------------
def test_importable_functions_pickle_by_reference():
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        assert pickle.loads(pickle.dumps(loss, protocol)) is loss
        for attribute in ("grad", "value_and_grad", "vjp"):
            data = pickle.dumps(getattr(loss, attribute), protocol)
            assert b"tanh" not in data  # by reference: no code, no source
            again = pickle.loads(data)
            assert again.__self__ is loss.grad.__self__  # the same machinery, not a copy
        assert pickle.loads(pickle.dumps(Oscillator.energy, protocol)) is Oscillator.energy
    oscillator, args = OSCILLATORS[3]
    for f, f_args in [(oscillator.energy, args), (oscillator.energy.grad, args),
                      (oscillator.energy.value_and_grad, args),
                      (Oscillator.energy.grad, (oscillator, *args)),
                      (Oscillator.standard_energy.grad, (1.5,))]:
        for dumps in (pickle.dumps, cloudpickle.dumps):
            assert pickle.loads(dumps(f))(*f_args) == f(*f_args)


def test_a_pullback_does_not_pickle_and_says_why():
    _, pullback = spiral.vjp(2.0, 0.5)
    with pytest.raises(TypeError, match="Pullback cannot be pickled.*call .vjp"):
        pickle.dumps(pullback)


def test_a_closure_travels_by_value_with_cloudpickle():
    data = [(0.1 * k, math.exp(-0.7 * 0.1 * k)) for k in range(8)]
    fit = models.make_loss(data)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(fit.grad)  # a local object: plain pickle cannot
    again = cloudpickle.loads(cloudpickle.dumps(fit.grad))
    assert again(1.2, 0.5) == fit.grad(1.2, 0.5)
    function = cloudpickle.loads(cloudpickle.dumps(fit))
    assert function is not fit and function(1.2, 0.5) == fit(1.2, 0.5)
    assert function.value_and_grad(1.2, 0.5) == fit.value_and_grad(1.2, 0.5)
    assert "def fit(" in function.source


def _travelled(fn):
    """``fn`` as cloudpickle 3.1.3 and later rebuild it: its code (and the code nested in
    it) named ``<dynamic-code>`` instead of its file, whatever version is installed."""
    def strip(code):
        consts = tuple(strip(c) if isinstance(c, types.CodeType) else c
                       for c in code.co_consts)
        return code.replace(co_filename="<dynamic-code>", co_consts=consts)
    return types.FunctionType(strip(fn.__code__), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def test_code_that_travelled_without_its_file_name_gets_it_back():
    fit = models.make_loss([(0.1 * k, math.exp(-0.7 * 0.1 * k)) for k in range(8)],
                           decorate=False)
    bundle = astad.api.pickling.source_bundle(fit)  # (what travels with it)
    codes = dict(bundle["codes"])
    assert set(codes.values()) == {models.__file__}  # fit and its generator expression
    arrived = _travelled(fit)
    astad.api.pickling.install_sources(bundle)
    decorated = astad.reverse_diff(arrived)
    assert decorated.grad(1.2, 0.5) == astad.reverse_diff(fit).grad(1.2, 0.5)
    assert "def fit(" in decorated.source
    code = decorated.__code__  # its file name back, and its nested code's
    assert code.co_filename == models.__file__ and code.co_code == fit.__code__.co_code
    assert {c.co_filename for c in code.co_consts if isinstance(c, types.CodeType)} == \
        {models.__file__}
    # passed on from here (a Dask client that unpickled a copy), it still names its file
    passed_on = _travelled(fit)
    assert dict(astad.api.pickling.source_bundle(passed_on)["codes"]) == codes
    assert passed_on.__code__.co_filename == models.__file__


def test_dask_tokens_are_deterministic_and_tell_functions_apart():
    token = tokenize(loss.grad, ensure_deterministic=True)
    assert token == tokenize(loss.grad) == tokenize(pickle.loads(pickle.dumps(loss.grad)))
    assert len({token, tokenize(loss.value_and_grad), tokenize(loss.vjp), tokenize(loss),
                tokenize(spiral.grad)}) == 5
    # closures over different data must never share a token (Dask would reuse results)
    first, second = models.make_loss([(0.0, 1.0)]), models.make_loss([(0.0, 2.0)])
    assert tokenize(first.grad) != tokenize(second.grad)
    assert tokenize(first.grad) == tokenize(first.grad)
    again = models.make_loss([(0.0, 1.0)])
    assert tokenize(again.grad) == tokenize(first.grad)  # same code, same data
    oscillator = OSCILLATORS[2][0]
    twin = Oscillator(oscillator.stiffness, oscillator.damping)
    assert tokenize(oscillator.energy.grad) == tokenize(twin.energy.grad)
    assert tokenize(oscillator.energy.grad) != tokenize(Oscillator(9.0, 0.1).energy.grad)


def transform_calls():
    """(transform, args) pairs: astad's function transforms of importable functions,
    decorated or not, with their results computed here."""
    calls = [(astad.grad(models.plain_energy, argnums=(0, 1)), (0.3 * k, 1.1))
             for k in range(8)]
    calls += [(astad.value_and_grad(loss, argnums=0), case) for case in CASES[:5]]
    calls += [(astad.jacrev(spiral, argnums=(0, 1)), (2.0, 0.4)),
              (astad.hessian(models.plain_energy), (0.5, 1.5)),
              (astad.grad(OSCILLATORS[1][0].energy, argnums=1), OSCILLATORS[1][1])]
    return calls, [transform(*args) for transform, args in calls]


def test_function_transforms_pickle_by_reference_and_by_value():
    calls, expected = transform_calls()
    for (transform, args), want in zip(calls, expected):
        assert b"exp(" not in pickle.dumps(transform)  # by reference: no code, no source
        for dumps in (pickle.dumps, cloudpickle.dumps):
            data = dumps(transform)
            assert pickle.loads(data)(*args) == want
            assert tokenize(pickle.loads(data)) == tokenize(transform)
    fit = models.make_loss([(0.0, 1.0), (1.0, 0.5)], decorate=False)  # a closure
    for transform in (astad.grad(fit, argnums=(0, 1)), astad.hessian(fit)):
        again = pickle.loads(cloudpickle.dumps(transform))
        assert again(1.0, 0.2) == transform(1.0, 0.2)
        assert tokenize(again) == tokenize(transform)
    assert tokenize(astad.grad(fit)) != tokenize(astad.grad(fit, argnums=1))


# -- process pools --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method on this platform")
    calls, expected = other_calls()
    transforms, transformed = transform_calls()
    with multiprocessing.get_context(method).Pool(2) as pool:
        assert_same(pool.starmap(models.call, transforms), transformed)
        assert_same(pool.starmap(loss.grad, CASES, chunksize=10), EXPECTED)
        assert_same(pool.starmap(models.call, calls), expected)
        assert pool.apply(models.token_of, (loss.grad,)) == tokenize(loss.grad)


@pytest.mark.slow
def test_process_pool_executor():
    calls, expected = other_calls()
    with ProcessPoolExecutor(2) as executor:  # (the platform's start method; spawn: above)
        results = list(executor.map(loss.value_and_grad, *zip(*CASES), chunksize=10))
        assert_same([gradient for _, gradient in results], EXPECTED)
        assert_same(list(executor.map(models.call, *zip(*calls))), expected)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["multiprocessing", "loky"])  # (loky keeps threads:
def test_joblib(backend):                                            # fork before them)
    calls, expected = other_calls()
    parallel = joblib.Parallel(n_jobs=2, backend=backend)
    assert_same(parallel(joblib.delayed(loss.grad)(*case) for case in CASES), EXPECTED)
    assert_same(parallel(joblib.delayed(f)(*args) for f, args in calls), expected)
    if backend == "loky":  # cloudpickle: a closure, by value
        fit = models.make_loss([(0.1 * k, 1.0 / (1 + k)) for k in range(6)])
        got = parallel(joblib.delayed(fit.grad)(1.0 + 0.1 * k, 0.3) for k in range(8))
        assert got == [fit.grad(1.0 + 0.1 * k, 0.3) for k in range(8)]
        get_reusable_executor().shutdown(wait=True)  # no threads left for a later fork


# -- Dask distributed, worker processes on localhost ----------------------------------------
@pytest.fixture(scope="module")
def client():
    with dask.config.set({"distributed.worker.daemon": False}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
    with cluster, Client(cluster) as client:
        yield client


@pytest.mark.slow
def test_dask_cluster_computes_the_same_gradients(client):
    pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == 2 and not pids & {__import__("os").getpid()}  # other processes
    calls, expected = other_calls()
    with dask.config.set({"tokenize.ensure-deterministic": True}):
        futures = client.map(loss.grad, *zip(*CASES))
        assert_same(client.gather(futures), EXPECTED)
        assert_same(client.gather(client.map(models.call, *zip(*calls))), expected)
    # the same task twice: the same key, as Dask's deterministic hashing promises
    assert client.map(loss.grad, *zip(*CASES[:3]))[0].key == futures[0].key
    assert client.submit(models.token_of, loss.grad).result() == tokenize(loss.grad)


@pytest.mark.slow
def test_dask_runs_closures_and_notebook_cells_by_value(client):
    fit = models.make_loss([(0.2 * k, math.exp(-0.4 * k)) for k in range(10)])
    cases = [(1.0 + 0.05 * k, 0.3 + 0.02 * k) for k in range(40)]
    got = client.gather(client.map(fit.grad, *zip(*cases)))
    assert got == [fit.grad(*case) for case in cases]
    response = notebook_cells()
    shape = astad.grad(response.__wrapped__.__globals__["damping"], argnums=(0, 1))
    got = client.gather(client.map(shape, [0.1 * k for k in range(20)], [0.7] * 20))
    assert got == [shape(0.1 * k, 0.7) for k in range(20)]  # an undecorated cell function
    ts = [0.1 * k for k in range(12)]
    cases = [(1.0 + 0.1 * k, 0.2 + 0.05 * k, ts) for k in range(30)]
    got = client.gather(client.map(response.value_and_grad, *zip(*cases)))
    assert got == [response.value_and_grad(*case) for case in cases]
    assert client.submit(models.token_of, response.grad).result() == tokenize(response.grad)
    assert client.submit(models.token_of, fit.grad).result() == tokenize(fit.grad)
    # the worker had no copy of the cell: the source travelled with the function
    assert client.submit(lambda f: "def response(" in f.source, response).result()


# -- a script's __main__, through cloudpickle -----------------------------------------------
SCRIPT = '''
import math, pickle, sys
from dataclasses import dataclass
import cloudpickle
import astad

def smooth_abs(x):
    return math.sqrt(x * x + 1e-3)

@astad.reverse_diff
def roughness(heights, scale):
    return scale * sum(smooth_abs(b - a) for a, b in zip(heights, heights[1:]))

@dataclass
class Rod:
    stiffness: float

    @astad.reverse_diff
    def bend(self, angle):
        return self.stiffness * (1.0 - math.cos(angle))

calls = [(roughness.grad, ([0.1 * k * k for k in range(6)], 1.0 + k)) for k in range(10)]
calls += [(Rod(1.0 + k).bend.grad, (0.1 * k,)) for k in range(10)]
calls += [(roughness.value_and_grad, ([1.0, -1.0, 2.0], 0.5))]
expected = [f(*args) for f, args in calls]
with open(sys.argv[1], "wb") as out:
    cloudpickle.dump((calls, expected), out)
'''


@pytest.mark.slow
def test_function_defined_in_main_travels_by_value(tmp_path):
    script = tmp_path / "model_script.py"
    script.write_text(SCRIPT)
    pickled = tmp_path / "calls.pkl"
    subprocess.run([sys.executable, script.name, str(pickled)], cwd=tmp_path, check=True,
                   timeout=120)
    script.unlink()  # the receiving process cannot read the script: the source travels
    receiver = ("import pickle, sys\n"
                "calls, expected = pickle.load(open(sys.argv[1], 'rb'))\n"
                "got = [f(*args) for f, args in calls]\n"
                "assert got == expected, (got, expected)\n"
                "print(len(got))\n")
    result = subprocess.run([sys.executable, "-c", receiver, str(pickled)], cwd="/",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "21"


def test_a_pullback_of_a_tuple_of_floats_does_not_pickle_either():
    def pair(r, theta):
        return (r * math.cos(theta), r * theta)
    for _, pullback in (astad.vjp(pair, 2.0, 0.5), astad.reverse_diff(pair).vjp(2.0, 0.5)):
        assert type(pullback).__name__ == "RowsPullback"
        with pytest.raises(TypeError, match="Pullback cannot be pickled.*call .vjp"):
            pickle.dumps(pullback)


def test_a_function_sent_by_value_is_written_once_per_process(monkeypatch):
    """Each task unpickles a function sent by value anew, with globals of its own: the
    code written for the first one serves the next ones, whose globals hold equal values
    (nothing is written again), and is written anew when a value differs (a constant the
    client changed between tasks), giving that value's gradient."""
    from astad.compile import calls
    response = notebook_cells()
    blob = cloudpickle.dumps(response)
    built = []
    real_build = calls.build
    monkeypatch.setattr(calls, "build", lambda fn, *a: built.append(fn) or real_build(fn, *a))
    args = (1.3, 0.4, [0.1 * k for k in range(8)])
    first = pickle.loads(blob)
    want = first.grad(*args)
    assert want == response.grad(*args)
    written = len(built)
    for _ in range(3):  # (three more tasks)
        task = pickle.loads(blob)
        assert task is not first and task.__globals__ is not first.__globals__
        assert task.grad(*args) == want and task.vjp(*args)[1](1.0) == want
        assert astad.grad(task, argnums=(0, 1))(*args) == want[:2]
    assert len(built) == written  # (nothing written again)
    # a constant of the cell the client changed: other code, and its gradient
    response.__globals__["math"] = types.SimpleNamespace(**{**vars(math),
                                                            "cos": math.sin})
    changed = pickle.loads(cloudpickle.dumps(response))
    assert changed.grad(*args) == response.grad(*args) != want
    assert len(built) > written
