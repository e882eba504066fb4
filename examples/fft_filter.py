"""A filter's frequency response fitted through numpy.fft, with complex parameters.

White-noise test signals are sent through an unknown linear filter (a resonance) and
recorded with noise. The filter is found in the frequency domain, where it multiplies:
its response at each frequency, a complex number H[k], turns a signal x into
irfft(rfft(x) * H).

1. As 129 free complex numbers. The misfit is a real function of complex parameters,
   whose gradient astad gives with JAX's convention (df/dRe - i df/dIm): the step
   downhill is along its conjugate.
2. As a resonance of three real parameters (gain, frequency, quality factor), whose
   response gain / (1 + iQ (f/f0 - f0/f)) is complex: complex values in between, a real
   gradient, fitted by Adam.

Run it with:  python examples/fft_filter.py
"""
import numpy as np

import astad
from astad.testing import check_grads

N = 128                        # samples per recording
FREQUENCIES = np.fft.rfftfreq(N)[1:]  # cycles per sample (the constant term left out)
TRUE = np.array([2.0, np.log(0.12), np.log(4.0)])  # gain, log f0, log Q


def resonance(params):
    """The response of a resonant filter at every frequency (0 at the constant term)."""
    gain, log_f0, log_q = params[0], params[1], params[2]
    f0, q = np.exp(log_f0), np.exp(log_q)
    response = gain / (1.0 + 1j * q * (FREQUENCIES / f0 - f0 / FREQUENCIES))
    return np.concatenate((np.zeros(1, dtype=complex), response))


def filtered(signals, response):
    return np.fft.irfft(np.fft.rfft(signals) * response, n=N)


def misfit(response, signals, recorded):
    """Mean squared error of the recordings, and a little smoothness across frequency."""
    residual = filtered(signals, response) - recorded
    return np.mean(residual ** 2) + 1e-4 * np.sum(np.abs(np.diff(response)) ** 2)


def resonance_misfit(params, signals, recorded):
    return misfit(resonance(params), signals, recorded)


def recordings(seed=0, count=6):
    rng = np.random.default_rng(seed)
    signals = rng.normal(size=(count, N))
    return signals, filtered(signals, resonance(TRUE)) + 0.05 * rng.normal(size=(count, N))


def fit_free(signals, recorded, steps=300, rate=0.5):
    """Gradient descent on the complex response: a step along the conjugate gradient."""
    response = np.zeros(N // 2 + 1, dtype=complex)
    gradient = astad.grad(misfit)
    for _ in range(steps):
        response -= rate * np.conj(gradient(response, signals, recorded))
    return response


def fit_resonance(signals, recorded, steps=400, rate=0.03, b1=0.9, b2=0.999):
    params = np.array([1.0, np.log(0.1), np.log(2.0)])
    m, v = np.zeros(3), np.zeros(3)
    gradient = astad.grad(resonance_misfit)
    for t in range(1, steps + 1):
        g = gradient(params, signals, recorded)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        params = params - rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-8)
    return params


def main():
    signals, recorded = recordings()
    start = np.full(N // 2 + 1, 0.5 + 0.5j)
    check_grads(misfit, start, signals[:2], recorded[:2])
    check_grads(resonance_misfit, np.array([1.5, np.log(0.1), np.log(3.0)]), signals[:2],
                recorded[:2])
    print("OK: the gradients match finite differences (complex and real parameters)")
    free = fit_free(signals, recorded)
    print(f"free response: misfit {misfit(free, signals, recorded):.5f}, largest error "
          f"{np.max(np.abs(free - resonance(TRUE))):.4f}")
    params = fit_resonance(signals, recorded)
    print(f"resonance: misfit {resonance_misfit(params, signals, recorded):.5f}")
    for name, true, fitted in zip(("gain", "frequency", "quality"),
                                  (TRUE[0], *np.exp(TRUE[1:])),
                                  (params[0], *np.exp(params[1:]))):
        print(f"{name} {true:.4f} {fitted:.4f}")


if __name__ == "__main__":
    main()
