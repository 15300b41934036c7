"""Stochastic gradient baselines: SG, averaged SG and AdaGrad (SBA15 §6; ALGORITHMS.md §3.10).

All start at w = 0, sample uniformly with replacement and make one counted oracle call
per iteration, and every iteration costs O(T a K + K²) on sparse data:

* ``sg``: w ← w - η_t (∇ℓ_i(w) + λ w) with η_t = η₀ / (1 + λ η₀ t) — Pegasos' 1/(λt) step
  asymptotically, with a tuned constant and no huge first steps; ``schedule="constant"``
  keeps η₀. The ℓ2 shrink is folded into a scalar: w = s·u.
* ``asg``: the same iterates and their uniform running average w̄ (reported as ``w``),
  accumulated lazily per attribute row from the running sum of the scales (exact; the
  sparse-data recursion in the spirit of Xu 2010).
* ``adagrad``: G_j += g_j², η_j = η/(ε + √G_j), proximal ℓ2 step
  w_j ← (w_j - η_j g_j)/(1 + λ η_j) with g = ∇ℓ_i (Duchi et al. 2011). Coordinates the
  example does not touch only shrink by 1/(1 + λ η_j) per iteration with a constant η_j,
  so m missed iterations are applied at once as (1 + λ η_j)^(-m) when the row is next
  read (exact).

The step constant is chosen post hoc from a grid (SBA15 lets the baselines "cheat"):
run ``crfopt compare --optimizers "sg[step_size=1],sg[step_size=0.1],sg[step_size=0.01]"``
and keep the best training objective.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

import crfopt
from crfopt import jit, kernels, samplers

VARIANTS = ("sg", "asg", "adagrad")
SG, ASG, ADAGRAD = range(3)

State = namedtuple(
    "State",
    [
        "u",  # (d,) w / s (sg, asg) or w itself (adagrad)
        "acc",  # (d,) Σ_k w_k (asg), Σ g² (adagrad)
        "last",  # (A_tot + 1,) asg: running scale sum at the last close; adagrad: iteration
        "scal",  # [s, C = Σ s_k, t]
    ],
)


@jit(inline=True)
def _asg_close(u, acc, last, base, n_entries, row, C):
    """acc_row += u_row · (C - C_last): the iterates since the row's last change."""
    delta = C - last[row]
    if delta != 0.0:
        for j in range(n_entries):
            acc[base + j] += u[base + j] * delta
        last[row] = C


@jit(inline=True)
def _ada_catch_up(u, G, last, base, n_entries, row, t, lam, eta, eps):
    """Apply the prox shrinks of the iterations since the row was last touched."""
    missed = t - last[row]
    if missed > 0.0:
        for j in range(n_entries):
            step = eta / (eps + math.sqrt(G[base + j]))
            u[base + j] *= math.exp(-missed * math.log1p(lam * step))
        last[row] = t


@jit
def _sg_block(
    data, counters, st, sst, u_rand, k_iters, variant, lam, eta0, constant, eps, max_support
):
    K = data.n_labels
    A_tot = data.n_attributes
    KK = K * K
    t_off = A_tot * K
    L = data.max_len
    u, acc, last, scal = st.u, st.acc, st.last, st.scal
    support = data.support
    y_all = data.y
    unary = np.empty((L, K))
    nodes = np.empty((L, K))
    esum = np.empty((K, K))
    truth = np.empty((K, K))
    trans = np.empty((K, K))
    g_loc = np.empty((max_support, K))
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, u_rand[it, 0], u_rand[it, 1])
        s0 = data.offsets[i]
        T = data.offsets[i + 1] - s0
        lo, hi = kernels.support_bounds(data, i)
        t = scal[2]
        s = scal[0]
        if variant == ADAGRAD:
            for j in range(hi - lo):
                a = support[lo + j]
                _ada_catch_up(u, acc, last, a * K, K, a, t, lam, eta0, eps)
            _ada_catch_up(u, acc, last, t_off, KK, A_tot, t, lam, eta0, eps)
        # scores of w = s·u (s = 1 for adagrad)
        kernels.unary_scores(data, i, u, unary)
        for tt in range(T):
            for k in range(K):
                unary[tt, k] *= s
        for k in range(K):
            for l in range(K):
                trans[k, l] = s * u[t_off + k * K + l]
        kernels.oracle_sums_scores(data, counters, i, unary[:T], trans, nodes, esum)
        # g = ∇ℓ_i(w) on the sequence's support
        for tt in range(T):
            nodes[tt, y_all[s0 + tt]] -= 1.0
        kernels.expected_emission(data, i, nodes, g_loc)
        kernels.truth_transitions(data, i, truth)
        if variant == ADAGRAD:
            for j in range(hi - lo):
                base = support[lo + j] * K
                for k in range(K):
                    g = g_loc[j, k]
                    acc[base + k] += g * g
                    step = eta0 / (eps + math.sqrt(acc[base + k]))
                    u[base + k] = (u[base + k] - step * g) / (1.0 + lam * step)
                last[support[lo + j]] = t + 1.0
            for k in range(K):
                for l in range(K):
                    j = t_off + k * K + l
                    g = esum[k, l] - truth[k, l]
                    acc[j] += g * g
                    step = eta0 / (eps + math.sqrt(acc[j]))
                    u[j] = (u[j] - step * g) / (1.0 + lam * step)
            last[A_tot] = t + 1.0
        else:
            eta = eta0 if constant else eta0 / (1.0 + lam * eta0 * t)
            C = scal[1]
            if variant == ASG:  # close the rows about to change with their old values
                for j in range(hi - lo):
                    a = support[lo + j]
                    _asg_close(u, acc, last, a * K, K, a, C)
                _asg_close(u, acc, last, t_off, KK, A_tot, C)
            s_new = s * (1.0 - eta * lam)
            coef = eta / s_new
            for j in range(hi - lo):
                base = support[lo + j] * K
                for k in range(K):
                    u[base + k] -= coef * g_loc[j, k]
            for k in range(K):
                for l in range(K):
                    u[t_off + k * K + l] -= coef * (esum[k, l] - truth[k, l])
            scal[0] = s_new
            scal[1] = C + s_new
            if s_new < 1e-100:
                # fold the scale into u; rows closed first so the average stays exact
                if variant == ASG:
                    for a in range(A_tot):
                        _asg_close(u, acc, last, a * K, K, a, scal[1])
                    _asg_close(u, acc, last, t_off, KK, A_tot, scal[1])
                for j in range(u.shape[0]):
                    u[j] *= s_new
                scal[0] = 1.0
                scal[1] = 0.0
                for a in range(last.shape[0]):
                    last[a] = 0.0
        scal[2] = t + 1.0
        counters[kernels.ITERATIONS] += 1
        counters[kernels.UPDATES] += 1
    return k_iters


@jit
def _current_w(st, variant, A_tot, K, lam, eta0, eps):
    u, acc, last, scal = st.u, st.acc, st.last, st.scal
    t = scal[2]
    t_off = A_tot * K
    if variant == ADAGRAD:
        for a in range(A_tot):
            _ada_catch_up(u, acc, last, a * K, K, a, t, lam, eta0, eps)
        _ada_catch_up(u, acc, last, t_off, K * K, A_tot, t, lam, eta0, eps)
        return u.copy()
    if variant == SG or t == 0.0:
        return scal[0] * u
    C = scal[1]
    for a in range(A_tot):
        _asg_close(u, acc, last, a * K, K, a, C)
    _asg_close(u, acc, last, t_off, K * K, A_tot, C)
    return acc / t


class SGFamily(crfopt.Optimizer):
    """SG, averaged SG and AdaGrad on the primal (SBA15 §6; ALGORITHMS.md §3.10)."""

    parameters = {
        "variant": crfopt.Param("sg", str, "sg, asg or adagrad (§3.10)", choices=VARIANTS),
        "step_size": crfopt.Param(
            0.1, float, "η₀, chosen post hoc from a grid {10^-k} (SBA15 §6)", low=0.0
        ),
        "schedule": crfopt.Param(
            "decaying",
            str,
            "sg/asg: η₀/(1 + λη₀t) (Pegasos-like) or constant",
            choices=("decaying", "constant"),
        ),
        "epsilon": crfopt.Param(1e-8, float, "AdaGrad's ε (§3.10 [choice])", low=0.0),
    }
    capabilities = frozenset({"stochastic"})

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        self._variant = VARIANTS.index(prm["variant"])
        if (
            prm["schedule"] == "constant"
            and prm["step_size"] * p.lam >= 1.0
            and self._variant != ADAGRAD
        ):
            raise crfopt.ParameterError(
                f"{prm['variant']}: a constant step_size must satisfy step_size·λ < 1 "
                f"(got {prm['step_size']} · {p.lam:.3g})"
            )
        self._state = State(
            u=np.zeros(p.dim),
            acc=np.zeros(p.dim),
            last=np.zeros(p.n_kernel_attributes + 1),
            scal=np.array([1.0, 0.0, 0.0]),
        )
        self._sampler = crfopt.Sampler("uniform", p.n, self.rng)
        kd = p.data
        self._max_support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())

    @property
    def w(self) -> np.ndarray:
        p = self.problem
        prm = self.params
        return _current_w(
            self._state,
            self._variant,
            p.n_kernel_attributes,
            p.n_labels,
            p.lam,
            prm["step_size"],
            prm["epsilon"],
        )

    def run_block(self, k: int) -> int:
        p = self.problem
        prm = self.params
        u = self._sampler.prepare(k)
        return _sg_block(
            p.data,
            p.counters.array,
            self._state,
            self._sampler.state,
            u,
            int(k),
            self._variant,
            p.lam,
            prm["step_size"],
            prm["schedule"] == "constant",
            prm["epsilon"],
            self._max_support,
        )

    def step(self) -> None:
        self.run_block(1)


_SUMMARY = {
    "sg": "stochastic gradient, step η₀/(1 + λη₀t) (Pegasos-like), uniform sampling",
    "asg": "averaged stochastic gradient: the running average of the SG iterates",
    "adagrad": "AdaGrad with a proximal ℓ2 step (Duchi et al. 2011)",
}


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            v,
            SGFamily,
            defaults={"variant": v},
            summary=_SUMMARY[v],
            reference="SBA15 §6; ALGORITHMS.md §3.10",
        )
        for v in VARIANTS
    ]
