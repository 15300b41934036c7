"""POS tagging substitutes for the papers' WSJ set (LDC-licensed, not available here).

* ``pos-ewt``: Universal Dependencies English-EWT r2.16, XPOS (PTB-style) tags, 49 in
  train; train 12544 sentences / 204577 words, test 2077 / 25094, dev as ``dev``.
* ``pos-conll2000``: the gold PTB POS column of CoNLL-2000 (WSJ §15–18 / §20), 44 tags.

Both use the ``pos`` template (word-based features only; the gold POS is the label).
"""

from __future__ import annotations

import crfopt
from crfopt.data.corpus import text_problem
from crfopt.data.readers import read_conll, read_conllu_words
from crfopt.data.sources import DataFile, files_metadata, locate, verify

WSJ_NOTE = (
    "The papers' POS set (PTB WSJ §0-18, 38,219 sentences, 45 tags) is LDC-licensed and not "
    "available here; this is a substitute."
)
_UD = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/"
_EWT_LICENCE = "CC BY-SA 4.0 (attribution, share-alike)"
EWT = {
    "train": DataFile(
        "en_ewt-ud-train.conllu.gz",
        "ud_english_ewt",
        sha256="bd47e08c9e18ec12d319e84df2ccdb272ff6de1d0dba5761117d3caf8b358f7b",
        url=_UD + "en_ewt-ud-train.conllu",
        raw_sha256="3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
        licence=_EWT_LICENCE,
    ),
    "dev": DataFile(
        "en_ewt-ud-dev.conllu.gz",
        "ud_english_ewt",
        sha256="41086e3afc9ae572f899c9123f874d6d04a52e374a3d2ac7a6667ce48e3bf3e3",
        url=_UD + "en_ewt-ud-dev.conllu",
        raw_sha256="531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
        licence=_EWT_LICENCE,
    ),
    "test": DataFile(
        "en_ewt-ud-test.conllu.gz",
        "ud_english_ewt",
        sha256="29c151eee8846d3f3ef7806c126ecac9932af2317c008c6d6b076c5e14950dbe",
        url=_UD + "en_ewt-ud-test.conllu",
        raw_sha256="e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
        licence=_EWT_LICENCE,
    ),
}
_CONLL_LICENCE = "no explicit licence; derived from the Penn Treebank WSJ (research use)"
CONLL = {
    "train": DataFile(
        "train.txt.gz",
        "conll2000",
        sha256="160109d8a1c31381976affcb534abbfa11e0bb5acabc60d4feb5c6b0874a8858",
        url="https://www.clips.uantwerpen.be/conll2000/chunking/train.txt.gz",
        raw_sha256="82033cd7a72b209923a98007793e8f9de3abc1c8b79d646c50648eb949b87cea",
        licence=_CONLL_LICENCE,
    ),
    "test": DataFile(
        "test.txt.gz",
        "conll2000",
        sha256="6864d222606f9deff739206a49f01d43651041b8deb94f0ea4e98ba0b14217ab",
        url="https://www.clips.uantwerpen.be/conll2000/chunking/test.txt.gz",
        raw_sha256="73b7b1e565fa75a1e22fe52ecdf41b6624d6f59dacb591d44252bf4d692b1628",
        licence=_CONLL_LICENCE,
    ),
}


def load_pos_ewt(
    lam: float | None = None,
    bias: bool = True,
    template: str = "pos",
    min_count: int = 1,
    label: str = "xpos",
) -> crfopt.CRFProblem:
    if label not in ("xpos", "upos"):
        raise ValueError("label must be 'xpos' or 'upos'")
    paths = {s: locate(df) for s, df in EWT.items()}
    digests = {s: verify(EWT[s], p) for s, p in paths.items()}
    return text_problem(
        "pos-ewt",
        {s: (lambda p=p: read_conllu_words(p, label=label)) for s, p in paths.items()},
        template,
        file_digests=digests,
        lam=lam,
        bias=bias,
        min_count=min_count,
        metadata={**files_metadata(list(EWT.values()), list(paths.values())), "note": WSJ_NOTE},
        extra_key={"label": label},
    )


def load_pos_conll2000(
    lam: float | None = None, bias: bool = True, template: str = "pos", min_count: int = 1
) -> crfopt.CRFProblem:
    paths = {s: locate(df) for s, df in CONLL.items()}
    digests = {s: verify(CONLL[s], p) for s, p in paths.items()}
    return text_problem(
        "pos-conll2000",
        {
            s: (lambda p=p: read_conll(p, columns=("word", "pos", "chunk"), label="pos"))
            for s, p in paths.items()
        },
        template,
        file_digests=digests,
        lam=lam,
        bias=bias,
        min_count=min_count,
        label="pos",
        metadata={**files_metadata(list(CONLL.values()), list(paths.values())), "note": WSJ_NOTE},
    )


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="pos-ewt",
            load=load_pos_ewt,
            defaults={
                "lam": None,
                "bias": True,
                "template": "pos",
                "min_count": 1,
                "label": "xpos",
            },
            summary="UD English-EWT r2.16 POS tagging, 49 XPOS (PTB) tags — WSJ substitute",
            reference="Silveira et al. 2014 (EWT); LPL18 Table 1 (POS, substitute)",
            files=tuple(EWT.values()),
            notes=WSJ_NOTE + " Test tokens with an XPOS unseen in training count as errors.",
        ),
        crfopt.ProblemSpec(
            name="pos-conll2000",
            load=load_pos_conll2000,
            defaults={"lam": None, "bias": True, "template": "pos", "min_count": 1},
            summary="PTB POS tags of CoNLL-2000's WSJ §15-18 / §20, 44 tags — WSJ substitute",
            reference="CoNLL-2000 POS column; LPL18 Table 1 (POS, substitute)",
            files=tuple(CONLL.values()),
            notes=WSJ_NOTE,
        ),
    ]
