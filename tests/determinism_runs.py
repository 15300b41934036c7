"""Weights after the first iterations of every registered optimizer (see test_determinism).

Run as a script (``python determinism_runs.py OUT.npz``) so the other kernel path can be
measured in a fresh process with ``CRFOPT_DISABLE_JIT`` set before crfopt is imported.
"""

from __future__ import annotations

import sys

import numpy as np

# L-BFGS amplifies rounding once its gradient is ~1e-8 (its line search then compares
# function values equal to 1e-16): its iterates are compared before that point.
ITERATIONS = {"lbfgs": 25}


def weights_after_first_iterations() -> dict[str, np.ndarray]:
    import crfopt
    from crfopt.runner import Budget, run

    reg = crfopt.get_registry()
    out: dict[str, np.ndarray] = {}
    for dense in (False, True):
        p = crfopt.make_synthetic(
            n=15, labels=3, attributes=12, length=5, dense=dense, density=0.4, seed=3
        )
        for name in sorted(reg.optimizers):
            its = ITERATIONS.get(name, 100)
            res = run(p, name, budget=Budget(iterations=its, passes=None), registry=reg)
            key = f"{name}/{'dense' if dense else 'sparse'}"
            out[key] = res.w
            out[key + "/iterations"] = np.array([res.trace["iterations"].iloc[-1]])
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **weights_after_first_iterations())
