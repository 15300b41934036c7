"""The CoNLL-2000 files (WSJ §15–18 train, §20 test) and the two problems read from them.

* ``conll2000``: chunking, template ``chunking``; 8936 training sentences / 211727
  tokens / 22 chunk tags; 2012 / 47377 for testing.
* ``pos-conll2000``: the gold PTB POS column of the same files, 44 tags, template
  ``pos`` (word-based features only) — a substitute for the papers' WSJ POS set.
"""

from __future__ import annotations

import crfopt
from crfopt.data.corpus import files_problem
from crfopt.data.readers import read_conll
from crfopt.data.sources import DataFile, loader_defaults

_LICENCE = "no explicit licence; derived from the Penn Treebank WSJ (research use)"
TRAIN = DataFile(
    "train.txt.gz",
    "conll2000",
    sha256="160109d8a1c31381976affcb534abbfa11e0bb5acabc60d4feb5c6b0874a8858",
    url="https://www.clips.uantwerpen.be/conll2000/chunking/train.txt.gz",
    raw_sha256="82033cd7a72b209923a98007793e8f9de3abc1c8b79d646c50648eb949b87cea",
    licence=_LICENCE,
    size=599156,
)
TEST = DataFile(
    "test.txt.gz",
    "conll2000",
    sha256="6864d222606f9deff739206a49f01d43651041b8deb94f0ea4e98ba0b14217ab",
    url="https://www.clips.uantwerpen.be/conll2000/chunking/test.txt.gz",
    raw_sha256="73b7b1e565fa75a1e22fe52ecdf41b6624d6f59dacb591d44252bf4d692b1628",
    licence=_LICENCE,
    size=136837,
)
COLUMNS = ("word", "pos", "chunk")
# The same caveat as pos-ewt's (datasets/pos.py); plugin modules do not import each other.
WSJ_NOTE = (
    "The papers' POS set (PTB WSJ §0-18, 38,219 sentences, 45 tags) is LDC-licensed and not "
    "available here; this is a substitute."
)


def load_conll2000(
    lam: float | None = None, bias: bool = True, template: str = "chunking", min_count: int = 1
) -> crfopt.CRFProblem:
    return _load("conll2000", "chunk", template, lam, bias, min_count, note=None)


def load_pos_conll2000(
    lam: float | None = None, bias: bool = True, template: str = "pos", min_count: int = 1
) -> crfopt.CRFProblem:
    return _load("pos-conll2000", "pos", template, lam, bias, min_count, note=WSJ_NOTE)


def _load(
    name: str,
    label: str,
    template: str,
    lam: float | None,
    bias: bool,
    min_count: int,
    note: str | None,
) -> crfopt.CRFProblem:
    """Both problems read the same files; only the label column (and the note) differ."""
    return files_problem(
        name,
        {"train": TRAIN, "test": TEST},
        lambda p: read_conll(p, columns=COLUMNS, label=label),
        template,
        lam=lam,
        bias=bias,
        min_count=min_count,
        label=label,
        note=note,
    )


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="conll2000",
            load=load_conll2000,
            defaults=loader_defaults(load_conll2000),
            summary="CoNLL-2000 chunking (WSJ), 22 tags, template 'chunking' (19 attributes)",
            reference="Tjong Kim Sang & Buchholz 2000; LPL18 Table 1 (CONLL)",
            files=(TRAIN, TEST),
            notes="CRFsuite's chunking template gives A = 335,672 attributes (d = 7.4 M, as "
            "CRFsuite itself); LPL18's SAG4CRF preprocessing had A = 74,658 (see "
            "reports/datasets.md).",
        ),
        crfopt.ProblemSpec(
            name="pos-conll2000",
            load=load_pos_conll2000,
            defaults=loader_defaults(load_pos_conll2000),
            summary="PTB POS tags of CoNLL-2000's WSJ §15-18 / §20, 44 tags — WSJ substitute",
            reference="CoNLL-2000 POS column; LPL18 Table 1 (POS, substitute)",
            files=(TRAIN, TEST),
            notes=WSJ_NOTE,
        ),
    ]
