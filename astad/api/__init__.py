"""The public API: ``reverse_diff`` and the functions it attaches (diff.py), decorated
methods (api/methods.py), the transforms with JAX's names (api/transforms.py, api/jacobians.py), and
decorated functions in other processes (api/pickling.py)."""
from ..core.reverse_pass import Pullback
from .diff import DiffFunction
from .methods import reverse_diff

__all__ = ["DiffFunction", "Pullback", "reverse_diff"]
