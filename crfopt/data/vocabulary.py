"""The attribute dictionary: attribute strings → feature columns, one rule for all text.

Every way text becomes a problem — a corpus through a template
(:mod:`crfopt.data.features`), feature dicts through the scikit-learn style estimator,
new text through ``crfopt tag`` — maps attribute strings (``w[0]=the``, ``suffix=ing``)
to columns with a :class:`Vocabulary`:

* *open* while the training split is read: a new attribute gets the next column (in
  first-seen order) and every occurrence is counted;
* *frozen* for test, dev and new text: attributes are only looked up, unknown ones are
  dropped (no weight exists for them) and counted in :attr:`Vocabulary.dropped`;
* :meth:`Vocabulary.prune` drops the attributes seen fewer than ``min_count`` times in
  training and renumbers the rest in the same order; :func:`drop_columns` translates
  rows already encoded with the old columns.

So the columns of a problem depend only on its training split, and a model's attribute
list (``Vocabulary(model.attributes, frozen=True)``) encodes new text exactly as training
did.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat

import numpy as np


class Vocabulary(Mapping[str, int]):
    """Attribute name → column, growing while open and fixed once frozen.

    A read-only :class:`~collections.abc.Mapping` from names to columns; columns are
    ``0..len-1`` in first-seen order and :attr:`names` is the inverse.

    Parameters
    ----------
    names : iterable of str
        Initial attributes, in column order (a trained model's attribute list).
    frozen : bool
        Start frozen (for encoding new text with a trained model).
    """

    def __init__(self, names: Iterable[str] = (), *, frozen: bool = False) -> None:
        self._index: dict[str, int] = {}
        self._names: list[str] = []
        self._counts: list[int] = []
        for name in names:
            if name in self._index:
                raise ValueError(f"attribute {name!r} is listed twice")
            self._index[name] = len(self._names)
            self._names.append(name)
            self._counts.append(0)
        self.frozen = frozen
        #: occurrences of unknown attributes looked up while frozen
        self.dropped = 0

    # Mapping protocol: name → column, without side effects
    def __getitem__(self, name: str) -> int:
        return self._index[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        state = "frozen" if self.frozen else "open"
        return f"Vocabulary({len(self)} attributes, {state}, {self.dropped} dropped)"

    @property
    def names(self) -> list[str]:
        """Attribute names in column order."""
        return list(self._names)

    @property
    def counts(self) -> np.ndarray:
        """Occurrences of every attribute counted while open (training), in column order."""
        return np.asarray(self._counts, dtype=np.int64)

    def lookup(self, name: str) -> int | None:
        """Column of one occurrence of ``name``.

        Open: adds an unknown name as the next column and counts the occurrence.
        Frozen: None for an unknown name (counted in :attr:`dropped`).
        """
        j = self._index.get(name)
        if self.frozen:
            if j is None:
                self.dropped += 1
            return j
        if j is None:
            j = self._index[name] = len(self._names)
            self._names.append(name)
            self._counts.append(0)
        self._counts[j] += 1
        return j

    def lookup_many(
        self, names: Iterable[str], occurrences: Sequence[int] | np.ndarray | None = None
    ) -> np.ndarray:
        """Columns of many names at once: :meth:`lookup` on each in turn, -1 for None.

        ``occurrences[i]`` (default 1) is how many occurrences ``names[i]`` stands for,
        so a caller that has already grouped equal occurrences counts them (open) or
        drops them (frozen) exactly as one :meth:`lookup` per occurrence would. New names
        get columns in the order given, i.e. first-seen order when ``names`` is.
        """
        names = names if isinstance(names, (list, tuple)) else list(names)
        n = len(names)
        if occurrences is None:
            weights = np.ones(n, dtype=np.int64)
        else:
            weights = np.asarray(occurrences, dtype=np.int64)
            if weights.shape != (n,) or (n and weights.min() < 0):
                raise ValueError(
                    f"occurrences must be {n} non-negative counts (one per name), "
                    f"got shape {weights.shape}"
                )
        index = self._index
        if self.frozen:
            # dict.get over the whole batch in C: no Python call per name
            ids = np.fromiter(map(index.get, names, repeat(-1, n)), dtype=np.int64, count=n)
            self.dropped += int(weights[ids < 0].sum())
            return ids
        # dict.fromkeys keeps first-seen order and is the one pass that sees new names
        start = len(self._names)
        new = [name for name in dict.fromkeys(names) if name not in index]
        index.update(zip(new, range(start, start + len(new))))
        self._names.extend(new)
        ids = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=n)
        counts = np.bincount(ids, weights=weights, minlength=len(self._names))
        counts[: len(self._counts)] += self._counts
        self._counts = counts.astype(np.int64).tolist()
        return ids

    def token(self, names: Iterable[str]) -> list[int]:
        """Sorted distinct columns of one token's binary attributes.

        An attribute fires once per token even if a template emits it twice; every
        occurrence is still counted (for ``min_count``) or dropped.
        """
        ids: set[int] = set()
        for name in names:
            j = self.lookup(name)
            if j is not None:
                ids.add(j)
        return sorted(ids)

    def freeze(self) -> Vocabulary:
        """Stop growing: from now on unknown attributes are dropped."""
        self.frozen = True
        return self

    def prune(self, min_count: int) -> np.ndarray | None:
        """Keep only attributes counted at least ``min_count`` times; freezes.

        Returns the map old column → new column (-1: dropped) to pass to
        :func:`drop_columns`, or None when ``min_count`` is 1 (nothing can be dropped,
        columns unchanged). Kept attributes keep their relative order.
        """
        if min_count < 1:
            raise ValueError("min_count must be at least 1")
        self.freeze()
        if min_count == 1:
            return None
        counts = self.counts
        keep = counts >= min_count
        keep_map = np.full(len(counts), -1, dtype=np.int64)
        keep_map[keep] = np.arange(int(keep.sum()))
        self._names = [n for n, k in zip(self._names, keep) if k]
        self._counts = [int(c) for c in counts[keep]]
        self._index = {n: j for j, n in enumerate(self._names)}
        return keep_map


def drop_columns(
    indptr: np.ndarray, indices: np.ndarray, keep_map: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a binary CSR matrix renumbered by ``keep_map`` (from :meth:`Vocabulary.prune`).

    Entries whose column maps to -1 are removed; the row count is unchanged.
    """
    new_ids = keep_map[indices]
    ok = new_ids >= 0
    n_rows = len(indptr) - 1
    row = np.repeat(np.arange(n_rows), np.diff(indptr))
    ptr = np.concatenate([[0], np.cumsum(np.bincount(row[ok], minlength=n_rows))])
    return ptr.astype(np.int64), new_ids[ok]
