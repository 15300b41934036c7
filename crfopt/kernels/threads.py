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
import os
from collections.abc import Iterator

from crfopt.kernels.jit import JIT_ENABLED

#: How long (in libgomp's spin iterations) an idle OpenMP thread of numba's pool spins
#: before it sleeps, unless the user chose (``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` set).
GOMP_SPINCOUNT = 10_000


def _bound_openmp_spinning() -> None:
    """Bound the busy-wait of numba's OpenMP threads (libgomp reads this when it loads).

    libgomp's default spins 300,000 iterations of a PAUSE instruction at every barrier
    (some 15 ms where PAUSE takes about 140 cycles, as on Skylake-X Xeons): when a busy
    machine's other processes hold a core, the thread waiting for a descheduled partner
    burns its time slice instead of handing it over. With other work on both cores (load 5), a
    value+gradient pass of 700 NER sentences took 24.0 ms on 2 threads against 6.1 ms
    on 1 (5,000 sentences: 76 against 53 ms); with 10,000 spins (about 0.5 ms, longer
    than the gap between a mini-batch method's back-to-back parallel steps, so those
    keep their threads awake) 9.3 against 7.2 ms (47.6 against 46.5 ms). Measured by
    ``benchmarks/threads_contention.py --openmp`` (reports/performance_notes.md).
    """
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(GOMP_SPINCOUNT)


_bound_openmp_spinning()

_controller = None


def _blas_controller():
    """threadpoolctl's controller of every BLAS library crfopt's code may call."""
    global _controller
    if _controller is None:
        # The controller limits the BLAS libraries loaded when it is made. The compiled
        # kernels call scipy's BLAS (numba binds np.dot to scipy.linalg.cython_blas), which
        # numba loads only when it first links such a kernel, inside this context: load it
        # first, or that library escapes the limit (with scipy.optimize no longer imported
        # by the registry, an OCR pass took 66 ms against 44 ms, its BLAS on 2 threads).
        # scipy.optimize's L-BFGS-B calls the same library.
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Every BLAS library on one thread inside the block (JIT or not).

    For vector algebra in an optimizer's loop (a quasi-Newton two-loop recursion, a line
    search): each call there is a few microseconds of work, and a 2-thread BLAS pays a
    thread wake-up per call and leaves its pool spinning on the core the next batch
    kernel wants. On the 2-core machine under load (load 5), a dot product of 10⁵
    entries took 15.8 ms (median) on 2 threads against 0.05 ms on 1; from 10⁶ entries on
    the two were within 15 % of each other either way, 2 threads ahead only from
    1.6·10⁷ entries (52.5 against 61.3 ms on average), where a pass over such a problem
    costs seconds (``benchmarks/threads_contention.py --blas``). So no size lets the
    threads back in.
    """
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def batch_threads() -> Iterator[None]:
    """Context for a parallel batch kernel: BLAS single-threaded (the JIT path only)."""
    if not JIT_ENABLED:
        yield
        return
    with one_blas_thread():
        yield
