"""einsum in every form numpy accepts, and the products written as einsums (tensordot,
dot above 2-d, kron, vdot: array_products.py).

Subscripts are first normalised to explicit letters: ``...`` becomes letters of its own
(right-aligned, as numpy broadcasts it), an implicit output is written out (the letters
used once, in alphabetical order), the sublist form becomes a string. The cotangent of
operand k is then an einsum of the result's cotangent with the other operands
(``einsum_partial``): a letter repeated within operand k (a diagonal, ``'ii->i'``) is put
back with an identity matrix, a letter only operand k sums over is broadcast back, and
a size-1 axis numpy broadcast is summed. The tangent of the result is the einsum with
operand k replaced by its tangent. Both accept leading (direction) axes, as ``...``.
"""
from __future__ import annotations

import functools
import string

import numpy as np

from ..errors import NotDifferentiableError, user_location

LETTERS = string.ascii_letters  # numpy's sublist numbers index this alphabet


def from_sublists(args):
    """einsum(op0, sub0, op1, sub1, ..., [sub_out]) as (subscripts, operands)."""
    args = list(args)
    output = args.pop() if len(args) % 2 else None
    operands, subs = args[0::2], args[1::2]

    def text(sublist):
        return "".join("..." if s is Ellipsis else LETTERS[int(s)] for s in sublist)
    subscripts = ",".join(text(s) for s in subs)
    if output is not None:
        subscripts += "->" + text(output)
    return subscripts, operands


def split_arguments(args):
    """(subscripts, operands, the argument position of each operand) of einsum's args."""
    if isinstance(args[0], str):
        return args[0], list(args[1:]), list(range(1, len(args)))
    subscripts, operands = from_sublists(args)
    return subscripts, operands, list(range(0, 2 * len(operands), 2))


def normalize(subscripts: str, shapes) -> tuple:
    """Explicit subscripts (inputs, output) with no ``...`` for operands of ``shapes``."""
    return _normalize(subscripts, tuple(tuple(shape) for shape in shapes))


@functools.lru_cache(maxsize=512)
def _normalize(subscripts: str, shapes: tuple) -> tuple:
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs_text, output = subscripts.split("->")
    else:
        inputs_text, output = subscripts, None
    inputs = inputs_text.split(",")
    if len(inputs) != len(shapes):
        raise NotDifferentiableError("einsum: the subscripts do not match the operands",
                                     *user_location())
    used = set(subscripts) - set(".,->")
    if output is None:  # implicit: the letters used once, alphabetically; '...' first
        counts = {c: inputs_text.count(c) for c in used}
        output = ("..." if "..." in inputs_text else "") + "".join(
            sorted(c for c, n in counts.items() if n == 1))
    spare = iter(c for c in LETTERS if c not in used)
    widths = [len(shape) - (len(s) - 3) for s, shape in zip(inputs, shapes) if "..." in s]
    ellipsis = "".join(next(spare) for _ in range(max(widths, default=0)))
    explicit = []
    for s, shape in zip(inputs, shapes):
        if "..." in s:
            width = len(shape) - (len(s) - 3)
            s = s.replace("...", ellipsis[len(ellipsis) - width:] if width else "")
        explicit.append(s)
    return tuple(explicit), output.replace("...", ellipsis)


def _sizes(inputs, shapes) -> dict:
    sizes = {}
    for s, shape in zip(inputs, shapes):
        for c, n in zip(s, shape):
            sizes[c] = max(sizes.get(c, 1), n)
    return sizes


def einsum_partial(k, g, inputs, output, operands):
    """The cotangent of operand ``k`` of ``einsum(inputs -> output, *operands)`` given the
    result's cotangent ``g`` (which may have leading axes)."""
    shapes = tuple(tuple(np.shape(op)) for op in operands)
    spec, eyes, n_kept, kept_shape, full_shape, summed = _partial_plan(k, tuple(inputs),
                                                                        output, shapes)
    parts = [op for j, op in enumerate(operands) if j != k] + [np.eye(n) for n in eyes]
    partial = np.einsum(spec, g, *parts, optimize=len(parts) > 1)
    if full_shape is not None:  # a letter only this operand sums over: broadcast back
        lead = np.shape(partial)[:np.ndim(partial) - n_kept]
        partial = np.broadcast_to(np.reshape(partial, lead + kept_shape), lead + full_shape)
    if summed:  # numpy broadcast a size-1 axis of this operand
        partial = np.sum(partial, axis=summed, keepdims=True)
    return partial


@functools.lru_cache(maxsize=512)
def _partial_plan(k, inputs, output, shapes):
    """How einsum_partial computes operand k's cotangent: (the einsum's subscripts, the
    sizes of the identity matrices that put a repeated letter's diagonal back, the number
    of letters the einsum keeps, the shape with 1 for each letter summed inside operand k
    alone and the shape to broadcast that to (None: none such), the size-1 axes of
    operand k numpy broadcast)."""
    sizes = _sizes(inputs, shapes)
    target = inputs[k]
    used = set("".join(inputs) + output)
    spare = iter(c for c in LETTERS if c not in used)
    letters, eyes, seen = [], [], set()
    for c in target:
        if c in seen:  # a diagonal: the cotangent lies on it
            fresh = next(spare)
            letters.append(fresh)
            eyes.append(c + fresh)
            sizes[fresh] = sizes[c]
        else:
            seen.add(c)
            letters.append(c)
    others = [s for j, s in enumerate(inputs) if j != k] + eyes
    available = set(output).union(*[set(s) for s in others])
    kept = "".join(c for c in letters if c in available)
    spec = ",".join(["..." + output] + others) + "->..." + kept
    full = tuple(sizes[c] for c in letters)
    broadcast = None if len(kept) == len(letters) else (
        tuple(sizes[c] if c in kept else 1 for c in letters), full)
    summed = tuple(a - len(full) for a, n in enumerate(shapes[k]) if n == 1 and full[a] != 1)
    return (spec, tuple(sizes[e[0]] for e in eyes), len(kept), *(broadcast or (None, None)),
            summed)


def einsum_tangent(k, t, inputs, output, operands):
    """The result's tangent caused by tangent ``t`` (with any leading axes) of operand k."""
    spec = ",".join(("..." + s) if j == k else s for j, s in enumerate(inputs)) + "->..." + \
        output
    parts = [t if j == k else op for j, op in enumerate(operands)]
    return np.einsum(spec, *parts, optimize=len(parts) > 2)


class _PerArgument:
    """einsum's vjps (jvps), one per argument position: an operand's, or None for the
    subscripts. einsum takes any number of operands, so the sequence is long."""

    def __init__(self, tangent: bool):
        self.tangent = tangent

    def __len__(self):
        return 128

    def __getitem__(self, position):
        if not 0 <= position < len(self):
            raise IndexError(position)
        tangent = self.tangent

        def derivative(g, r, *args, **kwargs):
            subscripts, operands, positions = split_arguments(args)
            if position not in positions:
                raise NotDifferentiableError("einsum's subscripts are not differentiable",
                                             *user_location())
            inputs, output = normalize(subscripts, [np.shape(op) for op in operands])
            k = positions.index(position)
            if tangent:
                return einsum_tangent(k, g, inputs, output, operands)
            return einsum_partial(k, g, inputs, output, operands)
        derivative.__name__ = f"einsum_{'jvp' if tangent else 'vjp'}_{position}"
        return derivative


EINSUM_VJPS = tuple(_PerArgument(False))
EINSUM_JVPS = tuple(_PerArgument(True))
