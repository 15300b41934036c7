"""``ocr``: handwritten words (Taskar, Guestrin & Koller 2004), 128 binary pixels per letter.

Folds 1–9 train, fold 0 test, as sdca4crf and SAG4CRF split it (docs/algorithms.md §1.8):
n = 6251 words / 47535 letters for training, 626 / 4617 for testing, K = 26, d = 4082.
Read from SAG4CRF's ``ocr.mat`` or from the upstream ``letter.data(.gz)`` layout.
"""

from __future__ import annotations

import numpy as np

import crfopt
from crfopt.data.cache import cached_problem
from crfopt.data.readers import LETTERS, read_letter_data, read_sag4crf_mat
from crfopt.data.sources import (
    DataFile,
    files_metadata,
    loader_defaults,
    locate,
    missing_file_error,
    verify,
)

# Mark Schmidt's SAG4CRF conversion of letter.data, as kept in sdca4crf's repository at a
# fixed commit (so the bytes, and the checksum below, cannot change under us).
_SDCA4CRF = (
    "https://raw.githubusercontent.com/remilepriol/sdca4crf/"
    "13e7fbd741f6f4530de1983ca10e1760aa702207/data/"
)
OCR_MAT = DataFile(
    "ocr.mat",
    "ocr",
    sha256="5e633fb396259f7365d4d9060560e45632b9e8c7009338dba133974232113c6e",
    url=_SDCA4CRF + "ocr.mat",
    licence="no licence stated upstream; research dataset, widely mirrored",
    size=947321,
)
# The upstream text file. Its checksum is not recorded anywhere we trust (the verified
# copy is the .mat conversion), so it is never downloaded automatically; a copy put
# under CRFOPT_DATA/ocr is used with only its layout checked.
LETTER_DATA_URL = "http://ai.stanford.edu/~btaskar/ocr/letter.data.gz"


def _from_letter_data(
    path: str, test_fold: int, lam: float | None, bias: bool
) -> crfopt.CRFProblem:
    seqs = read_letter_data(path)
    return _split(
        seqs.lengths,
        seqs.labels,
        seqs.X,
        seqs.folds,
        test_fold,
        lam,
        bias,
        {"source": path, "format": "letter.data"},
    )


def _split(lengths, labels, X, folds, test_fold, lam, bias, meta):
    offsets = np.concatenate([[0], np.cumsum(lengths)])

    def take(mask: np.ndarray) -> crfopt.Sequences:
        idx = np.flatnonzero(mask)
        rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx])
        return crfopt.Sequences(lengths=lengths[idx], labels=labels[rows], dense=X[rows])

    train = folds != test_fold
    return crfopt.CRFProblem(
        take(train),
        n_labels=26,
        n_attributes=X.shape[1],
        lam=lam,
        test=take(~train) if (~train).any() else None,
        bias=bias,
        label_names=list(LETTERS),
        attribute_names=[f"p{j}" for j in range(X.shape[1])],
        name="ocr",
        metadata={**meta, "test_fold": test_fold},
    )


def load_ocr(
    lam: float | None = None, bias: bool = True, test_fold: int = 0, source: str = "auto"
) -> crfopt.CRFProblem:
    """The OCR problem; ``source`` is "mat", "letter" (letter.data[.gz]) or "auto"."""
    if source not in ("auto", "mat", "letter"):
        raise ValueError("source must be 'auto', 'mat' or 'letter'")
    if source in ("auto", "letter"):
        for name in ("letter.data.gz", "letter.data"):
            try:
                path = locate(DataFile(name, "ocr", sha256=""), download=False)
            except FileNotFoundError:
                continue
            return _from_letter_data(str(path), test_fold, lam, bias)
        if source == "letter":
            raise missing_file_error(
                DataFile("letter.data.gz", "ocr", sha256="", source=LETTER_DATA_URL)
            )
    path = locate(OCR_MAT)

    def build() -> crfopt.CRFProblem:
        digest = verify(OCR_MAT, path)
        m = read_sag4crf_mat(path, max_label=26)
        if m.folds is None:
            raise crfopt.data.readers.DataFormatError(path, "variable 'fold' missing")
        if m.values.shape[1] != 128:
            raise crfopt.data.readers.DataFormatError(
                path,
                f"expected 128 pixel columns and labels 1..26, got {m.values.shape[1]} "
                f"columns and labels up to {m.labels.max()}",
            )
        meta = {**files_metadata([OCR_MAT], [path]), "sha256": digest, "format": "ocr.mat"}
        return _split(
            m.lengths,
            m.labels - 1,
            m.values.astype(np.float64),
            m.folds,
            test_fold,
            None,
            bias,
            meta,
        )

    return cached_problem(
        "ocr", {"file": OCR_MAT.sha256, "test_fold": test_fold, "bias": bias}, build, lam=lam
    )


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="ocr",
            load=load_ocr,
            defaults=loader_defaults(load_ocr),
            summary="OCR handwritten words, 128 dense pixels, folds 1-9 train / fold 0 test",
            reference="Taskar et al. 2004; LPL18 Table 1; docs/algorithms.md §1.8",
            files=(OCR_MAT,),
            notes=(
                "SAG4CRF's ocr.mat (a conversion of upstream letter.data.gz, "
                f"{LETTER_DATA_URL}); LPL18 Table 1 prints n = 6202, N = 52,827, which no "
                "split of this file reproduces: folds 1-9 give n = 6251, N = 47535. "
                "CRFsuite needs 0.173 s per value+gradient pass on it (reports/performance.md)."
            ),
        )
    ]
