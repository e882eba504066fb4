"""astad: exact derivatives of plain Python functions by source transformation.

    @astad.reverse_diff
    def f(x, y): ...

    f(1.0, 2.0)            # the original function
    f.grad(1.0, 2.0)       # its gradient (reverse mode)
    f.jvp((1.0, 2.0), (1.0, 0.0))   # a directional derivative (forward mode)
    print(f.source)        # the generated code

    astad.grad, astad.jvp, astad.jacfwd, astad.jacrev, astad.hessian, ...  # as in JAX
"""
from typing import TYPE_CHECKING

from .api import DiffFunction, Pullback, reverse_diff
from .data import tree as tree_util
from .data.tree import register_pytree_node, register_pytree_node_class
from .errors import (AstadError, CompileWarning, InputError, NotDifferentiableError,
                     SourceUnavailableError, UnsupportedSyntaxError)
from .rules.scalar import register_scalar
from .rules.array import register_elementwise, register_jvp, register_vjp
from .compile import calls as _calls  # noqa: F401  (installs ad.rev)
from .rules.custom import custom_jvp, custom_vjp, stop_gradient
from . import testing  # noqa: F401  (astad.testing.check_grads)
from .display import show
from .rules import array_forward as _forward_arrays  # noqa: F401  (forward mode on numpy)
from .rules import numpy_values as _numpy_values  # noqa: F401  (lists and floats to numpy)
if TYPE_CHECKING:  # the transforms typed by the function they transform (api/signatures.py)
    from .api.signatures import (grad, hessian, jacfwd, jacobian, jacrev, jvp, value_and_grad,
                                 vjp)
else:
    from .api.transforms import grad, jvp, value_and_grad, vjp
    from .api.jacobians import hessian, jacfwd, jacobian, jacrev
from .api.implicit import fixed_point
from .api import integrate as _integrate  # noqa: F401  (scipy.integrate.odeint's rules)
from .api import roots as _roots  # noqa: F401  (scipy.optimize's root finders' rules)
from .runtime.duals import StaleDualError

from .rules import catalogue as _catalogue

_catalogue.record_own_rules()  # (the rules registered by now are astad's own)

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "jacobian",
           "hessian", "StaleDualError", "reverse_diff", "DiffFunction", "Pullback",
           "register_scalar", "register_vjp", "register_elementwise", "register_jvp",
           "custom_vjp", "custom_jvp", "stop_gradient", "fixed_point", "AstadError",
           "CompileWarning",
           "InputError", "NotDifferentiableError", "SourceUnavailableError",
           "UnsupportedSyntaxError", "show", "testing", "tree_util", "register_pytree_node",
           "register_pytree_node_class", "__version__"]
