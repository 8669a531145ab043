"""The little of the ``cython`` module that the compiled core's sources use, for pure Python without Cython.

Those sources read ``import cython`` first and fall back to this module when
Cython is not installed (it is needed to build wattsched, not to run it).
Compiled, ``cython.compiled`` is a constant Cython folds (the branches for
pure Python are left out of the build) and ``cython.locals`` types a
function's locals; here, the first is False and the second changes nothing.
"""

from __future__ import annotations

compiled = False


def locals(**_types):  # the name the sources call it by
    """``@cython.locals(name=type, ...)``: no types as pure Python."""
    return lambda func: func
