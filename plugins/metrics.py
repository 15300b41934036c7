"""Built-in checkpoint metrics: token error and chunk F1 on the test split.

Registered through the same hook as any third-party metric
(``crfopt_register_metrics``, docs/plugins.md "Adding a metric"); the runner computes
them in the evaluation phase (uncounted, untimed) at every checkpoint, since both are
cheap once the test split is decoded, and the decoding is shared (``Checkpoint.predict``).

* ``test_error``: the per-token (Hamming) error of Viterbi predictions on the test split,
  the column every result file has always had (labels unseen in training, -1, count as
  errors).
* ``chunk_f1``: chunk (entity) F1 on the test split, counted as CoNLL's ``conlleval``
  counts chunks, for problems whose labels are IOB/IOE chunk tags (CoNLL-2000 chunking,
  CoNLL-2002 NER); it writes no column for other problems (OCR, POS tagging, synthetic).
  Vectorized over the whole split: on CoNLL-2000's test split (47,377 tokens) it
  takes 0.13–0.20 s per checkpoint, less than the Viterbi decoding it shares with
  test_error (0.22–0.26 s), hence cheap (measured on the shared 2-core machine).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

import crfopt

# conlleval.pl's endOfChunk / startOfChunk tables (the project's reading of conlleval is
# crfopt.apps.tagging.chunk_scores; tests/test_metrics.py checks the two agree).
_ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}
#: the type given to a gold label unseen in training (-1): its true tag is unknown, so it
#: counts as a one-token gold chunk no prediction can match (a recall loss, as the token
#: counts as an error in test_error)
_UNSEEN = "\x00unseen"


def test_error(point: Any) -> float:
    """Per-token error of the Viterbi labels on the test split."""
    return float(np.mean(point.predict("test") != point.gold("test")))


def _has_test(problem: crfopt.CRFProblem) -> bool:
    return "test" in problem.splits


def is_tagging(problem: crfopt.CRFProblem) -> bool:
    """A problem with a test split whose label names are IOB/IOE chunk tags."""
    if not _has_test(problem) or not problem.label_names:
        return False
    from crfopt.apps.tagging import is_chunk_tagset  # the project's one definition

    return is_chunk_tagset(problem.label_names)


@lru_cache(maxsize=32)
def _tables(label_names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """Per label id (the last entry: an unseen label): prefix and type codes, and the
    conlleval tables over prefix codes (ends[prev, cur], starts[prev, cur], open[prefix])."""
    # "B-NP" → ("B", "NP"), "O" → ("O", ""): conlleval's reading of a tag
    split = [(prefix, kind) for prefix, _, kind in (n.partition("-") for n in label_names)]
    split.append(("B", _UNSEEN))
    prefixes = sorted({p for p, _ in split} | {"O"})
    kinds = ["", *sorted({k for _, k in split} - {""})]  # code 0: no type (O)
    pcode = {p: i for i, p in enumerate(prefixes)}
    kcode = {k: i for i, k in enumerate(kinds)}
    ends = np.array([[(a, b) in _ENDS for b in prefixes] for a in prefixes], dtype=bool)
    starts = np.array([[(a, b) in _STARTS for b in prefixes] for a in prefixes], dtype=bool)
    is_open = np.array([p not in ("O", ".") for p in prefixes], dtype=bool)
    prefix_of = np.array([pcode[p] for p, _ in split], dtype=np.int64)
    type_of = np.array([kcode[k] for _, k in split], dtype=np.int64)
    return prefix_of, type_of, ends, starts, is_open, np.int64(pcode["O"]), np.int64(len(kinds))


def chunk_keys(labels: np.ndarray, offsets: np.ndarray, label_names: tuple[str, ...]) -> np.ndarray:
    """One integer per chunk of a labelled split, encoding (start, end, type).

    conlleval's rules, vectorized: a chunk begins at token t when (tag[t-1], tag[t]) is
    a start pair or t opens a new type, and ends at the first boundary after it where
    (tag[t-1], tag[t]) is an end pair or an open tag's type changes; each sequence is
    closed by a virtual ``O``. Equal keys in gold and prediction are the same chunk.
    """
    prefix_of, type_of, ends_m, starts_m, is_open, o_code, n_types = _tables(tuple(label_names))
    y = np.where(labels < 0, len(prefix_of) - 1, labels)
    n = len(y)
    pre, typ = prefix_of[y], type_of[y]
    first = np.zeros(n, dtype=bool)
    first[offsets[:-1][offsets[:-1] < n]] = True
    prev_pre = np.where(first, o_code, np.roll(pre, 1))
    prev_typ = np.where(first, 0, np.roll(typ, 1))
    begins = starts_m[prev_pre, pre] | (is_open[pre] & (prev_typ != typ))
    ends_before = ends_m[prev_pre, pre] | (is_open[prev_pre] & (prev_typ != typ))
    last = offsets[1:][offsets[1:] > offsets[:-1]] - 1  # last token of each non-empty sequence
    ends_at_close = ends_m[pre[last], o_code] | (is_open[pre[last]] & (typ[last] != 0))
    end_points = np.union1d(np.flatnonzero(ends_before), last[ends_at_close] + 1)
    starts = np.flatnonzero(begins)
    if len(starts) == 0 or len(end_points) == 0:  # nothing begins, or nothing is closed
        return np.empty(0, dtype=np.int64)
    # each chunk ends at the first end boundary after its start…
    j = np.searchsorted(end_points, starts, side="right")
    closed = j < len(end_points)
    end = np.where(closed, end_points[np.minimum(j, len(end_points) - 1)], n + 1)
    # …inside its own sequence (a chunk conlleval never closes is not counted), and only
    # if no other chunk began before that end (conlleval then forgets the earlier start)
    seq_end = offsets[np.searchsorted(offsets, starts, side="right")]
    nxt = np.searchsorted(starts, starts, side="right")
    next_begin = np.where(nxt < len(starts), starts[np.minimum(nxt, len(starts) - 1)], n + 1)
    keep = closed & (end <= seq_end) & (next_begin >= end)
    s, e = starts[keep], end[keep]
    return (s * (n + 1) + e) * n_types + typ[e - 1]


def chunk_f1(point: Any) -> float:
    """Chunk F1 (conlleval's overall FB1, as a fraction) on the test split."""
    names = point.problem.label_names
    offsets = point.offsets("test")
    gold = chunk_keys(point.gold("test"), offsets, names)
    pred = chunk_keys(point.predict("test"), offsets, names)
    if len(gold) + len(pred) == 0:
        return 0.0  # conlleval's (and chunk_scores') value when there are no chunks at all
    correct = len(np.intersect1d(gold, pred, assume_unique=True))
    # 2PR/(P+R) with P = correct/pred, R = correct/gold
    return 2.0 * correct / (len(gold) + len(pred))


@crfopt.hookimpl
def crfopt_register_metrics() -> list:
    return [
        crfopt.MetricSpec(
            "test_error",
            test_error,
            applies=_has_test,
            summary="test error (per token)",
        ),
        crfopt.MetricSpec(
            "chunk_f1",
            chunk_f1,
            applies=is_tagging,
            summary="chunk F1 (test, conlleval)",
        ),
    ]
