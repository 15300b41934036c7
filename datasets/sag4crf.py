"""``sag4crf-conll``, ``sag4crf-ner``, ``sag4crf-pos``: Schmidt et al.'s preprocessed files.

Only the test splits of SAG4CRF's ``.mat`` files are available (docs/datasets.md); each
becomes a training problem of its own, with attribute ids built as docs/algorithms.md §1.8
says (column c's value v ↦ Σ_{c'<c} V_{c'} + v − 1, V_c the column's maximum). With
``holdout > 0`` the last fraction of the sequences becomes a test split.
"""

from __future__ import annotations

import numpy as np

import crfopt
from crfopt.data.cache import cached_problem
from crfopt.data.readers import read_sag4crf_mat
from crfopt.data.sources import DataFile, files_metadata, locate, verify

_LICENCE = "no licence stated; derived from CoNLL-2000, CoNLL-2002 and (POS) LDC's WSJ"
# sdca4crf's repository at a fixed commit, where the three test files are kept.
_SDCA4CRF = (
    "https://raw.githubusercontent.com/remilepriol/sdca4crf/"
    "13e7fbd741f6f4530de1983ca10e1760aa702207/data/"
)
# Only the CoNLL-2000-derived file is downloaded automatically: CoNLL-2000 is freely
# distributed for research, whereas CoNLL-2002 is restricted to its shared task and
# the POS file derives from LDC's licensed WSJ, so those two are put in place by hand.
FILES = {
    "conll": DataFile(
        "coNLL_test.mat",
        "sag4crf",
        sha256="a6cc6dde9cc0805a5822b1aeeb3b3770056876a8d24ca49bdbfc8a00f37bbdd1",
        url=_SDCA4CRF + "coNLL_test.mat",
        licence=_LICENCE,
        size=933069,
    ),
    "ner": DataFile(
        "NER_test.mat",
        "sag4crf",
        sha256="2cd043a0669de1f1acd5ac70e2e66d46d19818a73921647e4b54f1848929d326",
        licence=_LICENCE + "; CoNLL-2002 data: research use in its shared task only",
        source=_SDCA4CRF + "NER_test.mat",
    ),
    "pos": DataFile(
        "POS_test.mat",
        "sag4crf",
        sha256="ed3f7f19d7e98c8439c5eb4ef29d17677ee39bb9dad1d12e1ef1807fac6ad55a",
        licence=_LICENCE + "; do not redistribute",
        source=_SDCA4CRF + "POS_test.mat",
    ),
}
# The largest label id of each file (CoNLL-2000 has 23 chunk tags, 4 of them train-only).
MAX_LABEL = {"conll": 23, "ner": 9, "pos": 45}
LABELS = {  # label maps of the files (1-based), checked against the CoNLL text files
    "conll": {
        1: "B-NP",
        2: "B-PP",
        3: "I-NP",
        4: "B-VP",
        5: "I-VP",
        6: "B-SBAR",
        7: "O",
        8: "B-ADJP",
        9: "B-ADVP",
        10: "I-ADVP",
        11: "I-ADJP",
        12: "I-SBAR",
        13: "I-PP",
        14: "B-PRT",
        15: "B-LST",
        16: "B-INTJ",
        18: "B-CONJP",
        19: "I-CONJP",
        23: "I-LST",
    },
    "ner": {
        1: "I-LOC",
        2: "B-ORG",
        3: "I-PER",
        4: "O",
        5: "I-MISC",
        6: "B-MISC",
        7: "I-ORG",
        8: "B-LOC",
        9: "B-PER",
    },
}


def _loader(key: str):
    df = FILES[key]

    def load(
        lam: float | None = None, bias: bool = True, holdout: float = 0.0
    ) -> crfopt.CRFProblem:
        if not 0.0 <= holdout < 1.0:
            raise ValueError("holdout must lie in [0, 1)")
        path = locate(df)

        def build() -> crfopt.CRFProblem:
            verify(df, path)
            m = read_sag4crf_mat(path, max_label=MAX_LABEL[key])
            K = int(m.labels.max())
            V = m.values.max(axis=0)  # V_c per column (§1.8)
            base = np.concatenate([[0], np.cumsum(V)[:-1]])
            present = m.values > 0
            rows, cols = np.nonzero(present)
            ids = base[cols] + m.values[rows, cols] - 1
            indptr = np.concatenate([[0], np.cumsum(present.sum(axis=1))])
            n = len(m.lengths)
            n_test = round(holdout * n)
            offsets = np.concatenate([[0], np.cumsum(m.lengths)])
            cut = offsets[n - n_test]

            def part(seq_slice: slice, tok_lo: int, tok_hi: int) -> crfopt.Sequences:
                lo, hi = indptr[tok_lo], indptr[tok_hi]
                return crfopt.Sequences(
                    lengths=m.lengths[seq_slice],
                    labels=m.labels[tok_lo:tok_hi] - 1,
                    indptr=indptr[tok_lo : tok_hi + 1] - lo,
                    indices=ids[lo:hi],
                )

            names = LABELS.get(key, {})
            return crfopt.CRFProblem(
                part(slice(0, n - n_test), 0, int(cut)),
                n_labels=K,
                n_attributes=int(V.sum()),
                test=part(slice(n - n_test, n), int(cut), int(offsets[-1])) if n_test else None,
                bias=bias,
                label_names=[names.get(k + 1, str(k + 1)) for k in range(K)],
                name=f"sag4crf-{key}",
                metadata={
                    **files_metadata([df], [path]),
                    "columns": int(m.values.shape[1]),
                    "holdout": holdout,
                },
            )

        return cached_problem(
            f"sag4crf-{key}", {"file": df.sha256, "bias": bias, "holdout": holdout}, build, lam=lam
        )

    return load


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    what = {
        "conll": "CoNLL-2000 test set, 19 columns",
        "ner": "CoNLL-2002 Dutch testb, 20 columns",
        "pos": "WSJ §22-24 POS test set, 13 columns, 45 tags",
    }
    return [
        crfopt.ProblemSpec(
            name=f"sag4crf-{key}",
            load=_loader(key),
            defaults={"lam": None, "bias": True, "holdout": 0.0},
            summary=f"SAG4CRF's preprocessed {what[key]} (as a problem of its own)",
            reference="Schmidt et al. 2015 (SAG4CRF); docs/algorithms.md §1.8",
            files=(df,),
            notes="Only SAG4CRF's test files survive; their training files are missing "
            "(docs/datasets.md). " + df.licence,
        )
        for key, df in FILES.items()
    ]
