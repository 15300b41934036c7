"""How tight is a per-example smoothness estimate? Rᵢ vs pieces.curvature_at vs λ_max.

For a sample of OCR sequences, at w = 0 and at w after 3 passes of sag-nus-star, print
Rᵢ / estimate and estimate / λ_max, where λ_max of ∇²ℓ_i(w) = Cov_ν F is computed by
Lanczos (scipy eigsh) on the same differenced Hessian-vector products, to 1e-8.

    CRFOPT_DATA=... python benchmarks/curvature_ocr.py [--sample 20] [--iterations 5]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

import crfopt
from crfopt import pieces


def true_lambda_max(problem, i: int, w: np.ndarray) -> float:
    """λ_max of the dense Hessian of ℓ_i at w from central differences of the full gradient."""
    eps = 1e-5

    def hv(v):
        v = np.ravel(v)
        s = eps / max(np.linalg.norm(v), 1e-300)
        gp = problem.oracle(i, w + s * v, gradient=True).gradient.to_dense(problem)
        gm = problem.oracle(i, w - s * v, gradient=True).gradient.to_dense(problem)
        return (gp - gm) / (2 * s)

    op = LinearOperator((problem.dim, problem.dim), matvec=hv, dtype=float)
    return float(eigsh(op, k=1, which="LA", tol=1e-8, return_eigenvectors=False)[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=5)
    args = ap.parse_args()
    problem = crfopt.load_problem("ocr")
    R = problem.radii()
    idx = np.random.default_rng(0).choice(problem.n, size=args.sample, replace=False)
    opt = crfopt.get_registry().optimizer("sag-nus-star").create(problem, 1, {})
    opt.run_block(3 * problem.n)
    for label, w in [("w = 0", problem.zeros()), ("w after 3 passes", np.array(opt.w))]:
        r_est, est_true = [], []
        for i in idx:
            est = pieces.curvature_at(problem, int(i), w, iterations=args.iterations)
            true = true_lambda_max(problem, int(i), w)
            r_est.append(R[i] / est)
            est_true.append(est / true)
        print(
            f"{label}: R_i/estimate median {np.median(r_est):.0f} (min {min(r_est):.0f}, "
            f"max {max(r_est):.0f}); estimate/λ_max median {np.median(est_true):.3f} "
            f"(min {min(est_true):.3f}, max {max(est_true):.3f}); {args.iterations} power steps"
        )


if __name__ == "__main__":
    main()
