"""Keep BLAS from fighting numba for the cores.

The full-batch kernels parallelize over sequences with numba; a multi-threaded BLAS call
inside them oversubscribes the machine (measured on 2 cores: 104 ms per OCR-size pass
with both pools at 2 threads, 49 ms with BLAS held to 1). While numba runs more than one
thread, batch evaluation therefore limits BLAS to one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from crfopt.kernels.jit import JIT_ENABLED

_controller = None


@contextlib.contextmanager
def batch_threads() -> Iterator[None]:
    """Context for a parallel batch kernel: BLAS single-threaded if numba is parallel."""
    global _controller
    if not JIT_ENABLED:
        yield
        return
    import numba

    if numba.get_num_threads() <= 1:
        yield
        return
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    with _controller.limit(limits=1, user_api="blas"):
        yield
