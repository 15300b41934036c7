"""numba options shared by every compiled kernel of this package."""

from __future__ import annotations

# NumPy's error model: a division by zero gives inf/NaN (which divergence checks catch)
# instead of a Python exception, and no per-division branch blocks vectorization.
NJIT = {"cache": True, "nogil": True, "error_model": "numpy"}
# Contraction and reassociation let LLVM fuse and vectorize the label loops; the flags
# that assume no NaN/inf are left out so divergence still shows up as NaN.
FAST = {**NJIT, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}
