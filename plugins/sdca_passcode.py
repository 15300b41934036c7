"""Asynchronous parallel SDCA, PASSCoDe-Wild (HYD15; docs/algorithms.md §3.16).

Each of ``threads`` threads owns a disjoint part of the sequences, with its own sampler
over that part, and runs SDCA iterations on it (LPL18 Alg. 1, the pieces of
``crfopt.dual`` exactly as ``plugins/sdca.py`` composes them) without waiting for the
others: it reads the one shared w as it finds it, stores its own μ_i (its rows are
its alone) and adds γv to the shared w with plain, unsynchronized adds. Two threads
that add to the same coordinate at the same instant can lose one of the two adds
(HYD15's "Wild" memory model), so w drifts from ŵ(μ) during a block.

Each thread therefore also adds γv to a private increment Δ_t; at the end of every
block (the runner's checkpoint) w is set back to w_start + Σ_t Δ_t on the rows that
moved, which is ŵ(μ) up to rounding, and ‖w‖² is brought up to date from the same rows.
Every state the runner evaluates is consistent, so its duality gap is the state's true
gap; within a block the threads work with the drifting w, as in HYD15.

The running totals (Σ gaps, Σ entropies, ‖w‖²) are per-thread partial sums merged after
the parallel loop, like the counters and the audit cell of the oracles (one private row
each), so no count and no sum is lost to a race. With one thread (``threads=1``, one
kernel thread, or fewer than 2·``min_partition`` sequences) the method is ``sdca-gap``
iterate for iterate: the same sampler draws, steps and weights.

References
----------
HYD15: Hsieh, Yu, Dhillon (2015), "PASSCoDe: Parallel ASynchronous Stochastic dual
Co-ordinate Descent", ICML.
LPL18: Le Priol, Piché, Lacoste-Julien (2018), "Adaptive stochastic dual coordinate
ascent for conditional random fields", UAI.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import JIT_ENABLED, borrowed, dual, jit, kernels, pieces, prange, samplers

blocks, search, prox, state = dual.blocks, dual.search, dual.prox, dual.state

# A thread's running totals are one row of a (threads × _ROW) array. 16 entries (128
# bytes) per row keep the cells that two threads write in different cache lines.
_ROW = 16
_GAP, _WSQ, _ENT = 0, 1, 2  # float cells: Σ_i G_i, ‖w‖², Σ_i H̃(μ_i) (partial sums)
_CAP, _ITS = 0, 1  # int cells: capped line searches, iterations

SAMPLERS = ("gap", "uniform", "importance", "gapimp")


class PasscodeOptions(NamedTuple):
    """Settings of the compiled loop, fixed for a run."""

    lam_n: float  # λn
    start: int  # a dual.search.Start
    sub_precision: float  # tolerance on γ of the Newton search
    max_line_search: int  # derivative evaluations before Newton gives up
    tolerance: float  # stop when ĝ = Σ G_i / n falls below it
    tau: float  # σ/λ (0: the ℓ2 arithmetic)


@jit(inline=True)
def _step_size(opts, counters, st, sc, i, T, K, g_i, r_i, a, seg, m):
    """γ by SDCA's safeguarded Newton search on the block objective (§3.2; its prox form,
    §3.14, when τ > 0), from ``opts.start``."""
    gamma, evals, capped = dual.search.newton_step(
        opts.start, st.last_step[i], opts.sub_precision, opts.max_line_search,
        g_i, r_i, a, opts.lam_n, sc, T, K, seg, m, opts.tau,
    )  # fmt: skip
    counters[kernels.LS_EVALS] += evals
    if capped:
        st.cap_hits[0] += 1
    return gamma


@jit
def _record(data, i, delta, gamma, E_loc, trans_loc, flags, rows, n_rows):
    """Δ_t += γv (the thread's private copy of its moves) and the support rows that Δ_t
    had not touched yet in this block appended to ``rows`` (their count in n_rows[0])."""
    kernels.add_local(data, i, delta, gamma, E_loc, trans_loc)
    lo, hi = kernels.support_bounds(data, i)
    support = data.support
    c = n_rows[0]
    for j in range(hi - lo):
        a = support[lo + j]
        if flags[a] == 0:
            flags[a] = 1
            rows[c] = a
            c += 1
    n_rows[0] = c


@jit(inline=True)
def _global_gap(cells):
    """Σ_t of the threads' partial gap sums: ĝ·n (another thread's cell read as it is)."""
    total = 0.0
    for t in range(cells.shape[0]):
        total += cells[t, _GAP]
    return total


@jit
def _thread_iterations(
    data,
    counters,
    st,
    sampler,
    members,
    uniforms,
    k,
    opts,
    sc,
    E_loc,
    trans_loc,
    seg,
    cells,
    delta,
    flags,
    rows,
    n_rows,
    threads,
):
    """k iterations of LPL18 Alg. 1 on the sequences ``members`` (this thread's part),
    drawn by ``sampler`` (local indices) from ``uniforms``; returns the number done.

    ``st`` is the shared state with this thread's own total cells; ``cells`` holds
    every thread's (the stopping test reads them all). With ``threads`` > 1 every move
    is also added to the private ``delta`` (:func:`_record`). With one thread this is
    ``plugins/sdca.py``'s block under its defaults, operation for operation.
    """
    data, counters, st, sampler, members, uniforms, sc, E_loc, trans_loc, seg = borrowed(
        (data, counters, st, sampler, members, uniforms, sc, E_loc, trans_loc, seg)
    )
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    tau = opts.tau
    done = 0
    for it in range(k):
        j = samplers.sampler_draw(sampler, uniforms[it, 0], uniforms[it, 1])
        i = members[j]
        T = data.offsets[i + 1] - data.offsets[i]
        # ν_i = ν_i(w) at the w this thread reads now, g_i = D̃(μ_i‖ν_i)
        g_i, r_i = blocks.block_gaps(data, counters, st.mu_n, st.mu_e, st.w, sc, i, T, K)
        a, b = blocks.block_direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_loc)
        m = 0
        if tau > 0.0:
            m = prox.pack_segment(data, i, st.u, tau, E_loc, trans_loc, seg)
        gamma = _step_size(opts, counters, st, sc, i, T, K, g_i, r_i, a, seg, m)
        st.last_step[i] = gamma
        # μ_i ← μ_i + γδ (this thread's rows), w += γv (shared: plain adds, HYD15 Wild)
        state.commit(data, st, sc, i, T, K, gamma, a, b, E_loc, trans_loc, tau)
        if threads > 1 and gamma != 0.0:
            _record(data, i, delta, gamma, E_loc, trans_loc, flags, rows, n_rows)
        st.gap_sum[0] += g_i - st.gaps[i]
        st.gaps[i] = g_i
        samplers.sampler_feedback(sampler, j, g_i, gamma * math.sqrt(a))
        counters[kernels.UPDATES] += 1
        st.iterations[0] += 1
        done += 1
        if _global_gap(cells) / n < opts.tolerance:
            break
    return done


@jit(parallel=True)
def _threads_block(
    thread_data,
    thread_counts,
    states,
    thread_samplers,
    members,
    uniforms,
    ks,
    opts,
    scratches,
    E_locs,
    trans_locs,
    segs,
    cells,
    deltas,
    flags,
    rows,
    n_rows,
    done,
):
    """Every thread's :func:`_thread_iterations` at once, with no barrier until the end.

    Thread t works on ``thread_data[t]`` (the problem's arrays with a private audit
    cell), counts into ``thread_counts[t]`` and sums into ``cells[t]``; the caller
    merges them after the loop (the NumPy path runs the threads one after the other).
    """
    threads = ks.shape[0]
    for t in prange(threads):
        q = np.int64(t)
        done[t] = _thread_iterations(
            thread_data[q],
            thread_counts[t],
            states[q],
            thread_samplers[q],
            members[t],
            uniforms[t],
            ks[t],
            opts,
            scratches[q],
            E_locs[t],
            trans_locs[t],
            segs[t],
            cells,
            deltas[t],
            flags[t],
            rows[t],
            n_rows[t],
            threads,
        )


@jit(inline=True)
def _exact_row(x, tau):
    """The coordinate of w that the exact u-coordinate x gives (x itself at τ = 0)."""
    return pieces.soft_threshold(x, tau) if tau > 0.0 else x


@jit
def _resync_row(u_exact, u, w, deltas, base, K, tau, sums):
    """Entries base … base+K−1 of w back to their exact value: u_exact += Σ_t Δ_t there
    (Δ_t zeroed), the shared u (and w = S_τ(u) when τ > 0) overwritten. Adds to ``sums``
    the row's change of ‖w‖², its ‖u_racy − u_exact‖² and its ‖Σ_t Δ_t‖²."""
    for k in range(base, base + K):
        old = _exact_row(u_exact[k], tau)
        add = 0.0
        for t in range(deltas.shape[0]):
            add += deltas[t, k]
            deltas[t, k] = 0.0
        exact = u_exact[k] + add
        drift = u[k] - exact
        u_exact[k] = exact
        u[k] = exact
        new = _exact_row(exact, tau)
        if tau > 0.0:
            w[k] = new
        sums[0] += (new - old) * (new + old)
        sums[1] += drift * drift
        sums[2] += add * add


@jit
def _resync(data, w_sq, u_exact, u, w, deltas, flags, rows, n_rows, tau, sums):
    """w = ŵ(μ) again after a parallel block (up to rounding): on every row some thread
    moved and on the transition block, u_exact += Σ_t Δ_t and the shared u, w are
    overwritten with it (the adds lost to races are restored); ‖w‖² is updated by the
    exact change of those rows. ``sums`` receives (that change, ‖u_racy − u_exact‖²,
    ‖Σ_t Δ_t‖²): HYD15's ε of the block and the size of the block's move."""
    K = data.n_labels
    A = data.n_kernel_attributes
    threads = deltas.shape[0]
    sums[:] = 0.0
    for t in range(threads):
        for c in range(n_rows[t, 0]):
            r = rows[t, c]
            if flags[t, r] == 0:  # merged already, from an earlier thread's list
                continue
            _resync_row(u_exact, u, w, deltas, r * K, K, tau, sums)
            for s in range(threads):
                flags[s, r] = 0
        n_rows[t, 0] = 0
    for r in range(K):  # the transition block, K rows of K
        _resync_row(u_exact, u, w, deltas, A * K + r * K, K, tau, sums)
    w_sq[0] += sums[0]


def partition(lengths: np.ndarray, parts: int) -> list[np.ndarray]:
    """Sequences dealt to ``parts`` threads by decreasing length, back and forth (0, 1, …,
    p−1, p−1, …, 0, …): part sizes differ by at most one and their token counts nearly
    balance. Each part is sorted (a thread's local index order follows the problem's)."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    pos = np.arange(len(order)) % (2 * parts)
    owner = np.where(pos < parts, pos, 2 * parts - 1 - pos)
    return [np.sort(order[owner == t]).astype(np.int64) for t in range(parts)]


def default_threads() -> int:
    """numba's thread count in this thread: the machine's cores unless NUMBA_NUM_THREADS,
    ``numba.set_num_threads`` or ``crfopt compare --threads`` chose otherwise (1 when the
    JIT is off)."""
    if not JIT_ENABLED:
        return 1
    import numba

    return int(numba.get_num_threads())


class SDCAPasscode(crfopt.Optimizer):
    """PASSCoDe-Wild: SDCA on ``threads`` threads, each on its own part of the sequences,
    sharing w without a barrier per step; w = ŵ(μ) restored at every block end (§3.16).

    Parameters (all overridable)
    ----------------------------
    threads : the parts and threads (default: numba's thread count, the machine's cores).
    min_partition : fewest sequences per thread; a problem with fewer than 2× this many
        runs on one thread, where the method is ``sdca-gap`` iterate for iterate.
    sampler, non_uniformity : each thread's sampler over its part (§3.3).
    The shared dual parameters (``dual.state.PARAMETERS``), Newton line search.
    """

    parameters = {
        "threads": crfopt.Param(
            None,
            int,
            "threads, each with its own part of the sequences "
            "(unset: numba's thread count, the machine's cores)",
            allow_none=True,
            low=1,
        ),
        "min_partition": crfopt.Param(
            64, int, "fewest sequences per thread (fewer: fewer threads, at least one)", low=1
        ),
        "sampler": crfopt.Param(
            "gap", str, f"each thread's sampler (§3.3): {', '.join(SAMPLERS)}", choices=SAMPLERS
        ),
        "non_uniformity": crfopt.Param(
            0.8, float, "ρ, weight of the non-uniform sampler part (LPL18 §6.3)", low=0.0, high=1.0
        ),
        **state.PARAMETERS,
    }
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    cost = crfopt.Cost(init_passes=1.0)  # the gibbs μ⁰, as SDCA
    regularizers = ("l2", "l1")  # prox-SDCA's blocks at σ > 0 (§3.14), as in plugins/sdca.py

    @classmethod
    def threads_for(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """The threads a run uses: ``threads`` (or :func:`default_threads`), at most one per
        ``min_partition`` sequences, at least one."""
        wanted = params["threads"] or default_threads()
        return max(1, min(int(wanted), problem.n // int(params["min_partition"])))

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """The dual state, each thread's block tables and, with several threads, the
        exact copy of u and one private increment Δ_t of w per thread."""
        threads = cls.threads_for(problem, params)
        extra = 0 if threads == 1 else 8 * (threads + 1) * problem.dim
        return state.state_memory(problem, params, lanes=threads) + extra

    @classmethod
    def decline(
        cls, problem: crfopt.CRFProblem, params: Mapping[str, Any], limits: Any
    ) -> str | None:
        """Decline when the state (:meth:`state_memory`) exceeds the memory limit."""
        hint = "" if params["dtype"] == "float32" else "dtype=float32 halves the dual"
        return limits.decline_memory(cls.state_memory(problem, params), hint)

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        kd = p.data
        self._mu, self._state = state.initial_state(p, prm)
        self._opts = PasscodeOptions(
            lam_n=p.lam * p.n,
            start=search.Start[prm["start"].upper()],
            sub_precision=prm["sub_precision"],
            max_line_search=prm["max_line_search"],
            tolerance=prm["tolerance"],
            tau=state.threshold_of(p),
        )
        T = self.threads_for(p, prm)
        self._threads = T
        parts = [np.arange(p.n, dtype=np.int64)] if T == 1 else partition(np.diff(kd.offsets), T)
        self._members = np.zeros((T, max(len(q) for q in parts)), dtype=np.int64)
        for t, part in enumerate(parts):
            self._members[t, : len(part)] = part
        self._samplers = self._make_samplers(parts)
        self._cursor = 0  # the thread that gets a block's first leftover iteration
        K, L, S = p.n_labels, int(kd.max_len), pieces.max_support(kd)
        self._E_locs = np.zeros((T, S, K))
        self._trans_locs = np.zeros((T, K, K))
        self._segs = np.zeros((T, 3, S * K + K * K if self._opts.tau > 0.0 else 0))
        scratches = [blocks.make_scratch(L, K) for _ in range(T)]
        self._cells = np.zeros((T, _ROW))
        self._int_cells = np.zeros((T, _ROW), dtype=np.int64)
        self._done = np.zeros(T, dtype=np.int64)
        self._sums = np.zeros(3)  # the last block's (‖w‖² change, ε², ‖Σ Δ‖²)
        rows = int(kd.n_kernel_attributes) if T > 1 else 0  # one thread: no increments
        self._deltas = np.zeros((T, p.dim if T > 1 else 0))
        self._flags = np.zeros((T, rows), dtype=np.uint8)
        self._rows = np.zeros((T, rows), dtype=np.int64)
        self._n_rows = np.zeros((T, _ROW), dtype=np.int64)
        if T == 1:  # sdca's own arrays, no copies
            self._scratch = scratches[0]
        else:
            self._u_exact = self._state.u.copy()
            self._thread_arrays(scratches)

    def _make_samplers(self, parts: list[np.ndarray]) -> list[crfopt.Sampler]:
        """One sampler per part, over its local indices 0 … len(part) − 1 (§3.3)."""
        p = self.problem
        prm = self.params
        importance = None
        if prm["sampler"] in ("importance", "gapimp"):
            importance = p.lam + p.radii() / p.n  # L_i = λ + R_i/n (§1.7)
        return [
            crfopt.Sampler(
                prm["sampler"],
                len(part),
                self.rng,
                non_uniformity=prm["non_uniformity"],
                initial_gap=prm["initial_gap"],
                importance=None if importance is None else importance[part],
            )
            for part in parts
        ]

    def _thread_arrays(self, scratches: list[Any]) -> None:
        """What each thread of a parallel block gets for itself: the state with its own
        total cells, the problem's arrays with its own audit cell, a counter row."""
        T = self._threads
        st = self._state
        kd = self.problem.data
        thread_states = [
            st._replace(
                gap_sum=self._cells[t, _GAP : _GAP + 1],
                w_sq=self._cells[t, _WSQ : _WSQ + 1],
                entropy_sum=self._cells[t, _ENT : _ENT + 1],
                cap_hits=self._int_cells[t, _CAP : _CAP + 1],
                iterations=self._int_cells[t, _ITS : _ITS + 1],
            )
            for t in range(T)
        ]
        self._thread_counts = np.zeros((T, _ROW), dtype=np.int64)
        thread_data = [kd._replace(audit=np.zeros(1, np.int64)) for _ in range(T)]
        sampler_states = [s.state for s in self._samplers]
        if JIT_ENABLED:
            from numba.typed import List

            # Private audit cells: concurrent `audit[0] += 1` on one cell can lose counts.
            self._thread_data = List(thread_data)
            self._thread_states = List(thread_states)
            self._thread_samplers = List(sampler_states)
            self._scratches = List(scratches)
        else:
            self._thread_data = thread_data
            self._thread_states = thread_states
            self._thread_samplers = sampler_states
            self._scratches = scratches

    @property
    def threads(self) -> int:
        """The threads this run uses (:meth:`threads_for`)."""
        return self._threads

    @property
    def drift(self) -> tuple[float, float]:
        """(‖ε‖, ‖Σ_t Δ_t‖) of the last parallel block: how far the shared, racily updated
        u was from the exact one when the block ended (HYD15's ε), against the size of
        the block's move. (0, 0) on one thread."""
        return math.sqrt(self._sums[1]), math.sqrt(self._sums[2])

    @property
    def w(self) -> np.ndarray:
        return self._state.w

    def _shares(self, k: int) -> np.ndarray:
        """Each thread's iterations of a block of k: k // T each, the k mod T others dealt
        from a cursor that moves on, so single steps visit every thread in turn."""
        T = self._threads
        ks = np.full(T, k // T, dtype=np.int64)
        for j in range(k % T):
            ks[(self._cursor + j) % T] += 1
        self._cursor = (self._cursor + k % T) % T
        return ks

    def run_block(self, k: int) -> int:
        st = self._state
        hits = int(st.cap_hits[0])
        if self._threads == 1:
            done = self._serial_block(int(k))
        else:
            done = self._parallel_block(int(k))
        if done < k:
            self.converged = True
        state.warn_cap_hits("SDCA", st, hits, self._opts.max_line_search)
        return done

    def _serial_block(self, k: int) -> int:
        p = self.problem
        st = self._state
        uniforms = self._samplers[0].prepare(k)
        return _thread_iterations(
            p.data,
            p.counters.array,
            st,
            self._samplers[0].state,
            self._members[0],
            uniforms,
            k,
            self._opts,
            self._scratch,
            self._E_locs[0],
            self._trans_locs[0],
            self._segs[0],
            st.gap_sum.reshape((1, 1)),
            self._deltas[0],
            self._flags[0],
            self._rows[0],
            self._n_rows[0],
            1,
        )

    def _parallel_block(self, k: int) -> int:
        p = self.problem
        st = self._state
        T = self._threads
        ks = self._shares(k)
        uniforms = np.zeros((T, max(int(ks.max()), 1), 2))
        for t, s in enumerate(self._samplers):
            uniforms[t, : ks[t]] = s.prepare(int(ks[t]))
        cells, ints = self._cells, self._int_cells
        cells[:] = 0.0
        ints[:] = 0
        cells[0, _GAP] = st.gap_sum[0]  # thread 0 carries the totals, the others' changes
        cells[0, _ENT] = st.entropy_sum[0]
        _threads_block(
            self._thread_data,
            self._thread_counts,
            self._thread_states,
            self._thread_samplers,
            self._members,
            uniforms,
            ks,
            self._opts,
            self._scratches,
            self._E_locs,
            self._trans_locs,
            self._segs,
            cells,
            self._deltas,
            self._flags,
            self._rows,
            self._n_rows,
            self._done,
        )
        counters = p.counters.array
        n_counters = len(counters)
        for t in range(T):
            counters += self._thread_counts[t, :n_counters]
            self._thread_counts[t] = 0
            p.data.audit[0] += self._thread_data[t].audit[0]
            self._thread_data[t].audit[0] = 0
        st.gap_sum[0] = sum(float(cells[t, _GAP]) for t in range(T))
        st.entropy_sum[0] = sum(float(cells[t, _ENT]) for t in range(T))
        st.cap_hits[0] += int(ints[:, _CAP].sum())
        st.iterations[0] += int(ints[:, _ITS].sum())
        _resync(
            p.data,
            st.w_sq,
            self._u_exact,
            st.u,
            st.w,
            self._deltas,
            self._flags,
            self._rows,
            self._n_rows,
            self._opts.tau,
            self._sums,
        )
        return int(self._done.sum())

    def dual_state(self) -> crfopt.DualMarginals:
        return self._mu

    def gap_estimate(self) -> float:
        return state.gap_estimate(self.problem, self._state)

    def dual_value(self) -> float:
        return state.dual_value(self.problem, self._state)


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "sdca-passcode-wild",
            SDCAPasscode,
            defaults={},
            summary="asynchronous parallel SDCA (PASSCoDe-Wild), gap sampling per thread",
            reference="HYD15 (PASSCoDe-Wild); LPL18 Alg. 1; docs/algorithms.md §3.16",
        )
    ]
