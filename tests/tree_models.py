"""A container registered with astad (astad.register_pytree_node), imported by worker
processes by name as a user's package would be (tests/test_tree.py).

Not a test module."""
import math

import astad


class Pair:
    """A plain class (not a dataclass) holding two values: astad walks it only because
    it is registered."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __eq__(self, other):
        return type(other) is Pair and (self.first, self.second) == (other.first,
                                                                      other.second)

    def __repr__(self):
        return f"Pair({self.first!r}, {self.second!r})"


astad.register_pytree_node(Pair, lambda p: ((p.first, p.second), "pair"),
                           lambda aux, children: Pair(*children))


@astad.reverse_diff
def energy(p):
    """A function of a registered container: x sin(y) + y^2."""
    return p.first * math.sin(p.second) + p.second * p.second


def energy_gradient(p):
    """The hand-derived gradient of ``energy``."""
    return Pair(math.sin(p.second), p.first * math.cos(p.second) + 2.0 * p.second)
