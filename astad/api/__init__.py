"""The public API: ``reverse_diff`` and the functions it attaches (diff.py), decorated
methods (methods.py), the transforms with JAX's names (transforms.py, jacobians.py), and
decorated functions in other processes (pickling.py)."""
from .diff import DiffFunction, Pullback, reverse_diff

__all__ = ["DiffFunction", "Pullback", "reverse_diff"]
