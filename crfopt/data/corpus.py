"""From tagged text to a :class:`CRFProblem`: built-in corpora and the user's own files.

``crfopt compare --problem path/to/train.conll --columns word,pos,label --template ner
--test path/to/test.conll`` and ``--problem train.conllu`` go through :func:`load_corpus`;
the built-in text problems (``conll2000``, ``ner-nl``, ``pos-*``) through
:func:`text_problem`. Both featurize with a template, build the attribute dictionary on
the training split only, and cache the result keyed by the files' checksums.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crfopt.core.problem import CRFProblem
from crfopt.data.cache import cached_problem
from crfopt.data.features import Featurized, Template, featurize
from crfopt.data.readers import Corpus, DataFormatError, read_conll, read_conllu_words
from crfopt.data.sources import DataFile, files_metadata, locate, sha256_of, verify
from crfopt.data.template_files import load_template


def problem_from_featurized(
    name: str,
    feat: Featurized,
    *,
    train: str = "train",
    lam: float | None = None,
    bias: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> CRFProblem:
    """A CRFProblem from featurized splits (the training split first)."""
    others = {s: seqs for s, seqs in feat.splits.items() if s != train}
    test = others.pop("test", None)
    return CRFProblem(
        feat.splits[train],
        n_labels=len(feat.label_names),
        n_attributes=len(feat.attribute_names),
        lam=lam,
        test=test,
        splits=others,
        bias=bias,
        label_names=feat.label_names,
        attribute_names=feat.attribute_names,
        name=name,
        metadata={**dict(metadata or {}), **feat.stats},
    )


def text_problem(
    name: str,
    readers: Mapping[str, Callable[[], Corpus]],
    template: str | os.PathLike[str] | Template,
    *,
    file_digests: Mapping[str, str],
    lam: float | None = None,
    bias: bool = True,
    min_count: int = 1,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_key: Mapping[str, Any] | None = None,
) -> CRFProblem:
    """Read, featurize and cache a text problem; ``readers`` maps split → reader.

    The cache key holds the raw files' digests, the template's canonical form,
    ``min_count``, ``label`` and ``bias`` (everything that changes the arrays), never λ.
    """
    tpl = load_template(template)
    tpl.require_supported()  # before the corpus is read

    def build() -> CRFProblem:
        corpora = {split: read() for split, read in readers.items()}
        feat = featurize(corpora, tpl, label=label, min_count=min_count)
        train = corpora.get("train") or next(iter(corpora.values()))
        # what `crfopt tag` needs to featurize new text the same way
        meta = {
            **dict(metadata or {}),
            "template_source": tpl.source,
            "template_spec": tpl.spec(),
            "corpus": {
                "format": "conllu" if _is_conllu(train.path) else "conll",
                "columns": list(train.columns),
                "label": label or train.label,
            },
        }
        return problem_from_featurized(name, feat, lam=None, bias=bias, metadata=meta)

    key = {
        "name": name,
        "files": dict(file_digests),
        "template": tpl.spec(),
        "min_count": min_count,
        "label": label,
        "bias": bias,
        **dict(extra_key or {}),
    }
    return cached_problem(name, key, build, lam=lam)


def files_problem(
    name: str,
    files: Mapping[str, DataFile],
    read: Callable[[Path], Corpus],
    template: str | os.PathLike[str] | Template,
    *,
    lam: float | None = None,
    bias: bool = True,
    min_count: int = 1,
    label: str | None = None,
    note: str | None = None,
    extra_key: Mapping[str, Any] | None = None,
) -> CRFProblem:
    """:func:`text_problem` for a dataset's checksummed files, ``files`` mapping split → file.

    Every built-in text dataset does the same around its reader: locate each split's file,
    verify its checksum (the digests key the cache), and record where the files came from
    (plus an optional ``note``) in the metadata ``crfopt info`` shows.
    """
    paths = {split: locate(df) for split, df in files.items()}
    digests = {split: verify(files[split], p) for split, p in paths.items()}
    metadata = files_metadata(list(files.values()), list(paths.values()))
    if note is not None:
        metadata["note"] = note
    return text_problem(
        name,
        {split: (lambda p=p: read(p)) for split, p in paths.items()},
        template,
        file_digests=digests,
        lam=lam,
        bias=bias,
        min_count=min_count,
        label=label,
        metadata=metadata,
        extra_key=extra_key,
    )


def _is_conllu(path: str) -> bool:
    stem = path[:-3] if path.endswith(".gz") else path
    return stem.endswith(".conllu")


def load_corpus(
    path: str | os.PathLike[str],
    *,
    columns: str | Sequence[str] | None = None,
    template: str | os.PathLike[str] | None = None,
    test: str | os.PathLike[str] | None = None,
    label: str | None = None,
    encoding: str = "utf-8",
    lam: float | None = None,
    bias: bool | None = None,
    min_count: int = 1,
    template_format: str | None = None,
) -> CRFProblem:
    """A problem from the user's own tagged file(s), with no code.

    Parameters
    ----------
    path : path
        Training file: CoNLL columns (``.conll``, ``.txt``, ``.tsv``…, gzip allowed) or
        CoNLL-U (``.conllu[.gz]``, labels from ``xpos`` unless ``label="upos"``).
    columns : "word,pos,label" or list, optional
        Names of the CoNLL columns; default ``word,pos,label`` for three columns,
        ``word,label`` for two, else ``c0..`` (then ``label`` names the label column).
    template : str or path, optional
        ``chunking``, ``ner``, ``pos``, a TOML/YAML file, or a CRF++ template or Wapiti
        pattern file (docs/patterns.md). Default: ``pos`` for CoNLL-U and word-only files,
        ``ner`` when there is a ``pos`` column.
    test : path, optional
        A test file in the same layout (its tokens' errors are ``test_error``).
    label : str, optional
        The label column (default: the last column / ``xpos``).
    bias : bool, optional
        Add crfopt's bias block (docs/algorithms.md §1.1). Default: yes, except with a
        CRF++/Wapiti pattern file, whose patterns define every feature of the model.
    template_format : {"crfsuite", "crfpp", "wapiti"}, optional
        How to read a template file; default: by its suffix and content.
    """
    path = os.fspath(path)
    if not Path(path).is_file():
        raise FileNotFoundError(f"no such corpus file: {path}")
    conllu = _is_conllu(path)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if conllu:
        if columns is not None:
            raise ValueError("--columns does not apply to CoNLL-U files (their columns are fixed)")
        label_col = label or "xpos"

        def read(p: str) -> Corpus:
            return read_conllu_words(p, label=label_col, encoding=encoding)

        default_template = "pos"
    else:
        if columns is None:
            probe = read_conll(path, label=None, encoding=encoding)
            width = len(probe.columns)
            columns = {3: ["word", "pos", "label"], 2: ["word", "label"]}.get(
                width, [f"c{j}" for j in range(width)]
            )
        label_col = label or list(columns)[-1]
        if label_col not in columns:
            raise DataFormatError(
                path, f"no label column {label_col!r}; columns: {', '.join(columns)}"
            )

        def read(p: str) -> Corpus:
            return read_conll(p, columns=columns, label=label_col, encoding=encoding)

        default_template = "ner" if "pos" in columns and label_col != "pos" else "pos"
    tpl = load_template(template or default_template, template_format)
    if bias is None:
        bias = tpl.default_bias
    readers: dict[str, Callable[[], Corpus]] = {"train": lambda: read(path)}
    digests = {"train": sha256_of(path)}
    if test is not None:
        test = os.fspath(test)
        if not Path(test).is_file():
            raise FileNotFoundError(f"no such test file: {test}")
        readers["test"] = lambda: read(test)
        digests["test"] = sha256_of(test)
    name = Path(path).name
    return text_problem(
        name,
        readers,
        tpl,
        file_digests=digests,
        lam=lam,
        bias=bias,
        min_count=min_count,
        label=label_col if not conllu else None,
        metadata={
            "source": path,
            "test_source": test,
            "columns": list(columns or []),
            "template": tpl.name,
        },
        extra_key={
            "columns": list(columns or []),
            "encoding": encoding,
            "conllu": conllu,
            "conllu_label": label_col if conllu else None,
        },
    )
