"""Keep BLAS from fighting numba for the cores.

The full-batch kernels parallelize over chunks of sequences with numba, and each chunk
calls BLAS on its own row block (dense unary scores and emission gradient). Those calls
must run single-threaded: a multi-threaded BLAS inside the numba threads oversubscribes
the machine (measured on 2 cores: 104 ms per OCR-size pass with both pools at 2 threads,
49 ms with BLAS held to 1), and with numba on one thread a 2-thread BLAS woke its pool
for each of the 64 small products of a pass, 9x slower on the loaded 2-core machine.
The number of numba threads is therefore the whole parallelism of a batch kernel, and
batch evaluation always holds BLAS to one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from crfopt.kernels.jit import JIT_ENABLED

_controller = None


@contextlib.contextmanager
def batch_threads() -> Iterator[None]:
    """Context for a parallel batch kernel: BLAS single-threaded (the JIT path only)."""
    global _controller
    if not JIT_ENABLED:
        yield
        return
    if _controller is None:
        # The controller limits the BLAS libraries loaded when it is made. The compiled
        # kernels call scipy's BLAS (numba binds np.dot to scipy.linalg.cython_blas), which
        # numba loads only when it first links such a kernel, inside this context: load it
        # first, or that library escapes the limit (with scipy.optimize no longer imported
        # by the registry, an OCR pass took 66 ms against 44 ms, its BLAS on 2 threads).
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    with _controller.limit(limits=1, user_api="blas"):
        yield
