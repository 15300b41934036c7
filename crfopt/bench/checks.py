"""The conformance checks: one function per promise an optimizer plugin keeps.

Each takes a :class:`~crfopt.bench.check_subject.Subject` and raises a
:class:`~crfopt.bench.check_subject.ConformanceError` naming the broken promise.
:func:`checks_for` picks those that apply to a variant, by its declared capabilities and
regularizers; crfopt/bench/conformance.py runs them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np

from crfopt.bench.check_subject import (
    NonFiniteError,
    Subject,
    advance,
    counts_of,
    describe_nonfinite,
    fresh,
    fresh_l1,
    guard_weights,
    optimum_l1,
    optimum_of,
    run_subject,
    trace_signature,
)
from crfopt.bench.evaluator import Evaluator
from crfopt.bench.runner import Budget, run
from crfopt.core.problem import CRFProblem
from crfopt.optim.contract import (
    Optimizer,
    OptimizerSpec,
    ParameterError,
    UnsupportedProblemError,
)

FINITE_ITERATIONS = 120  # ten passes of a stochastic method on the sparse tiny problem
FINITE_PASSES = 30.0  # the cap for batch methods (every iteration ≥ 1 pass)


def check_finite(s: Subject) -> None:
    """Weights, P(w) and (dual methods) D(μ) stay finite for a few passes.

    Runs first, on the sparse and the dense tiny problem, inspecting the state after
    setup and every few iterations (a quarter pass for stochastic methods, every
    iteration for batch ones) for up to FINITE_ITERATIONS iterations or FINITE_PASSES
    effective passes, and names what went non-finite and when.
    """
    for kind in ("sparse", "dense"):
        p = fresh(kind)
        opt = s.make(p, seed=0)
        block = max(1, p.n // 4) if "stochastic" in s.capabilities else 1
        done, last_ok = 0, 0
        try:
            while True:
                _inspect_finite(s, p, opt, kind, done, last_ok)
                last_ok = done
                if done >= FINITE_ITERATIONS or p.counters.effective_passes >= FINITE_PASSES:
                    break
                k = opt.run_block(block)
                done += k
                if k == 0:  # converged
                    _inspect_finite(s, p, opt, kind, done, last_ok)
                    break
        finally:
            opt.close()


def _inspect_finite(
    s: Subject, p: CRFProblem, opt: Optimizer, kind: str, done: int, last_ok: int
) -> None:
    when = (
        "after setup"
        if done == 0
        else f"after {done} iterations (finite after {last_ok}) on the {kind} tiny problem"
    )
    w = np.asarray(opt.w, dtype=float)
    if not np.all(np.isfinite(w)):
        raise s.non_finite("weights", f"non-finite weights ({describe_nonfinite(w)}) {when}")
    primal = Evaluator(p).primal(w)
    if not math.isfinite(primal):
        raise s.non_finite("primal", f"non-finite primal P(w) = {primal} {when}")
    if "has_dual" in s.capabilities:
        mu = opt.dual_state()
        if mu is not None:
            dual = Evaluator(p).dual(mu)
            if not math.isfinite(dual):
                raise s.non_finite("dual", f"non-finite dual D(μ) = {dual} {when}")
        dv = opt.dual_value()
        if dv is not None and not math.isfinite(dv):
            raise s.non_finite("dual", f"non-finite incremental dual value {dv} {when}")


def check_initialization_cost(s: Subject) -> None:
    """setup() does at most the declared initialization work, ``Cost.init_passes``."""
    declared = s.spec.cls.cost.init_passes
    for kind in ("sparse", "dense"):
        p = fresh(kind)
        opt = s.make(p, seed=0)
        opt.close()
        c = counts_of(p)
        if c["oracle"] or c["forward"] or c["iterations"] or c["updates"]:
            raise s.fail(
                "initialization work is counted apart",
                f"after construction: {c} (only init_* counters may move)",
            )
        passes = (c["init_oracle"] + c["init_forward"]) / p.n
        if passes > declared + 1e-12:
            raise s.fail(
                "initialization costs at most the declared Cost.init_passes",
                f"setup() did {passes:g} effective passes ({c['init_oracle']} oracle + "
                f"{c['init_forward']} forward calls, n = {p.n}) on the {kind} tiny problem; "
                f"declared init_passes = {declared:g}",
            )


def check_reproducible(s: Subject) -> None:
    """Same seed → identical trace (every column but time) and identical final w."""
    traces, ws = [], []
    for _ in range(2):
        p = fresh("sparse")
        res = run_subject(s, p, seed=3, budget=Budget(passes=2), checkpoints="every:0.5")
        traces.append(trace_signature(res.trace))
    if traces[0] != traces[1]:
        raise s.fail("same seed gives the same trace", "two runs with seed 3 differ")
    for _ in range(2):
        p = fresh("dense")
        opt = s.make(p, seed=5)
        advance(s, opt, 5)
        ws.append(np.array(opt.w))
        opt.close()
    if not np.array_equal(ws[0], ws[1]):
        raise s.fail("same seed gives the same weights", "dense problem, 5 iterations")


def check_different_seeds_differ(s: Subject) -> None:
    """Stochastic variants: another seed gives another sequence of iterates."""
    ws = []
    for seed in (0, 1):
        p = fresh("sparse")
        opt = s.make(p, seed=seed)
        advance(s, opt, p.n)
        ws.append(np.array(opt.w))
        opt.close()
    if np.array_equal(ws[0], ws[1]):
        raise s.fail("seeds matter", "seeds 0 and 1 gave identical weights after one epoch")


def check_block_equals_steps(s: Subject) -> None:
    """run_block(k) does exactly what k calls of step() do."""
    p1, p2 = fresh("sparse"), fresh("sparse")
    a, b = s.make(p1, seed=2), s.make(p2, seed=2)
    k = 7
    try:
        done = advance(s, a, k)
        for _ in range(done):
            b.step()
        guard_weights(s, b)
        np.testing.assert_allclose(a.w, b.w, rtol=1e-12, atol=1e-14)
    except NonFiniteError:
        raise
    except AssertionError as exc:
        raise s.fail("a block of k iterations equals k steps", str(exc)) from None
    finally:
        a.close()
        b.close()
    if counts_of(p1) != counts_of(p2):
        raise s.fail(
            "a block of k iterations equals k steps",
            f"counters differ: {counts_of(p1)} vs {counts_of(p2)}",
        )


def check_counts_per_iteration(s: Subject) -> None:
    """Each iteration costs what the variant declares (docs/algorithms.md §2, E10)."""
    p = fresh("sparse")
    opt = s.make(p, seed=1)
    cost = type(opt).cost
    unit = p.n if cost.per_pass else 1
    try:
        for it in range(3 * p.n if "stochastic" in s.capabilities else 4):
            before = counts_of(p)
            done = advance(s, opt, 1)
            after = counts_of(p)
            if done == 0 and opt.converged:
                break
            if done != 1 or after["iterations"] - before["iterations"] != 1:
                raise s.fail(
                    "iterations are counted",
                    f"run_block(1) returned {done}, iterations +"
                    f"{after['iterations'] - before['iterations']}",
                )
            for key, (lo, hi) in (
                ("oracle", cost.oracle_calls),
                ("forward", cost.forward_calls),
                ("updates", cost.updates),
            ):
                delta = after[key] - before[key]
                scale = unit if key != "updates" else 1
                if delta < lo * scale or (hi is not None and delta > hi * scale):
                    raise s.fail(
                        "work per iteration matches the declared cost",
                        f"iteration {it}: {key} +{delta}, declared [{lo}, {hi}]"
                        f"{' × n' if scale > 1 else ''}",
                    )
                if cost.per_pass and key != "updates" and delta % p.n:
                    raise s.fail(
                        "batch work comes in whole passes",
                        f"iteration {it}: {key} +{delta} with n = {p.n}",
                    )
            if after["init_oracle"] != before["init_oracle"]:
                raise s.fail(
                    "initialization work is counted apart",
                    "init_oracle_calls changed after construction",
                )
    finally:
        opt.close()


def check_inference_is_counted(s: Subject) -> None:
    """Every forward–backward the optimizer runs goes through a counted entry point."""
    p = fresh("sparse")
    before_audit = int(p.data.audit[0])
    opt = s.make(p, seed=0)
    advance(s, opt, 2 * p.n if "stochastic" in s.capabilities else 3)
    opt.w  # noqa: B018
    opt.close()
    audited = int(p.data.audit[0]) - before_audit
    c = counts_of(p)
    counted = c["oracle"] + c["forward"] + c["init_oracle"] + c["init_forward"]
    if audited != counted:
        raise s.fail(
            "all inference goes through counted oracles",
            f"{audited} forward–backward executions but {counted} counted calls",
        )


def check_problem_unchanged(s: Subject) -> None:
    """Running changes nothing in the problem but its counters."""
    p = fresh("sparse")
    p.changed_data()  # the reference digests of every split's data, features and λ
    opt = s.make(p, seed=0)
    advance(s, opt, p.n)
    opt.close()
    changed = p.changed_data()
    if changed:
        raise s.fail("the problem is not mutated", f"{', '.join(changed)} changed")


def check_rejects_unknown_parameter(s: Subject) -> None:
    """An unknown parameter is an error that lists the valid ones."""
    try:
        s.spec.resolve({"no_such_parameter_xyz": 1})
    except ParameterError as exc:
        msg = str(exc)
        missing = [k for k in s.spec.cls.parameters if k not in msg]
        if "no_such_parameter_xyz" not in msg or missing:
            raise s.fail("parameter errors list the valid names", msg) from None
    else:
        raise s.fail("unknown parameters are rejected", "no error for no_such_parameter_xyz")
    for name, param in s.spec.cls.parameters.items():
        if param.type in (int, float):
            try:
                s.spec.resolve({name: "not-a-number"})
            except ParameterError:
                continue
            raise s.fail("ill-typed parameters are rejected", f"{name}='not-a-number' accepted")


def check_no_global_rng(s: Subject) -> None:
    """No use of NumPy's or Python's global random state (docs/algorithms.md §3.0).

    The check seeds both global generators; it restores their states afterwards, so
    that it does not reseed the caller's (or the next test's) random streams.
    """
    saved_np, saved_py = np.random.get_state(), random.getstate()
    try:
        _check_no_global_rng(s)
    finally:
        np.random.set_state(saved_np)
        random.setstate(saved_py)


def _check_no_global_rng(s: Subject) -> None:
    np.random.seed(12345)
    random.seed(12345)
    np_state = np.random.get_state()[1].copy()
    py_state = random.getstate()
    p = fresh("sparse")
    opt = s.make(p, seed=0)
    advance(s, opt, p.n)
    w1 = np.array(opt.w)
    opt.close()
    if not np.array_equal(np.random.get_state()[1], np_state) or random.getstate() != py_state:
        raise s.fail("no global RNG", "the global random state was consumed")
    np.random.seed(999)
    random.seed(999)
    p = fresh("sparse")
    opt = s.make(p, seed=0)
    advance(s, opt, p.n)
    w2 = np.array(opt.w)
    opt.close()
    if not np.array_equal(w1, w2):
        raise s.fail("no global RNG", "results depend on the global seed")


def check_primal_decreases(s: Subject) -> None:
    """On a tiny strongly convex problem the objective falls, on average."""
    p = fresh("convex")
    res = run_subject(s, p, seed=0, budget=Budget(passes=10), checkpoints="every:1")
    primal = res.trace["primal"].astype(float).to_numpy()
    primal = primal[np.isfinite(primal)]
    if len(primal) < 3:
        raise s.fail("the objective decreases", f"only {len(primal)} finite checkpoints")
    third = max(1, len(primal) // 3)
    if not (primal[-1] < primal[0] and primal[-third:].mean() < primal[:third].mean()):
        raise s.fail("the objective decreases", f"P went {primal[0]:.6g} → {primal[-1]:.6g}")


def check_dual_state(s: Subject) -> None:
    """Dual variables are consistent marginals, w = ŵ(μ), and the true gap is ≥ 0."""
    p = fresh("sparse")
    opt = s.make(p, seed=0)
    try:
        advance(s, opt, p.n)
        mu = opt.dual_state()
        if mu is None:
            raise s.fail("has_dual variants expose dual_state()", "got None")
        ln = np.asarray(mu.log_nodes, dtype=float)
        le = np.asarray(mu.log_edges, dtype=float)
        if ln.max(initial=-np.inf) > 1e-12 or le.max(initial=-np.inf) > 1e-12:
            raise s.fail("dual marginals are probabilities", "a log-marginal is positive")
        nodes = np.exp(ln)
        if not np.allclose(nodes.sum(axis=1), 1.0, atol=1e-8):
            raise s.fail(
                "node marginals sum to one", f"max error {abs(nodes.sum(1) - 1).max():.3g}"
            )
        offs = p.data.offsets
        for i in range(p.n):
            lo, hi = int(offs[i]), int(offs[i + 1])
            edges = np.exp(le[lo - i : hi - i - 1])
            for t in range(hi - lo - 1):
                if not (
                    np.allclose(edges[t].sum(axis=1), nodes[lo + t], atol=1e-8)
                    and np.allclose(edges[t].sum(axis=0), nodes[lo + t + 1], atol=1e-8)
                ):
                    raise s.fail("edge and node marginals are consistent", f"sequence {i}, t={t}")
        w_hat = p.conjugate_weights(mu)
        w = np.asarray(opt.w)
        if not np.allclose(w, w_hat, rtol=1e-6, atol=1e-8 * max(1.0, np.abs(w_hat).max())):
            raise s.fail("w = ŵ(μ)", f"max difference {np.abs(w - w_hat).max():.3g}")
        ev = Evaluator(p)
        gap = ev.primal(w) - ev.dual(mu)
        if gap < -1e-10:
            raise s.fail("the duality gap is ≥ 0", f"gap = {gap:.3g}")
        dv = opt.dual_value()
        if dv is not None and not math.isclose(dv, ev.dual(mu), rel_tol=1e-6, abs_tol=1e-9):
            raise s.fail("the incremental dual value is D(μ)", f"{dv} vs {ev.dual(mu)}")
    finally:
        opt.close()


def check_gap_estimate(s: Subject) -> None:
    """A declared gap estimate is a finite non-negative number."""
    p = fresh("sparse")
    opt = s.make(p, seed=0)
    advance(s, opt, p.n)
    g = opt.gap_estimate()
    opt.close()
    if g is None or not math.isfinite(g) or g < 0:
        raise s.fail("gap_estimate() is finite and ≥ 0", f"got {g!r}")


def check_budget_end(s: Subject) -> None:
    """The runner stops cleanly at the budget; counters and time never go backwards."""
    for budget in (
        Budget(passes=1.5),
        Budget(passes=None, updates=5),
        Budget(passes=None, oracle_calls=30),
    ):
        p = fresh("sparse")
        res = run_subject(s, p, seed=0, budget=budget)
        if res.status not in ("budget", "converged"):
            raise s.fail(
                "ends with status budget",
                f"{budget.as_dict()}: {res.status} {res.meta.get('error_summary', '')}",
            )
        t = res.trace
        for col in ("oracle_calls", "forward_calls", "updates", "iterations", "time_s"):
            vals = t[col].astype(float).to_numpy()
            if np.any(np.diff(vals) < 0):
                raise s.fail("traces are monotone", f"{col} decreases")
        last = t.iloc[-1]
        reached = {
            "effective_passes": budget.passes,
            "updates": budget.updates,
            "oracle_calls": budget.oracle_calls,
        }
        for col, limit in reached.items():
            if limit is not None and res.status == "budget" and last[col] < limit - 1e-9:
                raise s.fail("runs until the budget", f"stopped at {col} = {last[col]} < {limit}")
        if (t["status"].iloc[:-1] != "running").any():
            raise s.fail("only the last row carries the final status", str(list(t["status"])))


# ------------------------------------------------------------------------ quality checks


def check_converges_on_tiny_problem(s: Subject, tol: float = 1e-6, passes: float = 200) -> None:
    """Reaches (P - P*)/P(0) ≤ 1e-6 within 200 passes on a tiny well-conditioned problem."""
    p = fresh("convex")
    p_star = optimum_of("convex")
    res = run_subject(
        s,
        p,
        seed=0,
        budget=Budget(passes=passes, target_suboptimality=tol * p.primal_at_zero()),
        p_star=p_star,
        checkpoints="every:2",
    )
    sub = res.trace["suboptimality"].astype(float).min()
    if not sub <= tol * p.primal_at_zero():
        raise s.fail(
            "converges on a tiny problem",
            f"best (P-P*)/P(0) = {sub / p.primal_at_zero():.3g} after {passes} passes "
            f"(wanted ≤ {tol:g})",
        )


# ------------------------------------------------------------------------ regularizers


def check_l1_gap_valid(s: Subject) -> None:
    """On an elastic-net problem the trace's duality gap is finite, ≥ 0 and bounds P − P*."""
    p = fresh_l1()
    p_star = optimum_l1()
    res = run_subject(s, p, seed=0, budget=Budget(passes=10), checkpoints="every:1", p_star=p_star)
    t = res.trace
    primal = t["primal"].astype(float).to_numpy()
    gap = t["duality_gap"].astype(float).to_numpy()
    slack = 1e-9 * abs(p_star)
    for k in range(len(t)):
        it = int(t["iterations"].iloc[k])
        if not np.isfinite(gap[k]) or gap[k] < 0:
            raise s.fail("the ℓ1 duality gap is finite and ≥ 0", f"{gap[k]!r} after {it} its")
        if primal[k] - p_star > gap[k] + slack:
            raise s.fail(
                "the ℓ1 duality gap bounds P − P*",
                f"after {it} iterations P − P* = {primal[k] - p_star:.3g} > gap {gap[k]:.3g}",
            )
    if not primal[-1] < primal[0]:
        raise s.fail("the ℓ1 objective decreases", f"P went {primal[0]:.6g} → {primal[-1]:.6g}")


def check_refuses_l1(s: Subject) -> None:
    """A variant that does not declare ℓ1 refuses a problem with σ > 0, saying why."""
    p = fresh_l1()
    res = run(p, s.spec, seed=0, budget=Budget(passes=1))
    reason = str(res.meta.get("skip_reason", ""))
    if res.status != "skipped" or "ℓ1" not in reason:
        raise s.fail(
            "an ℓ2-only variant skips an ℓ1 problem with the reason",
            f"status {res.status!r}, reason {reason!r}",
        )
    try:
        opt = s.make(p, seed=0)
    except UnsupportedProblemError:
        return
    opt.close()
    raise s.fail("an ℓ2-only variant refuses an ℓ1 problem", "it was built without error")


def check_converges_l1(s: Subject, tol: float = 1e-6, passes: float = 200) -> None:
    """Reaches (P - P*)/P(0) ≤ 1e-6 of the certified elastic-net optimum within 200 passes."""
    p = fresh_l1()
    p_star = optimum_l1()
    target = tol * p.primal_at_zero()
    res = run_subject(
        s,
        p,
        seed=0,
        budget=Budget(passes=passes, target_suboptimality=target),
        p_star=p_star,
        checkpoints="every:2",
    )
    sub = res.trace["suboptimality"].astype(float).min()
    if not sub <= target:
        raise s.fail(
            "converges to the ℓ1 optimum",
            f"best (P-P*)/P(0) = {sub / p.primal_at_zero():.3g} after {passes} passes "
            f"(wanted ≤ {tol:g})",
        )


CONTRACT_CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_finite,  # first: a diverging optimizer is reported as such
    check_initialization_cost,
    check_reproducible,
    check_block_equals_steps,
    check_counts_per_iteration,
    check_inference_is_counted,
    check_problem_unchanged,
    check_rejects_unknown_parameter,
    check_no_global_rng,
    check_primal_decreases,
    check_budget_end,
)
CAPABILITY_CHECKS: dict[str, tuple[Callable[[Subject], None], ...]] = {
    "stochastic": (check_different_seeds_differ,),
    "has_dual": (check_dual_state,),
    "gap_estimate": (check_gap_estimate,),
}
QUALITY_CHECKS: tuple[Callable[[Subject], None], ...] = (check_converges_on_tiny_problem,)


def checks_for(spec: OptimizerSpec) -> list[tuple[str, Callable[[Subject], None]]]:
    """(category, check) pairs applicable to a variant, chosen by its capabilities and
    its declared regularizers."""
    out = [("contract", c) for c in CONTRACT_CHECKS]
    for cap, extra in CAPABILITY_CHECKS.items():
        if cap in spec.capabilities:
            out.extend(("contract", c) for c in extra)
    if "l1" in spec.regularizers:
        out.append(("contract", check_l1_gap_valid))
    else:
        out.append(("contract", check_refuses_l1))
    out.extend(("quality", c) for c in QUALITY_CHECKS)
    if "l1" in spec.regularizers:
        out.append(("quality", check_converges_l1))
    return out
