"""Compile every kernel a comparison runs, once, into numba's on-disk cache.

    crfopt compile                       # every registered optimizer, dense and sparse
    python -m crfopt.bench.warmup --optimizers sdca-gap,sag-nus,oeg --kinds dense

A fresh install has an empty numba cache: the first ``crfopt compare`` then spends about
100 CPU seconds compiling (measured on OCR, docs/architecture.md "Compiled kernels")
before and between its runs. This module does that work ahead of time, as one step of the
setup, so that the first comparison starts optimizing as a warm one does.

It runs each optimizer variant for half a pass on a tiny synthetic problem of each
*kind* (dense attributes like OCR, sparse like the text corpora), through
:func:`crfopt.bench.runner.run`: the same path as a real run (the runner's warm-up, the
optimizer's setup and blocks, the checkpoint evaluation, the metrics), so the compiled
specializations are the ones a real problem of that kind uses (array types do not depend
on the sizes). Today both kinds compile the same specializations (dense or sparse is a
run-time field of the kernel data), so the second kind only loads from the cache; it is
run anyway, so that a kernel that ever specializes on the kind stays covered. Nothing
here is timed or stored; a variant that fails is reported and the others still compile.

Run in one process on purpose: two processes compiling different specializations of one
function into the same cache can both number their entry 1 in its index (numba reads,
extends and rewrites the index without a lock), and a later process may then load one
specialization's machine code for the other's signature.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: Problem kinds and the tiny problems that stand for them (with a test split, so that
#: the test-error metric's Viterbi compiles too).
KINDS: dict[str, dict[str, Any]] = {
    "dense": {"dense": True},
    "sparse": {"dense": False},
}


def _tiny(kind: str) -> Any:
    from crfopt.core.synthetic import make_synthetic

    try:
        options = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown problem kind {kind!r}; choose from {', '.join(KINDS)}") from None
    return make_synthetic(
        n=8, labels=3, attributes=10, length=4.0, density=0.4, n_test=4, seed=0, **options
    )


def compile_kernels(
    optimizers: Sequence[str] | None = None,
    kinds: Sequence[str] = tuple(KINDS),
    *,
    registry: Any = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Run each optimizer variant briefly on a tiny problem of each kind, compiling (or
    loading from numba's cache) everything a real run of that kind executes.

    ``optimizers``: variant names (default: every one in ``registry``, a fresh registry
    when not given: built-ins and entry points). Returns the failures,
    ``{"kind · variant": error}``; an empty dict means every variant ran.
    """
    from crfopt.bench.runner import run
    from crfopt.kernels.jit import JIT_ENABLED
    from crfopt.optim.registry import get_registry

    if not JIT_ENABLED:
        return {}
    registry = get_registry() if registry is None else registry
    names = list(optimizers) if optimizers else sorted(registry.optimizers)
    for name in names:
        registry.optimizer(name)  # an unknown name fails here, listing the valid ones
    failures: dict[str, str] = {}
    for kind in kinds:
        problem = _tiny(kind)
        for name in names:
            label = f"{kind} · {name}"
            t0 = time.process_time()
            try:
                result = run(problem, name, passes=0.5, checkpoints="every:0.25", registry=registry)
                error = result.meta.get("error_summary")
            except Exception as exc:  # report and go on: one broken plugin must not stop it
                error = f"{type(exc).__name__}: {exc}"
            if error:
                failures[label] = str(error)
            if progress is not None:
                took = time.process_time() - t0
                progress(
                    f"{label}: {'failed: ' + str(error) if error else 'ok'} ({took:.1f} s CPU)"
                )
    label = "tagging"  # crfopt tag, CRF.predict / predict_marginals
    t0 = time.process_time()
    try:
        _compile_decoding()
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        failures[label] = error
    if progress is not None:
        took = time.process_time() - t0
        progress(f"{label}: {'failed: ' + error if error else 'ok'} ({took:.1f} s CPU)")
    return failures


def _compile_decoding() -> None:
    """The CSR decode kernels of a trained model (crfopt/kernels/_numba/decode.py) on the argument
    types crfopt.Model passes them, on the calling thread and on numba's."""
    import numpy as np

    from crfopt.kernels.arrays import merge_duplicates
    from crfopt.kernels.twin import impl

    rng = np.random.default_rng(0)
    K, A = 3, 10
    for n in (2, impl.PARALLEL_FROM // 4 + 1):  # sentences of 4 tokens: both paths
        offsets = np.arange(0, 4 * n + 1, 4, dtype=np.int64)
        counts = rng.integers(0, 4, size=4 * n)
        indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        indices = rng.integers(0, A, size=int(indptr[-1])).astype(np.int64)
        indptr, indices, values = merge_duplicates(indptr, indices, np.ones(len(indices)))
        emission = np.asfortranarray(rng.normal(size=(K, A))).T  # as Model.emission.T
        bias, transition = rng.normal(size=(K, 3)), rng.normal(size=(K, K))
        args = (offsets, indptr, indices, values, emission, bias, transition)
        impl.csr_viterbi(*args, np.empty(4 * n, dtype=np.int64))
        impl.csr_node_marginals(*args, np.empty((4 * n, K)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--optimizers", default=None, help="comma-separated variants (default: every registered)"
    )
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"comma-separated problem kinds among {', '.join(KINDS)} (default: all)",
    )
    args = parser.parse_args(argv)
    names = args.optimizers.split(",") if args.optimizers else None
    failures = compile_kernels(
        names, args.kinds.split(","), progress=lambda m: print(m, file=sys.stderr, flush=True)
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
