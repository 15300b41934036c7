"""Samplers: how a stochastic optimizer picks the next sequence (docs/algorithms.md §3.3, §4).

A sampler is a :class:`SamplerState` (a namedtuple of arrays, so compiled plugin loops
can take it as an argument) plus compiled functions that draw an index and take
feedback. Randomness never comes from a global generator: the Python handle
:class:`Sampler` pre-draws, from the run's own ``numpy.random.Generator``, two uniforms per
iteration (:meth:`Sampler.prepare`) and any permutations the block will need, so a block
of k iterations consumes exactly the same random numbers as k single steps.

Schemes (``kind``):

=============== ==================================================== =====================
kind            tree weight q_i                                        feedback
=============== ==================================================== =====================
``uniform``     —                                                      —
``permutation`` fresh random permutation every epoch (SSZ13 §6)        —
``cyclic``      one random order, repeated (SSZ13 §8.5)                —
``importance``  L_i = λ + R_i/n, static (LPL18 §5.1)                   —
``gap``         G_i, initially ``initial_gap`` (LPL18 §5)              G_i ← g_i (pre-step)
``gapimp``      G_i · L_i (LPL18 App. F Thm. 5)                        G_i ← g_i
``max``         argmax_i G_i, ties to the smallest index (Dünner 2017)  G_i ← g_i
``edelta``      A_i from a snapshot taken at each epoch start (VLZ15)  A_i ← (A_i + Δ_i)/2
``weighted``    w_i set by the optimizer (0 until set)                 w_i ← value
``nus``         w_i set by the optimizer, over seen examples only      w_i ← value, i seen
=============== ==================================================== =====================

Every non-uniform scheme mixes with uniform sampling: with probability
``1 - non_uniformity`` the draw is uniform, so p_i = (1-ρ)/n + ρ q_i / Σ_j q_j (REF
``SamplerWrap``). A tree whose total is 0 or not finite falls back to uniform.

SAG-NUS* (SBA15 §5) is ``weighted`` with ρ = 0.5 and q_i = L_i set at each visit: half
uniform over all n, half ∝ L_i over the examples seen so far (an unseen one has q_i = 0),
uniform until the first weight is set.

``nus`` is SAG-NUS's three-way mixture (SLRB13 §5.5; docs/algorithms.md §3.5, §4): with m of
the n examples seen (an example becomes seen when its weight is first set), the draw is
uniform over the n − m **unseen** examples with probability (n − m)/n; otherwise it is
uniform over the seen ones with probability 1 − ρ and ∝ q_i over them with probability ρ
(SAG-NUS: ρ = 0.5 and q_i = L_i + λ). So an unseen example has p_i = 1/n and a seen one
p_i = (m/n)((1 − ρ)/m + ρ q_i / Σ_seen q_j). It keeps two more sum trees (unseen and seen
indicators); one uniform picks the branch and is rescaled to choose inside it, the other
descends the chosen tree, so the draw consumes the same two uniforms as every scheme.

The sum tree (§4) is an array of length 2P (P the next power of two ≥ n), leaves at
P+i; an update recomputes each parent from its two children (never adding deltas,
which drift), sampling descends from the root in O(log n).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from crfopt.kernels.jit import jit

KINDS: tuple[str, ...] = (
    "uniform",
    "permutation",
    "cyclic",
    "importance",
    "gap",
    "gapimp",
    "max",
    "edelta",
    "weighted",
    "nus",
)
UNIFORM, PERMUTATION, CYCLIC, IMPORTANCE, GAP, GAPIMP, MAX, EDELTA, WEIGHTED, NUS = range(10)

# ints[] slots of the state
_IT = 0  # iterations drawn so far (epochs are n of them)
_CURSOR = 1  # position in the current order
_QPOS = 2  # next unused permutation of the queue
_QLEN = 3  # permutations in the queue
_IMMEDIATE = 4  # edelta: refresh the tree at every update instead of every epoch
_SEEN = 5  # nus: number of examples seen (weight set at least once)

SamplerState = namedtuple(
    "SamplerState",
    [
        "kind",  # int64 code (KINDS)
        "n",  # int64
        "rho",  # float64 non-uniformity
        "P",  # int64 number of leaves (power of two)
        "tree",  # float64 (2P,) sum tree (max tree for kind max)
        "values",  # float64 (n,) G_i, A_i or w_i
        "importance",  # float64 (n,) L_i (importance, gapimp) or ones
        "order",  # int64 (n,) current order (permutation, cyclic)
        "queue",  # int64 (Q, n) permutations for the coming epochs
        "ints",  # int64 (8,) counters, see the slots above
        "unseen",  # float64 (2P,) nus: sum tree of unseen indicators (else empty)
        "seen",  # float64 (2P,) nus: sum tree of seen indicators (else empty)
    ],
)


# ----------------------------------------------------------------------------- sum tree


def leaves_for(n: int) -> int:
    """P = the next power of two ≥ n."""
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


@jit
def tree_build(tree, P, q):
    """Fill the leaves with q (padding 0) and every parent with the sum of its children."""
    for j in range(2 * P):
        tree[j] = 0.0
    for i in range(q.shape[0]):
        tree[P + i] = q[i]
    for j in range(P - 1, 0, -1):
        tree[j] = tree[2 * j] + tree[2 * j + 1]


@jit
def tree_update(tree, P, i, q):
    """Set leaf i to q and recompute its ancestors from their children (no drift)."""
    j = P + i
    tree[j] = q
    j //= 2
    while j >= 1:
        tree[j] = tree[2 * j] + tree[2 * j + 1]
        j //= 2


@jit
def tree_sample(tree, P, uniform):
    """Leaf index drawn with probability ∝ its weight, from one ``uniform`` in [0, 1)."""
    x = uniform * tree[1]
    j = 1
    while j < P:
        left = 2 * j
        right = left + 1
        if x < tree[left]:
            j = left if tree[left] > 0.0 else right
        else:
            x -= tree[left]
            j = right if tree[right] > 0.0 else left
    return j - P


@jit
def maxtree_build(tree, P, q):
    """Max tree: parents hold the maximum of their children (padding -inf)."""
    for j in range(2 * P):
        tree[j] = -np.inf
    for i in range(q.shape[0]):
        tree[P + i] = q[i]
    for j in range(P - 1, 0, -1):
        tree[j] = max(tree[2 * j], tree[2 * j + 1])


@jit
def maxtree_update(tree, P, i, q):
    j = P + i
    tree[j] = q
    j //= 2
    while j >= 1:
        tree[j] = max(tree[2 * j], tree[2 * j + 1])
        j //= 2


@jit
def maxtree_argmax(tree, P):
    """Index of the largest leaf; ties go left (smallest index)."""
    j = 1
    while j < P:
        j = 2 * j if tree[2 * j] >= tree[2 * j + 1] else 2 * j + 1
    return j - P


# ----------------------------------------------------------------------------- drawing


@jit
def _uniform_index(n, uniform):
    i = int(uniform * n)
    return i if i < n else n - 1


@jit
def _epoch_start(st):
    """Called before the first draw of every epoch (including the first)."""
    if st.kind == PERMUTATION:
        q = st.ints[_QPOS]
        if q >= st.ints[_QLEN]:
            # Sampler.prepare() queues exactly the permutations a block needs.
            raise RuntimeError("sampler permutation queue exhausted: call prepare(k) first")
        for j in range(st.n):
            st.order[j] = st.queue[q, j]
        st.ints[_QPOS] = q + 1
        st.ints[_CURSOR] = 0
    elif st.kind == CYCLIC:
        st.ints[_CURSOR] = 0
    elif st.kind == EDELTA and st.ints[_IMMEDIATE] == 0:
        tree_build(st.tree, st.P, st.values)


@jit(inline=True)
def _draw_nus(st, coin, uniform):
    """SLRB13 §5.5: unseen w.p. (n − m)/n; else uniform over seen w.p. 1 − ρ, else ∝ q_i."""
    n = st.n
    a = (n - st.ints[_SEEN]) / n
    if coin < a:
        return tree_sample(st.unseen, st.P, uniform)
    r = (coin - a) / (1.0 - a)  # a fresh uniform, given coin ≥ a
    total = st.tree[1]
    if r < 1.0 - st.rho or not (total > 0.0) or not math.isfinite(total):
        return tree_sample(st.seen, st.P, uniform)
    return tree_sample(st.tree, st.P, uniform)


@jit
def sampler_draw(st, coin, uniform):
    """The next example index, from two uniforms in [0, 1): ``coin`` picks the mixture's
    component (gap/importance share ρ, NUS's unseen/seen split), ``uniform`` the index.
    (Named so because ``u`` is the scaled weights of w = s·u elsewhere.)"""
    n = st.n
    if st.ints[_IT] % n == 0:
        _epoch_start(st)
    st.ints[_IT] += 1
    kind = st.kind
    if kind == UNIFORM:
        return _uniform_index(n, uniform)
    if kind in (PERMUTATION, CYCLIC):
        c = st.ints[_CURSOR]
        st.ints[_CURSOR] = c + 1
        return st.order[c]
    if kind == NUS:
        return _draw_nus(st, coin, uniform)
    if coin >= st.rho:
        return _uniform_index(n, uniform)
    if kind == MAX:
        return maxtree_argmax(st.tree, st.P)
    total = st.tree[1]
    if not (total > 0.0) or not math.isfinite(total):
        return _uniform_index(n, uniform)
    return tree_sample(st.tree, st.P, uniform)


@jit
def sampler_feedback(st, i, gap, delta):
    """Report the visit of example i: its pre-step block gap and the size of the primal
    move Δ_i (used by ``edelta``). Negative gaps from rounding are clipped to 0."""
    kind = st.kind
    if kind in (GAP, GAPIMP, MAX):
        g = gap if gap > 0.0 else 0.0
        st.values[i] = g
        if kind == MAX:
            maxtree_update(st.tree, st.P, i, g)
        elif kind == GAP:
            tree_update(st.tree, st.P, i, g)
        else:
            tree_update(st.tree, st.P, i, g * st.importance[i])
    elif kind == EDELTA:
        a = 0.5 * st.values[i] + 0.5 * delta
        st.values[i] = a
        if st.ints[_IMMEDIATE] != 0:
            tree_update(st.tree, st.P, i, a)


@jit
def sampler_set_weight(st, i, weight):
    """``weighted`` / ``nus``: set q_i (e.g. a Lipschitz estimate of a visited example);
    ``nus`` also marks i seen (it leaves the unseen branch for the seen ones)."""
    if st.kind == NUS and st.unseen[st.P + i] != 0.0:
        tree_update(st.unseen, st.P, i, 0.0)
        tree_update(st.seen, st.P, i, 1.0)
        st.ints[_SEEN] += 1
    st.values[i] = weight
    tree_update(st.tree, st.P, i, weight)


@jit
def sampler_probability(st, i):
    """Current probability of drawing example i next (mixture included)."""
    n = st.n
    kind = st.kind
    if kind in (UNIFORM, PERMUTATION, CYCLIC):
        return 1.0 / n
    if kind == NUS:
        m = st.ints[_SEEN]
        if st.unseen[st.P + i] != 0.0:
            return 1.0 / n  # (n − m)/n · 1/(n − m)
        total = st.tree[1]
        rho = st.rho if total > 0.0 and math.isfinite(total) else 0.0
        q = st.tree[st.P + i] / total if rho > 0.0 else 0.0
        return (m / n) * ((1.0 - rho) / m + rho * q)
    base = (1.0 - st.rho) / n
    if kind == MAX:
        return base + (st.rho if maxtree_argmax(st.tree, st.P) == i else 0.0)
    total = st.tree[1]
    if not (total > 0.0) or not math.isfinite(total):
        return 1.0 / n
    return base + st.rho * st.tree[st.P + i] / total


# ----------------------------------------------------------------------------- handle


class Sampler:
    """A sampler for n examples, driven by the run's generator.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.
    n : int
        Number of examples.
    rng : numpy.random.Generator
        The run's generator (the optimizer's ``self.rng``).
    non_uniformity : float
        ρ, the weight of the non-uniform part (LPL18 §6.3: 0.8; VLZ15: 0.5).
    initial_gap : float
        Initial G_i of the gap-based kinds (LPL18 fn. 5: 100).
    importance : array, optional
        L_i for ``importance`` and ``gapimp``.
    refresh : {"epoch", "immediate"}
        ``edelta``: rebuild the tree from A at each epoch start, or at every update.

    Use :meth:`prepare` before a compiled block of k iterations and pass :attr:`state`
    and the returned uniforms to the loop; or call :meth:`sample` / :meth:`update` from
    Python.
    """

    def __init__(
        self,
        kind: str,
        n: int,
        rng: np.random.Generator,
        *,
        non_uniformity: float = 0.8,
        initial_gap: float = 100.0,
        importance: Sequence[float] | np.ndarray | None = None,
        refresh: str = "epoch",
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown sampler {kind!r}; choose one of {', '.join(KINDS)}")
        if not 0.0 <= non_uniformity <= 1.0:
            raise ValueError("non_uniformity must lie in [0, 1]")
        if refresh not in ("epoch", "immediate"):
            raise ValueError("refresh must be 'epoch' or 'immediate'")
        code = KINDS.index(kind)
        self.kind = kind
        self.n = int(n)
        self.rng = rng
        P = leaves_for(self.n)
        imp = np.ones(self.n) if importance is None else np.asarray(importance, dtype=float)
        if kind in ("importance", "gapimp"):
            if importance is None:
                raise ValueError(f"sampler {kind!r} needs importance weights L_i")
            if imp.shape != (self.n,) or np.any(imp < 0) or not np.all(np.isfinite(imp)):
                raise ValueError("importance weights must be n finite non-negative numbers")
        values = np.zeros(self.n)
        tree = np.zeros(2 * P)
        if kind in ("gap", "gapimp", "max"):
            values[:] = initial_gap
        if kind == "importance":
            tree_build(tree, P, imp)
        elif kind == "gap":
            tree_build(tree, P, values)
        elif kind == "gapimp":
            tree_build(tree, P, values * imp)
        elif kind == "max":
            maxtree_build(tree, P, values)
        ints = np.zeros(8, dtype=np.int64)
        ints[_IMMEDIATE] = 1 if refresh == "immediate" else 0
        unseen = np.zeros(0)
        seen = np.zeros(0)
        if kind == "nus":
            unseen = np.zeros(2 * P)
            tree_build(unseen, P, np.ones(self.n))
            seen = np.zeros(2 * P)
        order = np.arange(self.n, dtype=np.int64)
        if kind == "cyclic":
            order = rng.permutation(self.n).astype(np.int64)  # one order for the whole run
        self.state = SamplerState(
            kind=np.int64(code),
            n=np.int64(self.n),
            rho=float(non_uniformity),
            P=np.int64(P),
            tree=tree,
            values=values,
            importance=imp.copy(),
            order=order,
            queue=np.zeros((0, self.n), dtype=np.int64),
            ints=ints,
            unseen=unseen,
            seen=seen,
        )

    def prepare(self, k: int) -> np.ndarray:
        """Uniforms (k × 2) for the next k draws; queue the permutations they will need."""
        k = int(k)
        if self.kind == "permutation":
            st = self.state
            drawn = int(st.ints[_IT])
            # epoch starts among draws drawn .. drawn+k-1 (floor division handles drawn = 0)
            starts = (drawn + k - 1) // self.n - (drawn - 1) // self.n if k > 0 else 0
            unused = st.queue[int(st.ints[_QPOS]) : int(st.ints[_QLEN])]
            fresh = [self.rng.permutation(self.n).astype(np.int64) for _ in range(starts)]
            queue = np.vstack([unused, *fresh]) if fresh else unused.copy()
            ints = st.ints
            ints[_QPOS] = 0
            ints[_QLEN] = len(queue)
            self.state = st._replace(queue=np.ascontiguousarray(queue, dtype=np.int64))
            return np.zeros((k, 2))
        if self.kind == "cyclic":
            return np.zeros((k, 2))
        return self.rng.random((k, 2))

    def sample(self) -> int:
        """One draw from Python (uses the same stream as a compiled block)."""
        uniforms = self.prepare(1)
        return int(sampler_draw(self.state, uniforms[0, 0], uniforms[0, 1]))

    def update(self, i: int, gap: float = 0.0, delta: float = 0.0) -> None:
        """Feedback after visiting example i (see :func:`sampler_feedback`)."""
        sampler_feedback(self.state, int(i), float(gap), float(delta))

    def set_weight(self, i: int, weight: float) -> None:
        """``weighted`` / ``nus``: q_i ← weight (``nus``: i becomes seen)."""
        if self.kind not in ("weighted", "nus"):
            raise ValueError(f"sampler {self.kind!r} takes no weights (use 'weighted' or 'nus')")
        sampler_set_weight(self.state, int(i), float(weight))

    def probability(self, i: int) -> float:
        return float(sampler_probability(self.state, int(i)))

    def probabilities(self) -> np.ndarray:
        """All n current probabilities (for tests and diagnostics)."""
        return np.array([self.probability(i) for i in range(self.n)])

    @property
    def values(self) -> np.ndarray:
        """The per-example stored values (G_i, A_i or w_i)."""
        return self.state.values

    def __repr__(self) -> str:
        return f"Sampler({self.kind!r}, n={self.n}, non_uniformity={self.state.rho})"


def sampler_names() -> tuple[str, ...]:
    return KINDS


def describe(kind: str) -> dict[str, Any]:
    """One-line description of a scheme (for docs and ``crfopt list``)."""
    return {
        "uniform": "uniform with replacement",
        "permutation": "a fresh random permutation every epoch (SSZ13 §6)",
        "cyclic": "one random order repeated every epoch (SSZ13 §8.5)",
        "importance": "∝ L_i = λ + R_i/n, mixed with uniform (LPL18 §5.1)",
        "gap": "∝ stale block gaps G_i, mixed with uniform (LPL18 §5)",
        "gapimp": "∝ G_i L_i, mixed with uniform (LPL18 App. F)",
        "max": "argmax G_i, mixed with uniform (Dünner et al. 2017)",
        "edelta": "∝ empirical Δ_i from an epoch snapshot, mixed with uniform (VLZ15 Alg. 3)",
        "weighted": "∝ weights set by the optimizer, mixed with uniform (SAG-NUS*: ρ = 0.5)",
        "nus": "unseen first w.p. (n-m)/n, else seen: uniform or ∝ weights (SLRB13 §5.5)",
    }[kind]
