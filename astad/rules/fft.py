"""numpy.fft: every transform is linear, so its jvp is itself (on the tangent) and its
vjp its transpose under JAX's convention for complex values (rules/complex_values.py:
``w`` pairs with ``dz`` as ``Re(sum(w * dz))``).

- fft, ifft, fft2, ifft2, fftn, ifftn: the DFT's matrix is symmetric, so the transpose is
  the same transform with the same ``norm``, its result cut or zero-padded back to the
  input's lengths (``n=``/``s=`` cut or padded the input);
- rfft, rfft2, rfftn (a real input, the first half of the last axis): the real part of
  the full transform of the cotangent zero-padded to the full last axis;
- irfft, irfft2, irfftn (the real signal of a Hermitian half): the inverse transform of
  the cotangent, cut to the half stored, each bin that stands for two doubled;
- hfft, ihfft: irfft of the conjugate and the conjugate of rfft, in the other direction;
- fftshift, ifftshift: each other's transpose.
"""
from __future__ import annotations

import inspect

import numpy as np

from .array import NEW_ARRAYS, batched_vjps, register_jvp, register_vjp, result_kinds
from .complex_values import holds_for_complex

fft = np.fft
_FULL = {fft.fft: fft.fftn, fft.fft2: fft.fftn, fft.fftn: fft.fftn,
         fft.ifft: fft.ifftn, fft.ifft2: fft.ifftn, fft.ifftn: fft.ifftn}
_REAL_INPUT = (fft.rfft, fft.rfft2, fft.rfftn)
_REAL_OUTPUT = (fft.irfft, fft.irfft2, fft.irfftn)
_ONE_AXIS = (fft.fft, fft.ifft, fft.rfft, fft.irfft, fft.hfft, fft.ihfft)
_SIGNATURES = {fn: inspect.signature(fn) for fn in (*_FULL, *_REAL_INPUT, *_REAL_OUTPUT,
                                                     fft.hfft, fft.ihfft)}
_OTHER_DIRECTION = {None: "forward", "backward": "forward", "forward": "backward",
                    "ortho": "ortho"}


def _layout(fn, a, args, kwargs):
    """``(s, axes, lengths, norm)`` of the call ``fn(a, *args, **kwargs)`` as fftn takes
    it: the transform's lengths (for an inverse to a real signal: the output's), its axes
    (negative, so that a Jacobian's leading axis of rows leaves them as they are) and the
    input's lengths along them."""
    bound = _SIGNATURES[fn].bind(a, *args, **kwargs)
    bound.apply_defaults()
    given = bound.arguments
    ndim = np.ndim(a)
    if fn in _ONE_AXIS:
        axes = (given["axis"],)
        s = None if given["n"] is None else (given["n"],)
    else:
        axes, s = given["axes"], given["s"]
        if axes is None:
            axes = range(-(ndim if s is None else len(s)), 0)
    axes = tuple(axis % ndim - ndim for axis in axes)
    lengths = tuple(np.shape(a)[axis] for axis in axes)
    if s is None:
        s = lengths
        if fn in _REAL_OUTPUT or fn is fft.hfft:  # (the default: a Hermitian half given)
            s = s[:-1] + (2 * (s[-1] - 1),)
    return tuple(s), axes, lengths, given["norm"]


def _fit(x, lengths, axes):
    """``x`` cut or zero-padded at the end of each of ``axes`` to ``lengths``."""
    for axis, length in zip(axes, lengths):
        have = np.shape(x)[axis]
        if have > length:
            x = x[(Ellipsis, slice(0, length)) + (slice(None),) * (-axis - 1)]
        elif have < length:
            widths = [(0, 0)] * np.ndim(x)
            widths[axis] = (0, length - have)
            x = np.pad(x, widths)
    return x


def _complex_vjp(fn):
    def vjp(g, r, a, *args, **kwargs):
        s, axes, lengths, norm = _layout(fn, a, args, kwargs)
        return _fit(_FULL[fn](g, axes=axes, norm=norm), lengths, axes)
    return vjp


def _real_input_transpose(g, s, axes, lengths, norm):
    full = _fit(g, s[-1:], axes[-1:])  # the bins rfft leaves out: zero
    return np.real(_fit(fft.fftn(full, axes=axes, norm=norm), lengths, axes))


def _real_output_transpose(g, s, axes, lengths, norm):
    half = s[-1] // 2 + 1
    weights = np.full(half, 2.0)
    weights[0] = 1.0
    if s[-1] % 2 == 0:
        weights[-1] = 1.0  # (the Nyquist bin stands for itself)
    weights = np.reshape(weights, (half,) + (1,) * (-axes[-1] - 1))
    inverse = _fit(fft.ifftn(g, axes=axes, norm=norm), (half,), axes[-1:])
    return _fit(inverse * weights, lengths, axes)


def _rfft_vjp(fn):
    def vjp(g, r, a, *args, **kwargs):
        return _real_input_transpose(g, *_layout(fn, a, args, kwargs))
    return vjp


def _irfft_vjp(fn):
    def vjp(g, r, a, *args, **kwargs):
        return _real_output_transpose(g, *_layout(fn, a, args, kwargs))
    return vjp


def _hfft_vjp(g, r, a, *args, **kwargs):  # hfft(a) = irfft(conj(a)), the other direction
    s, axes, lengths, norm = _layout(fft.hfft, a, args, kwargs)
    return np.conj(_real_output_transpose(g, s, axes, lengths, _OTHER_DIRECTION[norm]))


def _ihfft_vjp(g, r, a, *args, **kwargs):  # ihfft(a) = conj(rfft(a)), the other direction
    s, axes, lengths, norm = _layout(fft.ihfft, a, args, kwargs)
    return _real_input_transpose(np.conj(g), s, axes, lengths, _OTHER_DIRECTION[norm])


for _fn in _FULL:
    register_vjp(_fn, _complex_vjp(_fn))
for _fn in _REAL_INPUT:
    register_vjp(_fn, _rfft_vjp(_fn))
for _fn in _REAL_OUTPUT:
    register_vjp(_fn, _irfft_vjp(_fn))
register_vjp(fft.hfft, _hfft_vjp)
register_vjp(fft.ihfft, _ihfft_vjp)


def _shift_vjp(other):
    return lambda g, r, x, axes=None: other(g, axes=_shift_axes(axes, np.ndim(x)))


def _shift_axes(axes, ndim):
    """fftshift's ``axes`` (None: every axis) as negative axes (rows ahead leave them)."""
    if axes is None:
        return tuple(range(-ndim, 0))
    return tuple(axis % ndim - ndim for axis in np.atleast_1d(axes))


register_vjp(fft.fftshift, _shift_vjp(fft.ifftshift))
register_vjp(fft.ifftshift, _shift_vjp(fft.fftshift))

def _jvp(fn):
    """The transform of the tangent, its axes negative (a tangent's leading axes of
    directions leave them as they are)."""
    n_dimensional = _FULL.get(fn) or (fft.rfftn if fn in _REAL_INPUT else fft.irfftn)

    def jvp(t, r, a, *args, **kwargs):
        s, axes, _, norm = _layout(fn, a, args, kwargs)
        if fn is fft.hfft or fn is fft.ihfft:
            return fn(t, s[0], axes[0], norm)
        return n_dimensional(t, s=s, axes=axes, norm=norm)
    return jvp


for _fn in (*_FULL, *_REAL_INPUT, *_REAL_OUTPUT, fft.hfft, fft.ihfft):
    register_jvp(_fn, _jvp(_fn), batched=True)
for _fn in (fft.fftshift, fft.ifftshift):
    register_jvp(_fn, lambda t, r, x, axes=None, _fn=_fn: _fn(
        t, axes=_shift_axes(axes, np.ndim(x))), batched=True)

TRANSFORMS = (*_FULL, *_REAL_INPUT, *_REAL_OUTPUT, fft.hfft, fft.ihfft, fft.fftshift,
              fft.ifftshift)
result_kinds(NEW_ARRAYS, *TRANSFORMS[:-2])
batched_vjps(*TRANSFORMS)
holds_for_complex(*TRANSFORMS)
