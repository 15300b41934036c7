"""Readers of the corpus formats people have: CoNLL columns, CoNLL-U, OCR, SAG4CRF.

Every reader raises :class:`DataFormatError` — and only that — on bad content, naming
the file, the line (or the ``.mat`` variable) and what was expected. Gzip files are
recognized by their magic bytes, whatever their name.

A :class:`Corpus` is plain text data: sentences of tokens, each token a tuple of column
strings. Feature templates (:mod:`crfopt.data.features`) turn it into a
:class:`crfopt.Sequences`.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DataFormatError(ValueError):
    """Malformed input data. ``path`` and ``line`` (1-based, if known) say where."""

    def __init__(self, path: str | os.PathLike[str], message: str, line: int | None = None):
        self.path = os.fspath(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Corpus:
    """Sentences of tokens with named columns.

    ``sentences[s][t]`` is the tuple of column values of token t of sentence s;
    ``label`` names the label column (or is None for unlabelled text).
    """

    columns: tuple[str, ...]
    sentences: list[list[tuple[str, ...]]]
    path: str = ""
    label: str | None = None

    @property
    def n_tokens(self) -> int:
        return sum(len(s) for s in self.sentences)

    def column(self, name: str) -> int:
        try:
            return self.columns.index(name)
        except ValueError:
            raise DataFormatError(
                self.path,
                f"no column {name!r}; columns are: {', '.join(self.columns)}",
            ) from None

    def labels(self) -> list[list[str]]:
        if self.label is None:
            raise DataFormatError(self.path, "this corpus has no label column")
        j = self.column(self.label)
        return [[tok[j] for tok in sent] for sent in self.sentences]

    def label_set(self) -> list[str]:
        return sorted({lab for sent in self.labels() for lab in sent})


def open_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> io.TextIOBase:
    """Open a text file, gunzipping it if it starts with the gzip magic bytes."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            magic = f.read(2)
    except IsADirectoryError:
        raise DataFormatError(p, "is a directory, expected a file") from None
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding=encoding, newline=None)
    return open(p, encoding=encoding, newline=None)


def _lines(path: str | os.PathLike[str], encoding: str) -> Iterator[tuple[int, str]]:
    try:
        with open_text(path, encoding) as f:
            for number, line in enumerate(f, start=1):
                yield number, line.rstrip("\r\n")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFormatError(path, f"not a valid gzip file ({exc})") from None
    except UnicodeDecodeError as exc:
        # The decoder saw one buffered chunk: its offset is within that chunk, and it
        # knows no line. Find both by decoding the raw lines again.
        line, offset, reason = _undecodable(path, encoding, exc)
        where = f"byte {offset}" + (" of the decompressed content" if _is_gzip(path) else "")
        raise DataFormatError(
            path,
            f"cannot be decoded as {encoding} ({reason} at {where}); the file may use another "
            "encoding: give it with --encoding (e.g. --encoding latin-1)",
            line,
        ) from None


def _is_gzip(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _undecodable(
    path: str | os.PathLike[str], encoding: str, exc: UnicodeDecodeError
) -> tuple[int | None, int, str]:
    """(line, byte offset in the file, reason) of the first byte ``encoding`` rejects.

    Lines are split at b"\\n", which is exact for ASCII-compatible encodings (the ones
    where a line can be named at all); should the raw pass not fail, the chunk-relative
    position of the original error is all there is.
    """
    decoder = codecs.getincrementaldecoder(encoding)()
    offset = 0
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                decoder.decode(raw)
            except UnicodeDecodeError as err:
                return number, offset + err.start, err.reason
            offset += len(raw)
    return None, exc.start, exc.reason


def _sentences(
    path: str | os.PathLike[str],
    encoding: str,
    token: Callable[[int, str], tuple[str, ...] | None],
) -> list[list[tuple[str, ...]]]:
    """The file's token lines grouped into sentences at blank lines, the one layout of
    CoNLL and CoNLL-U; ``token(line number, line)`` parses a non-blank line (None: skip)."""
    sentences: list[list[tuple[str, ...]]] = []
    current: list[tuple[str, ...]] = []
    for number, line in _lines(path, encoding):
        if not line.strip():
            if current:
                sentences.append(current)
                current = []
            continue
        fields = token(number, line)
        if fields is not None:
            current.append(fields)
    if current:
        sentences.append(current)
    if not sentences:
        raise DataFormatError(path, "contains no sentence (empty file?)")
    return sentences


def read_conll(
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    label: str | int | None = -1,
    *,
    encoding: str = "utf-8",
    docstart: str = "drop",
    separator: str | None = None,
) -> Corpus:
    """Read a CoNLL column file: one token per line, blank lines between sentences.

    Parameters
    ----------
    path : path
        Plain text or gzip.
    columns : sequence of str, optional
        Column names (default ``c0, c1, …``); their number must match every line.
    label : str, int or None
        The label column, by name or position (-1: the last); None for unlabelled text.
    docstart : {"drop", "keep"}
        ``-DOCSTART-`` tokens (CoNLL-2002/2003 document markers) are dropped, whether
        they sit alone between blank lines or start a sentence; ``"keep"`` keeps them.
    separator : str, optional
        Column separator; default: any run of whitespace.
    """
    if docstart not in ("drop", "keep"):
        raise ValueError("docstart must be 'drop' or 'keep'")
    width = len(columns) if columns is not None else None
    first_line = None

    def token(number: int, line: str) -> tuple[str, ...] | None:
        nonlocal width, first_line
        fields = tuple(line.split(separator) if separator else line.split())
        if docstart == "drop" and fields[0] == "-DOCSTART-":
            return None
        if width is None:
            width = len(fields)
            first_line = number
        if len(fields) != width:
            expected = (
                f"{width} ({' '.join(columns)})" if columns else f"{width} as on line {first_line}"
            )
            raise DataFormatError(
                path, f"has {len(fields)} columns, expected {expected}: {line[:80]!r}", number
            )
        return fields

    sentences = _sentences(path, encoding, token)
    names = tuple(columns) if columns is not None else tuple(f"c{j}" for j in range(width or 0))
    label_name = None
    if label is not None:
        if isinstance(label, int):
            if not -len(names) <= label < len(names):
                raise DataFormatError(
                    path, f"label column {label} out of range for {len(names)} columns"
                )
            label_name = names[label]
        else:
            if label not in names:
                raise DataFormatError(
                    path, f"no label column {label!r}; columns are: {', '.join(names)}"
                )
            label_name = label
    return Corpus(names, sentences, os.fspath(path), label_name)


CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


def read_conllu(
    path: str | os.PathLike[str], label: str = "xpos", *, encoding: str = "utf-8"
) -> Corpus:
    """Read CoNLL-U (Universal Dependencies): words only, ``label`` = ``xpos`` or ``upos``.

    Comment lines (``#``), multiword-token ranges (``3-4``) and empty nodes (``8.1``) are
    skipped; every word line must have the 10 tab-separated fields.
    """
    if label not in CONLLU_COLUMNS:
        raise DataFormatError(
            path, f"no column {label!r}; CoNLL-U columns are: {', '.join(CONLLU_COLUMNS)}"
        )

    def token(number: int, line: str) -> tuple[str, ...] | None:
        if line.startswith("#"):
            return None
        fields = tuple(line.split("\t"))
        if len(fields) != 10:
            raise DataFormatError(
                path, f"has {len(fields)} tab-separated fields, CoNLL-U needs 10", number
            )
        tok_id = fields[0]
        if "-" in tok_id or "." in tok_id:
            return None
        if not tok_id.isdigit():
            raise DataFormatError(path, f"bad token id {tok_id!r}", number)
        return fields

    sentences = _sentences(path, encoding, token)
    return Corpus(CONLLU_COLUMNS, sentences, os.fspath(path), label)


#: The column templates read the token text from, in every format.
WORD_COLUMN = "word"


def read_conllu_words(
    path: str | os.PathLike[str], label: str = "xpos", *, encoding: str = "utf-8"
) -> Corpus:
    """:func:`read_conllu` with the ``form`` column named ``word``, as templates expect.

    What the featurizer, ``crfopt tag`` and the CoNLL-U datasets read: a CoNLL-U corpus
    then featurizes with the same templates as a CoNLL one.
    """
    raw = read_conllu(path, label=label, encoding=encoding)
    columns = tuple(WORD_COLUMN if c == "form" else c for c in raw.columns)
    return Corpus(columns, raw.sentences, raw.path, raw.label)


@dataclass(frozen=True)
class DenseSequences:
    """Sequences with dense embeddings (OCR): lengths, labels 0..K-1, X, fold per sequence."""

    lengths: np.ndarray
    labels: np.ndarray
    X: np.ndarray
    folds: np.ndarray
    label_names: tuple[str, ...]

    def select(self, keep: np.ndarray) -> DenseSequences:
        """The sequences whose mask entry is True."""
        offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        rows = (
            np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in np.flatnonzero(keep)])
            if keep.any()
            else np.zeros(0, dtype=np.int64)
        )
        return DenseSequences(
            self.lengths[keep], self.labels[rows], self.X[rows], self.folds[keep], self.label_names
        )


LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")


def read_letter_data(path: str | os.PathLike[str]) -> DenseSequences:
    """Read the upstream OCR file ``letter.data(.gz)`` (Taskar et al. 2004).

    Tab-separated: id, letter, next_id, word_id, position, fold, then 128 pixels p_0…p_127.
    A word ends where ``next_id`` is -1.
    """
    lengths, labels, rows, folds = [], [], [], []
    count = 0
    for number, line in _lines(path, "ascii"):
        if not line.strip():
            continue
        fields = line.split("\t")
        if fields and fields[-1] == "":
            fields = fields[:-1]  # the upstream lines end with a tab
        if len(fields) != 6 + 128:
            raise DataFormatError(
                path,
                f"has {len(fields)} tab-separated fields, expected 134 (id, letter, "
                "next_id, word_id, position, fold, p_0..p_127)",
                number,
            )
        letter = fields[1]
        if letter not in LETTERS:
            raise DataFormatError(path, f"letter {letter!r} is not one of a..z", number)
        try:
            next_id = int(fields[2])
            fold = int(fields[5])
            pixels = [int(v) for v in fields[6:]]
        except ValueError:
            raise DataFormatError(
                path, "next_id, fold and pixels must be integers", number
            ) from None
        if any(p not in (0, 1) for p in pixels):
            raise DataFormatError(path, "pixels must be 0 or 1", number)
        labels.append(LETTERS.index(letter))
        rows.append(pixels)
        count += 1
        if next_id == -1:
            lengths.append(count)
            folds.append(fold)
            count = 0
    if count:
        raise DataFormatError(
            path, "the last word does not end (next_id of its last letter is not -1)"
        )
    if not lengths:
        raise DataFormatError(path, "contains no word (empty file?)")
    return DenseSequences(
        np.asarray(lengths, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
        np.asarray(rows, dtype=np.float64),
        np.asarray(folds, dtype=np.int64),
        LETTERS,
    )


@dataclass(frozen=True)
class MatSequences:
    """Sequences of a SAG4CRF ``.mat`` file: per-token column values, labels, folds."""

    lengths: np.ndarray
    labels: np.ndarray  # 1-based, as in the file
    values: np.ndarray  # tokens × columns, 0 = absent
    folds: np.ndarray | None  # per sequence


def read_sag4crf_mat(path: str | os.PathLike[str], *, max_label: int = 65535) -> MatSequences:
    """Read a SAG4CRF / sdca4crf ``.mat`` file (docs/algorithms.md §1.8).

    ``X`` has one row per token plus a separator row after each sequence; ``y`` holds
    labels 1..K (K ≤ ``max_label``) and 0 on separator rows; an optional ``fold`` gives
    the fold per token. Sequences of length 0 are dropped.
    """
    import scipy.io

    try:
        m = scipy.io.loadmat(os.fspath(path))
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise DataFormatError(path, f"not a readable MATLAB .mat file ({exc})") from None
    for var in ("X", "y"):
        if var not in m:
            raise DataFormatError(
                path,
                f"variable {var!r} missing (found: "
                f"{', '.join(k for k in m if not k.startswith('__'))})",
            )
    X = np.asarray(m["X"])
    y = np.asarray(m["y"]).ravel()
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise DataFormatError(
            path, f"variable 'X' has shape {X.shape}, expected ({y.shape[0]}, columns) to match 'y'"
        )
    if np.issubdtype(X.dtype, np.floating) and not np.all(np.isfinite(X)):
        raise DataFormatError(path, "variable 'X' has non-finite entries")
    # inf passes y == round(y) and 1e9 passes both; either would become a garbage int64
    # or a K of a billion labels, so labels are checked as integers within range.
    bad = ~np.isfinite(y) | (y < 0) | (y > max_label) | (y != np.round(y))
    if np.any(bad):
        raise DataFormatError(
            path,
            f"variable 'y' must hold integer labels 1..{max_label} and 0 on separator rows; "
            f"row {int(np.argmax(bad)) + 1} holds {float(y[np.argmax(bad)]):g}",
        )
    fold = np.asarray(m["fold"]).ravel() if "fold" in m else None
    if fold is not None and fold.shape != y.shape:
        raise DataFormatError(path, f"variable 'fold' has {fold.size} entries, 'y' {y.size}")
    sep = np.flatnonzero(y == 0)
    if len(sep) == 0 or sep[-1] != len(y) - 1:
        raise DataFormatError(
            path,
            "variable 'y' must end every sequence with a 0 separator row (the last row is not 0)",
        )
    starts = np.concatenate([[0], sep[:-1] + 1])
    lengths = sep - starts
    token = y != 0
    keep = lengths > 0
    seq_folds = None
    if fold is not None:
        seq_folds = fold[starts[keep]].astype(np.int64)
    return MatSequences(
        lengths[keep].astype(np.int64),
        y[token].astype(np.int64),
        X[token].astype(np.int64),
        seq_folds,
    )
