"""``ner-nl``: CoNLL-2002 Dutch named entities (De Morgen), template ``ner``.

Train 15806 sentences / 202644 tokens (``-DOCSTART-`` lines dropped), 9 IOB2 labels;
testa 2895 / 37687; testb (the test split) 5195 / 68875.
"""

from __future__ import annotations

import crfopt
from crfopt.data.corpus import files_problem
from crfopt.data.readers import read_conll
from crfopt.data.sources import DataFile, loader_defaults

_LICENCE = (
    "research use in the context of the CoNLL-2002 shared task only; not freely redistributable"
)
_BASE = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/"
# Not downloaded automatically (licence); where to get the files by hand.
_SOURCE = (
    f"{_BASE}conll2002.zip (members conll2002/ned.*, UTF-8, gzip each) or "
    "https://www.clips.uantwerpen.be/conll2002/ner/data/ (ISO-8859-1, re-encode to UTF-8)"
)
FILES = {
    "train": DataFile(
        "ned.train.gz",
        "conll2002",
        sha256="279ecdbd7757ac558887ab92cf1d2c4e75309cf0ec95ffaafadf9f6eec091d5e",
        raw_sha256="0a419dcb356b62c8cff38515675550b3d5dbea9f45a1c4956328dbd5cc7fcdbc",
        licence=_LICENCE,
        source=_SOURCE,
    ),
    "testa": DataFile(
        "ned.testa.gz",
        "conll2002",
        sha256="95d78e6ba17f9946b7b9a713e15f14947ecdf60999c01231c31f7500e2a48c5b",
        raw_sha256="51259d4bfe52462f211d3d0b67173a7ecbfa296e199f6c6bd0895f4c78155057",
        licence=_LICENCE,
        source=_SOURCE,
    ),
    "test": DataFile(
        "ned.testb.gz",
        "conll2002",
        sha256="9b131bb78721f758b156c09e8beb83bbfe2274f1bf53d54c2e1f64cae5da3396",
        raw_sha256="2aa748edb82e6f9c4d82e57a4bed69ded18cfa4803122c75070335d513517488",
        licence=_LICENCE,
        source=_SOURCE,
    ),
}
COLUMNS = ("word", "pos", "ne")


def load_ner_nl(
    lam: float | None = None, bias: bool = True, template: str = "ner", min_count: int = 1
) -> crfopt.CRFProblem:
    return files_problem(
        "ner-nl",
        FILES,
        lambda p: read_conll(p, columns=COLUMNS, label="ne"),
        template,
        lam=lam,
        bias=bias,
        min_count=min_count,
        label="ne",
    )


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="ner-nl",
            load=load_ner_nl,
            defaults=loader_defaults(load_ner_nl),
            summary="CoNLL-2002 Dutch NER, 9 labels, splits train / testa / test (= testb)",
            reference="Tjong Kim Sang 2002; LPL18 Table 1 (NER)",
            files=tuple(FILES.values()),
            notes="UTF-8 copy from NLTK's conll2002.zip (upstream is ISO-8859-1); "
            f"{_LICENCE}. No download URL is given: the NLTK zip ({_BASE}conll2002.zip) "
            "holds the files uncompressed inside an archive.",
        )
    ]
