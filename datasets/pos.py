"""``pos-ewt``: a POS tagging substitute for the papers' WSJ set (LDC-licensed, not here).

Universal Dependencies English-EWT r2.16, XPOS (PTB-style) tags, 49 in train; train 12544
sentences / 204577 words, test 2077 / 25094, dev as ``dev``. The ``pos`` template
(word-based features only; the gold POS is the label). The other substitute,
``pos-conll2000``, is registered by :mod:`crfopt_datasets.conll2000`, the module that
owns the CoNLL-2000 files.
"""

from __future__ import annotations

import crfopt
from crfopt.data.corpus import files_problem
from crfopt.data.readers import read_conllu_words
from crfopt.data.sources import DataFile, loader_defaults

WSJ_NOTE = (
    "The papers' POS set (PTB WSJ §0-18, 38,219 sentences, 45 tags) is LDC-licensed and not "
    "available here; this is a substitute."
)
_UD = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/"
_EWT_LICENCE = "CC BY-SA 4.0 (attribution, share-alike)"
# split → (sha256 of the stored .gz, sha256 of the upstream uncompressed file)
_EWT_SIZE = {"train": 14203025, "dev": 1805545, "test": 1804515}  # upstream, uncompressed
_EWT_SHA256 = {
    "train": (
        "bd47e08c9e18ec12d319e84df2ccdb272ff6de1d0dba5761117d3caf8b358f7b",
        "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
    ),
    "dev": (
        "41086e3afc9ae572f899c9123f874d6d04a52e374a3d2ac7a6667ce48e3bf3e3",
        "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    ),
    "test": (
        "29c151eee8846d3f3ef7806c126ecac9932af2317c008c6d6b076c5e14950dbe",
        "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
    ),
}
EWT = {
    split: DataFile(
        f"en_ewt-ud-{split}.conllu.gz",
        "ud_english_ewt",
        sha256=sha256,
        url=f"{_UD}en_ewt-ud-{split}.conllu",
        raw_sha256=raw_sha256,
        licence=_EWT_LICENCE,
        size=_EWT_SIZE[split],
    )
    for split, (sha256, raw_sha256) in _EWT_SHA256.items()
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
    return files_problem(
        "pos-ewt",
        EWT,
        lambda p: read_conllu_words(p, label=label),
        template,
        lam=lam,
        bias=bias,
        min_count=min_count,
        note=WSJ_NOTE,
        extra_key={"label": label},
    )


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="pos-ewt",
            load=load_pos_ewt,
            defaults=loader_defaults(load_pos_ewt),
            summary="UD English-EWT r2.16 POS tagging, 49 XPOS (PTB) tags — WSJ substitute",
            reference="Silveira et al. 2014 (EWT); LPL18 Table 1 (POS, substitute)",
            files=tuple(EWT.values()),
            notes=WSJ_NOTE + " Test tokens with an XPOS unseen in training count as errors.",
        ),
    ]
