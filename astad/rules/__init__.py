"""The rules: every derivative astad knows, registered into the registry
(astad/registry.py), one topic per module. Importing this package loads them all.

- scalar.py: the scalar primitives (operators, ``math``), their formulas as text;
  scalar_general.py: every scalar rule's general form (any mix of levels and modes);
  polygamma.py: polygamma, for ``math.gamma``'s derivatives;
- array.py: how array rules are given (element-wise partials, vjps and jvps), the
  element-wise functions and what has no derivative; then one module per topic of
  numpy: reductions, linear algebra, gathers, moves, joins, statistics, more
  element-wise functions, shapes, building arrays, einsum, products, decompositions,
  writes into arrays; numpy_values.py: lists and numpy scalars meeting numpy;
  complex_values.py: which rules hold for complex values, and the rules of the functions
  that are not holomorphic (abs, real, imag, conj, angle, eig); fft.py: numpy.fft;
- custom.py: ``custom_vjp``, ``custom_jvp``, ``stop_gradient`` and astad's own rules
  given that way; scipy_special.py: scipy.special's, scipy_stats.py: scipy.stats'
  distributions', registered on first use (scipy_loader.py);
- numpy_floats.py: numpy's element-wise functions of floats as formulas, for the code
  specialised for floats;
- catalogue.py: what is registered, as docs/numpy.md lists it.
"""
from . import scalar  # noqa: F401
from . import array  # noqa: F401
from . import array_reductions  # noqa: F401  (before the modules using its helpers)
from . import array_linalg  # noqa: F401
from . import array_gather  # noqa: F401  (scatter-add, ufunc methods)
from . import array_moves  # noqa: F401
from . import array_joins  # noqa: F401
from . import array_statistics  # noqa: F401
from . import array_elementwise  # noqa: F401
from . import array_layouts  # noqa: F401
from . import array_building  # noqa: F401
from . import array_einsum  # noqa: F401
from . import array_products  # noqa: F401
from . import linalg_decompositions  # noqa: F401
from . import linalg_norms_lstsq  # noqa: F401
from . import array_views  # noqa: F401  (arrays sharing memory: numpy's answer)
from . import array_writes  # noqa: F401  (writes into arrays)
from . import array_write_calls  # noqa: F401  (numpy's functions writing, or making arrays)
from . import numpy_values  # noqa: F401  (lists and floats to numpy)
from . import complex_values  # noqa: F401  (after the rules it marks)
from . import fft  # noqa: F401
from . import custom  # noqa: F401
from . import numpy_floats  # noqa: F401  (after every rule of numpy's functions)
from . import scipy_loader  # noqa: F401  (scipy.special's, scipy.stats' rules, on first use)
from . import catalogue  # noqa: F401
