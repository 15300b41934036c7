"""``--optimizer auto``: the optimizer the project's own measured seconds say is fastest.

The rule reads a problem's size — n sequences, N tokens, K labels, d weights —, its ℓ1
weight σ and the kernel thread count, and picks one of the built-in optimizers. It is
*fitted*, not hand-written: :data:`MEASURED` holds, for every problem of the ``auto``
benchmark (benchmarks/perf_auto.py), each candidate's optimizer seconds to a relative
sub-optimality of 1e-4 (``None``: not reached within 1.5× the fastest), and
:func:`fit` chooses, for ℓ2 and for ℓ1 + ℓ2 apart, the small decision tree — at most
two tests on a path, each on one of K, N/n, n or d/N, one optimizer at each leaf —
whose worst ratio to the fastest over those problems is least (:func:`fit_tree`).
Nothing else is tuned by hand.

How to refit it (after a kernel or an optimizer changes, or on another machine)::

    python benchmarks/performance.py --only auto --refit

measures every candidate on every problem, rewrites the block between the markers
below with the new table, refits, and then times ``auto``'s own choice against the
fastest in the same run (reports/performance.md, section "auto"). The fit is cheap and
runs at import.

A chosen run stops on a **certified** tolerance: the duality gap (for a primal method
the gap P(w) − D(ν(w)) of its own iterate, which bounds P(w) − P*) at most
:data:`DEFAULT_TARGET_GAP` · P(0), P(0) = (N/n) log K the objective at w = 0 — the
default of :class:`crfopt.CRF` too — or the pass budget, whichever comes first.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crfopt.core.problem import CRFProblem

__all__ = [
    "AUTO",
    "DEFAULT_PASSES",
    "DEFAULT_TARGET_GAP",
    "MEASURED",
    "RULE",
    "Choice",
    "Features",
    "Fitted",
    "Measurement",
    "Node",
    "Rule",
    "choose",
    "fit",
    "fit_tree",
    "kernel_threads",
]

#: The name that asks for the rule's choice (``crfopt train --optimizer auto``).
AUTO = "auto"
#: The certified stop of an ``auto`` run: duality gap ≤ this · P(0).
DEFAULT_TARGET_GAP = 1e-6
#: The pass budget of an ``auto`` run when the caller gives none: a cap, not the stop.
DEFAULT_PASSES = 200.0
#: The optimizer that uses a second thread only when one is there (PASSCoDe-Wild) and
#: what it becomes on one (measured 0.92–1.01× sdca-gap's seconds on one thread,
#: reports/performance.md "Parallel SDCA on two cores").
PARALLEL = {"sdca-passcode-wild": "sdca-gap"}
#: The features a stump may split on (attributes of :class:`Features`).
SPLIT_FEATURES = ("labels", "mean_length", "n", "weights_per_token")


@dataclass(frozen=True)
class Features:
    """What the rule reads off a problem."""

    n: int
    tokens: int
    labels: int
    dim: int
    l1: bool
    threads: int

    @property
    def mean_length(self) -> float:
        return self.tokens / max(self.n, 1)

    @property
    def weights_per_token(self) -> float:
        return self.dim / max(self.tokens, 1)

    @classmethod
    def of(cls, problem: CRFProblem, threads: int | None = None) -> Features:
        return cls(
            n=problem.n,
            tokens=problem.n_tokens,
            labels=problem.n_labels,
            dim=problem.dim,
            l1=problem.l1 > 0,
            threads=kernel_threads() if threads is None else int(threads),
        )

    def describe(self) -> str:
        reg = "ℓ1 + ℓ2" if self.l1 else "ℓ2"
        return (
            f"{reg}, n = {self.n:,}, N/n = {self.mean_length:.1f}, K = {self.labels}, "
            f"d = {self.dim:,}, {self.threads} thread{'s' if self.threads != 1 else ''}"
        )


@dataclass(frozen=True)
class Measurement:
    """One problem of the fitting table: its features and each candidate's seconds to
    1e-4 relative sub-optimality (``None``: not reached within the benchmark's cap)."""

    problem: str
    features: Features
    seconds: Mapping[str, float | None]

    def fastest(self) -> tuple[str, float] | None:
        reached = {o: s for o, s in self.seconds.items() if s is not None}
        if not reached:
            return None
        best = min(reached, key=lambda o: reached[o])
        return best, reached[best]

    def ratio(self, optimizer: str) -> float:
        """``optimizer``'s seconds over the fastest's (inf when it was not reached)."""
        best = self.fastest()
        s = self.seconds.get(optimizer)
        if best is None or s is None:
            return math.inf
        return s / best[1]


@dataclass(frozen=True)
class Node:
    """A leaf (``optimizer``) or a split: ``below`` when ``feature`` < ``threshold``,
    else ``above``."""

    optimizer: str | None = None
    feature: str | None = None
    threshold: float = math.nan
    below: Node | None = None
    above: Node | None = None

    def pick(self, f: Features) -> tuple[str, list[str]]:
        """The leaf's optimizer for ``f`` and the tests on the way to it."""
        if self.optimizer is not None:
            return self.optimizer, []
        assert self.feature is not None and self.below and self.above
        value = getattr(f, self.feature)
        low = value < self.threshold
        name, path = (self.below if low else self.above).pick(f)
        test = f"{_FEATURE_LABELS[self.feature]} = {value:.3g} {'<' if low else '≥'} "
        return name, [test + f"{self.threshold:.3g}", *path]

    @property
    def splits(self) -> int:
        if self.optimizer is not None:
            return 0
        assert self.below and self.above
        return 1 + self.below.splits + self.above.splits

    def describe(self) -> str:
        if self.optimizer is not None:
            return f"`{self.optimizer}`"
        assert self.feature is not None and self.below and self.above
        return (
            f"{_FEATURE_LABELS[self.feature]} < {self.threshold:.3g} ? "
            f"{self.below.describe()} : {self.above.describe()}"
        )


_FEATURE_LABELS = {
    "labels": "K",
    "mean_length": "N/n",
    "n": "n",
    "weights_per_token": "d/N",
}


@dataclass(frozen=True)
class Fitted:
    """A fitted tree with its worst and geometric-mean ratio to the fastest optimizer
    over the ``fitted_on`` problems it was fitted on."""

    tree: Node
    worst: float = math.nan
    mean: float = math.nan
    fitted_on: int = 0

    def pick(self, f: Features) -> tuple[str, str]:
        """(optimizer, why) for features ``f``."""
        name, path = self.tree.pick(f)
        if self.fitted_on == 0:
            return name, "the default (no measured problems to fit on)"
        scope = f"{self.fitted_on} measured {'ℓ1 + ℓ2' if f.l1 else 'ℓ2'} problems"
        fitted = f"this rule is at worst {self.worst:.2f}× the fastest on the {scope}"
        return name, (", ".join(path) + f" ({fitted})" if path else fitted)


@dataclass(frozen=True)
class Choice:
    """What ``auto`` picked for a problem, why (one line), and the parameters it runs
    with."""

    optimizer: str
    reason: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"auto chose {self.optimizer}: {self.reason}"


#: Parameters an ``auto`` pick runs with. The SDCA variants stop themselves once their
#: stale gap estimate ĝ falls below ``tolerance``; ĝ is not a certificate (measured:
#: ``sdca-passcode-wild`` stopped on it on NER-nl with a true duality gap of 1.7e-4·P*,
#: 4e-5 absolute, 400× its ĝ), so ``auto`` turns that test off and the runner's
#: certified gap test stops the run.
CERTIFIED_STOP = {"sdca-gap": {"tolerance": 0.0}, "sdca-passcode-wild": {"tolerance": 0.0}}


@dataclass(frozen=True)
class Rule:
    """One tree for ℓ2 problems and one for ℓ1 + ℓ2 ones."""

    l2: Fitted
    l1: Fitted

    def choose(self, f: Features) -> Choice:
        name, why = (self.l1 if f.l1 else self.l2).pick(f)
        if f.threads < 2 and name in PARALLEL:
            serial = PARALLEL[name]
            why += f"; {name} on one thread is {serial}"
            name = serial
        return Choice(name, f"{f.describe()}: {why}", dict(CERTIFIED_STOP.get(name, {})))


#: A deeper tree is kept only if it lowers the worst ratio by more than this factor:
#: the measured seconds move by about ±10 % between runs, and a split that wins less
#: than that fits the noise of one run.
SLACK = 1.1
#: The deepest tree tried (two tests on the way to a leaf).
MAX_DEPTH = 2

_Key = tuple[float, float, int]  # worst ratio, Σ log ratio, splits


def _best(rows: Sequence[Measurement], names: Sequence[str], depth: int) -> tuple[_Key, Node]:
    """The tree of at most ``depth`` splits on each path with the least key over ``rows``.

    The key of a split is the larger worst ratio of its two sides, the sum of their
    Σ log ratio and splits, so each side's best subtree is found on its own."""
    best: tuple[_Key, Node] | None = None

    def consider(key: _Key, node: Node) -> None:
        nonlocal best
        rounded = (round(key[0], 9), round(key[1], 9), key[2])
        if best is None or rounded < (round(best[0][0], 9), round(best[0][1], 9), best[0][2]):
            best = (key, node)

    for name in names:
        ratios = [r.ratio(name) for r in rows]
        worst = max(ratios)
        total = sum(math.log(x) for x in ratios) if math.isfinite(worst) else math.inf
        consider((worst, total, 0), Node(optimizer=name))
    if depth > 0 and len(rows) > 1:
        for feature in SPLIT_FEATURES:
            values = sorted({float(getattr(r.features, feature)) for r in rows})
            for lo, hi in itertools.pairwise(values):
                threshold = math.sqrt(lo * hi)  # midway on a log scale: sizes span decades
                low = [r for r in rows if getattr(r.features, feature) < threshold]
                high = [r for r in rows if getattr(r.features, feature) >= threshold]
                (kl, nl), (kh, nh) = _best(low, names, depth - 1), _best(high, names, depth - 1)
                key = (max(kl[0], kh[0]), kl[1] + kh[1], kl[2] + kh[2] + 1)
                consider(key, Node(None, feature, threshold, nl, nh))
    assert best is not None
    return best


def fit_tree(rows: Sequence[Measurement], default: str) -> Fitted:
    """The rule for one kind of problem, fitted to ``rows``.

    For each depth up to :data:`MAX_DEPTH`, the tree whose worst ratio to the fastest
    over ``rows`` is least (then the least geometric-mean ratio, then the fewest
    splits), each split at a midpoint between two measured values of one of
    :data:`SPLIT_FEATURES`; of those, the shallowest within :data:`SLACK` of the best
    worst ratio."""
    rows = [r for r in rows if r.fastest() is not None]
    if not rows:
        return Fitted(Node(optimizer=default))
    names = sorted({o for r in rows for o in r.seconds})
    by_depth = [_best(rows, names, d) for d in range(MAX_DEPTH + 1)]
    least = min(key[0] for key, _ in by_depth)
    key, tree = next((k, t) for k, t in by_depth if k[0] <= SLACK * least)
    return Fitted(tree, key[0], math.exp(key[1] / len(rows)), len(rows))


def fit(measured: Sequence[Measurement]) -> Rule:
    """The rule fitted to ``measured`` (see the module docstring)."""
    l2 = [m for m in measured if not m.features.l1]
    l1 = [m for m in measured if m.features.l1]
    return Rule(l2=fit_tree(l2, "sag-nus-star"), l1=fit_tree(l1, "owlqn"))


def kernel_threads() -> int:
    """The numba threads the kernels may use (1 on the pure-NumPy path)."""
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        return 1
    import numba

    return int(numba.get_num_threads())


def choose(problem: CRFProblem, threads: int | None = None, rule: Rule | None = None) -> Choice:
    """The optimizer ``auto`` runs on ``problem`` with ``threads`` kernel threads
    (default: numba's current count), and the one-line reason."""
    return (rule or RULE).choose(Features.of(problem, threads))


def _m(
    problem: str,
    features: tuple[int, int, int, int, bool, int],
    seconds: Mapping[str, float | None],
) -> Measurement:
    """A row of the table: (n, N, K, d, ℓ1, threads) and each candidate's seconds."""
    return Measurement(problem, Features(*features), dict(seconds))


# The fitting table, written by ``benchmarks/performance.py --only auto --refit``.
# BEGIN MEASURED
MEASURED: tuple[Measurement, ...] = (
    _m(
        "synthetic",
        (200, 1229, 4, 148, False, 2),
        {
            "sdca-passcode-wild": 0.023,
            "sag-nus-star": 0.019,
            "sdca-gap": 0.023,
            "saga-nus": 0.02,
            "oeg": 0.03,
            "lbfgs": 0.017,
        },
    ),
    _m(
        "synthetic l1",
        (200, 1229, 4, 148, True, 2),
        {"sdca-passcode-wild": 0.03, "sdca-gap": 0.027, "prox-saga": 0.038, "owlqn": 0.015},
    ),
    _m(
        "ocr",
        (6251, 47535, 26, 4082, False, 2),
        {
            "sdca-passcode-wild": 14.75,
            "sag-nus-star": 4.246,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": 5.797,
        },
    ),
    _m(
        "ocr l1",
        (6251, 47535, 26, 4082, True, 2),
        {"sdca-passcode-wild": 18.274, "sdca-gap": 27.682, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "sag4crf-ner",
        (5195, 68994, 9, 882936, False, 2),
        {
            "sdca-passcode-wild": 4.073,
            "sag-nus-star": 2.465,
            "sdca-gap": 3.036,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "sag4crf-ner l1",
        (5195, 68994, 9, 882936, True, 2),
        {"sdca-passcode-wild": 3.645, "sdca-gap": 4.167, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "sag4crf-conll",
        (2012, 47377, 23, 1716950, False, 2),
        {
            "sdca-passcode-wild": 6.585,
            "sag-nus-star": 4.702,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "sag4crf-conll l1",
        (2012, 47377, 23, 1716950, True, 2),
        {"sdca-passcode-wild": 10.059, "sdca-gap": 11.838, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "ner-nl",
        (15806, 202644, 9, 1230894, False, 2),
        {
            "sdca-passcode-wild": 8.568,
            "sag-nus-star": 8.115,
            "sdca-gap": 8.027,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "ner-nl l1",
        (15806, 202644, 9, 1230894, True, 2),
        {"sdca-passcode-wild": 15.62, "sdca-gap": 12.127, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "ner-nl (file)",
        (15806, 202644, 9, 1230894, False, 2),
        {
            "sdca-passcode-wild": None,
            "sag-nus-star": 7.974,
            "sdca-gap": 7.639,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "ner-nl (file) l1",
        (15806, 202644, 9, 1230894, True, 2),
        {"sdca-passcode-wild": 13.19, "sdca-gap": 11.808, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "conll2000",
        (8936, 211727, 22, 7385334, False, 2),
        {
            "sdca-passcode-wild": 24.253,
            "sag-nus-star": 17.865,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "conll2000 l1",
        (8936, 211727, 22, 7385334, True, 2),
        {"sdca-passcode-wild": 35.242, "sdca-gap": 52.189, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "sag4crf-pos",
        (5462, 129654, 45, 5764545, False, 2),
        {
            "sdca-passcode-wild": 37.781,
            "sag-nus-star": 12.389,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "sag4crf-pos l1",
        (5462, 129654, 45, 5764545, True, 2),
        {"sdca-passcode-wild": 42.528, "sdca-gap": 64.827, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "pos-conll2000",
        (8936, 211727, 44, 4706020, False, 2),
        {
            "sdca-passcode-wild": 54.074,
            "sag-nus-star": 16.646,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "pos-conll2000 l1",
        (8936, 211727, 44, 4706020, True, 2),
        {"sdca-passcode-wild": 58.785, "sdca-gap": None, "prox-saga": None, "owlqn": None},
    ),
    _m(
        "pos-ewt",
        (12544, 204577, 49, 5335218, False, 2),
        {
            "sdca-passcode-wild": 78.689,
            "sag-nus-star": 26.292,
            "sdca-gap": None,
            "saga-nus": None,
            "oeg": None,
            "lbfgs": None,
        },
    ),
    _m(
        "pos-ewt l1",
        (12544, 204577, 49, 5335218, True, 2),
        {"sdca-passcode-wild": 85.7, "sdca-gap": None, "prox-saga": None, "owlqn": None},
    ),
)
# END MEASURED

RULE = fit(MEASURED)
