"""astad: exact reverse-mode gradients of plain Python functions by source transformation.

    @astad.reverse_diff
    def f(x, y): ...

    f(1.0, 2.0)            # the original function
    f.grad(1.0, 2.0)       # its gradient
    print(f.source)        # the generated code
"""
from .api import DiffFunction, Pullback, reverse_diff
from .errors import (AstadError, InputError, NotDifferentiableError, SourceUnavailableError,
                     UnsupportedSyntaxError)
from .rules.scalar import register_scalar
from .rules.array import register_elementwise, register_jvp, register_vjp
from .runtime import calls as _calls  # noqa: F401  (installs ad.rev)
from .rules.custom import custom_vjp, stop_gradient
from . import testing  # noqa: F401  (astad.testing.check_grads)
from .display import show

__version__ = "0.1.0"

__all__ = ["reverse_diff", "DiffFunction", "Pullback", "register_scalar", "register_vjp",
           "register_elementwise", "register_jvp", "custom_vjp", "stop_gradient", "AstadError",
           "InputError", "NotDifferentiableError", "SourceUnavailableError",
           "UnsupportedSyntaxError", "show", "testing", "__version__"]
