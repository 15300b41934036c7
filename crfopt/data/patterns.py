"""Pattern files of CRF++ and Wapiti, read unchanged, and their features as crfopt's.

A pattern file (CRF++ calls it a template) lists one *pattern* a line. Applied at a token,
a pattern gives a string — its literal text with every macro replaced by what the macro
reads — called an *observation*; its first character says what the observation weighs:

* **unigram** (CRF++ ``U…``, Wapiti ``u…``): one weight per (observation, label). That is
  exactly a crfopt attribute: emission features are attribute × label, so the observation
  string becomes the attribute's name (``U02:Confidence``, ``u:wrd-1 X=rockwell``).
* **bigram** (CRF++ ``B…``, Wapiti ``b…``): one weight per (observation, previous label,
  label), at every position but the first. A bigram pattern without macros (the bare
  ``B`` line) observes the same string everywhere, so its weights are crfopt's K × K
  transition block. A bigram pattern with macros — a *bigram-observation* pattern — needs
  weights crfopt's model does not have yet: the reader keeps it, and
  :meth:`PatternTemplate.require_supported` refuses a template that has one, naming its
  lines (nothing is dropped silently).
* **both** (Wapiti ``*…``): the unigram and the bigram of one observation.

Macros (``row``/``off`` relative to the token, ``col`` the 0-based column of the data file,
the label being its last column):

* CRF++: ``%x[row,col]`` only; row within −8..8, no spaces.
* Wapiti: ``%x[off,col]`` the token; ``%t[off,col,"re"]`` ``true``/``false`` as the
  regular expression matches it or not; ``%m[off,col,"re"]`` the first substring ``re``
  matches (empty if none); the upper-case ``%X``/``%T``/``%M`` lower-case their result;
  ``[@off,col]`` counts from the sentence's start (``@1`` is the first token, ``@-1`` the
  last). Text between macros, such as the ``/`` of ``%x[-1,0]/%x[0,0]``, is kept verbatim.

Outside the sentence a macro reads a marker, as each tool does: CRF++ ``_B-1``…``_B-8``
before, ``_B+1``…``_B+8`` after; Wapiti ``_x-1``…``_x-4`` then ``_x-#``, and ``_x+1``…
``_x+4`` then ``_x+#``. Wapiti's ``%t``/``%m`` test the marker itself.

Comments: CRF++ skips blank lines and lines starting with ``#``; Wapiti cuts every line at
its first ``#`` and drops trailing blanks, and reads the kind from the first character
case-insensitively (``U:`` is ``u:``).

Wapiti's regular expressions are its own small dialect, reproduced here: ``.`` any
character, ``\\d \\a \\w \\l \\u \\p \\s`` (digit, letter, letter or digit, lower, upper,
punctuation, space; upper-case for the complement) in the C locale, i.e. ASCII only,
``\\`` escaping any other character, ``*`` (shortest first) and ``?`` after an atom,
``^``/``$`` anchors at the ends. Wapiti reads bytes where crfopt reads characters: on
text beyond ASCII in UTF-8, ``.`` takes one character here and one byte there.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from crfopt.data.features import AttributeEncoder, Template
from crfopt.data.readers import Corpus, DataFormatError

#: the pattern-file formats; ``crfsuite`` names crfopt's own TOML/YAML templates
PATTERN_FORMATS = ("crfpp", "wapiti")
TEMPLATE_FORMATS = (*PATTERN_FORMATS, "crfsuite")
TOOL = {"crfpp": "CRF++", "wapiti": "Wapiti"}

#: CRF++'s context limit (feature.cpp, kMaxContextSize)
CRFPP_MAX_ROW = 8


class PatternWarning(UserWarning):
    """A pattern file whose meaning in crfopt differs from the tool's in a stated way."""


@dataclass(frozen=True)
class Macro:
    """One macro of a pattern: what it reads and what it does with it."""

    command: str  # "x" (the token), "t" (regexp test) or "m" (regexp match)
    offset: int
    column: int
    fold: bool = False  # Wapiti's %X/%T/%M: the result in lower case
    absolute: bool = False  # Wapiti's [@off,col]: counted from the sentence's ends
    regex: str = ""


@dataclass(frozen=True)
class Pattern:
    """One line of a pattern file: its text, kind and items (literal text or macros)."""

    text: str
    kind: str  # "unigram", "bigram" or "both"
    items: tuple[str | Macro, ...]
    line: int = 0  # in the file it was read from (0: rebuilt from a saved spec)

    @property
    def macros(self) -> tuple[Macro, ...]:
        return tuple(item for item in self.items if isinstance(item, Macro))

    @property
    def unigram(self) -> bool:
        return self.kind in ("unigram", "both")

    @property
    def bigram(self) -> bool:
        return self.kind in ("bigram", "both")


# ----------------------------------------------------------------------------- parsing


def _where(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


def _fail(source: str, line: int, text: str, message: str) -> DataFormatError:
    return DataFormatError(source or "template", f"{text!r}: {message}", line or None)


#: C's ``%i``: optional sign, then hexadecimal, octal (leading 0) or decimal
_C_INT = r"[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)"
_WAPITI_ARGS = re.compile(rf"\[(@?)\s*({_C_INT}),\s*\+?([0-9]+)")
_CRFPP_ARGS = re.compile(r"\[(-?)([0-9]*),([0-9]*)\]")


def _c_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits[:2].lower() == "0x":
        return sign * int(digits[2:], 16)
    if len(digits) > 1 and digits[0] == "0":
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def _parse_crfpp_line(text: str, line: int, source: str) -> Pattern:
    kind = {"U": "unigram", "B": "bigram"}.get(text[0])
    if kind is None:
        raise _fail(
            source,
            line,
            text,
            "unknown line type: a CRF++ template line starts with U (unigram) or B "
            "(bigram), or # for a comment",
        )
    items: list[str | Macro] = []
    literal: list[str] = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch != "%":
            literal.append(ch)
            pos += 1
            continue
        if text[pos + 1 : pos + 2] != "x":
            got = text[pos : pos + 2]
            raise _fail(
                source,
                line,
                text,
                f"unknown macro {got!r}: CRF++ knows only %x[row,col] (Wapiti's %X, %t "
                "and %m need --template-format wapiti)",
            )
        m = _CRFPP_ARGS.match(text, pos + 2)
        if m is None:
            why = f"malformed macro at column {pos + 1}: expected %x[row,col] with integer row"
            raise _fail(source, line, text, why + " and column and no spaces")
        row = int(m.group(2) or 0) * (-1 if m.group(1) else 1)
        if not -CRFPP_MAX_ROW <= row <= CRFPP_MAX_ROW:
            raise _fail(
                source,
                line,
                text,
                f"row {row} out of range: CRF++ reads rows -{CRFPP_MAX_ROW}..{CRFPP_MAX_ROW}",
            )
        if literal:
            items.append("".join(literal))
            literal = []
        items.append(Macro("x", row, int(m.group(3) or 0)))
        pos = m.end()
    if literal:
        items.append("".join(literal))
    return Pattern(text, kind, tuple(items), line)


def _regex_error(regex: str) -> str | None:
    """Why Wapiti's matcher would stop on ``regex`` (a ``*``/``?`` with nothing to
    repeat: it aborts with "unescaped * or ? in regexp"), or None."""
    i = 1 if regex.startswith("^") else 0
    while i < len(regex):
        if regex[i] == "$" and i == len(regex) - 1:
            return None
        if regex[i] in "*?":
            return f"unescaped {regex[i]!r} with nothing to repeat (write \\{regex[i]})"
        i += 2 if regex[i] == "\\" else 1
        if i < len(regex) and regex[i] in "*?":
            i += 1
    return None


def _parse_wapiti_line(original: str, line: int, source: str) -> Pattern:
    text = original[0].lower() + original[1:]  # Wapiti lower-cases the kind (rdr_loadpat)
    kind = {"u": "unigram", "b": "bigram", "*": "both"}.get(text[0])
    if kind is None:
        raise _fail(
            source,
            line,
            original,
            "unknown pattern type: a Wapiti pattern starts with u (unigram), b (bigram) or "
            "* (both) in its first column",
        )
    items: list[str | Macro] = []
    pos = 0
    while pos < len(text):
        if text[pos] != "%":
            end = text.find("%", pos)
            end = len(text) if end < 0 else end
            items.append(text[pos:end])
            pos = end
            continue
        letter = text[pos + 1 : pos + 2]
        if letter.lower() not in ("x", "t", "m"):
            raise _fail(
                source,
                line,
                original,
                f"unknown command {'%' + letter!r} at column {pos + 1}: Wapiti's are %x, %t "
                "and %m (upper case for a lower-cased result)",
            )
        command = letter.lower()
        m = _WAPITI_ARGS.match(text, pos + 2)
        if m is None:
            raise _fail(
                source,
                line,
                original,
                f"malformed arguments of %{letter} at column {pos + 1}: expected "
                f"%{letter}[offset,column] (or [@position,column]) with an integer offset "
                "and a non-negative column",
            )
        pos = m.end()
        regex = ""
        if command in ("t", "m"):
            if text[pos : pos + 2] != ',"':
                raise _fail(
                    source,
                    line,
                    original,
                    f"missing regular expression of %{letter} at column {pos + 1}: expected "
                    f'%{letter}[offset,column,"regexp"]',
                )
            start = pos = pos + 2
            while pos < len(text) and text[pos] != '"':
                pos += 2 if text[pos] == "\\" and pos + 1 < len(text) else 1
            if pos >= len(text):
                raise _fail(
                    source,
                    line,
                    original,
                    f'unterminated regular expression of %{letter}: expected a closing "',
                )
            regex = text[start:pos]
            why = _regex_error(regex)
            if why:
                raise _fail(source, line, original, f"invalid regular expression {regex!r}: {why}")
            pos += 1
        if text[pos : pos + 1] != "]":
            raise _fail(
                source,
                line,
                original,
                f"missing ] closing %{letter} at column {pos + 1}",
            )
        pos += 1
        items.append(
            Macro(
                command,
                _c_int(m.group(2)),
                int(m.group(3)),
                fold=letter != command,
                absolute=bool(m.group(1)),
                regex=regex,
            )
        )
    return Pattern(text, kind, tuple(items), line)


def _pattern_lines(text: str, fmt: str) -> list[tuple[int, str]]:
    """(line number, pattern text) of every pattern line, comments removed as the tool does."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if fmt == "crfpp":
            if raw and not raw.startswith("#"):
                out.append((number, raw))
            continue
        line = raw.split("#", 1)[0].rstrip(" \t\n\v\f\r")
        if line:
            out.append((number, line))
    return out


def parse_patterns(
    text: str, fmt: str, *, source: str = "", name: str | None = None
) -> PatternTemplate:
    """The patterns of a CRF++ (``fmt="crfpp"``) or Wapiti (``"wapiti"``) file's text.

    A malformed line raises :class:`~crfopt.data.readers.DataFormatError` naming
    ``source:line``, the line and what was expected. Warns (:class:`PatternWarning`) when
    crfopt's model will differ from the tool's: a repeated line (the tools count its
    feature twice per token, crfopt once) and a file without a bigram pattern (crfopt's
    model always has the K × K transition block).
    """
    if fmt not in PATTERN_FORMATS:
        raise ValueError(f"unknown pattern format {fmt!r}; valid: {', '.join(PATTERN_FORMATS)}")
    parse = _parse_crfpp_line if fmt == "crfpp" else _parse_wapiti_line
    patterns = tuple(parse(line, number, source) for number, line in _pattern_lines(text, fmt))
    where = source or "template"
    if not patterns:
        raise DataFormatError(where, f"no pattern in this {TOOL[fmt]} file (empty?)")
    seen: dict[str, int] = {}
    for p in patterns:
        if p.text in seen:
            warnings.warn(
                f"{_where(source, p.line)}: repeats line {seen[p.text]} ({p.text!r}); "
                f"{TOOL[fmt]} counts its feature twice per token, crfopt once",
                PatternWarning,
                stacklevel=2,
            )
        seen.setdefault(p.text, p.line)
    if not any(p.bigram for p in patterns):
        warnings.warn(
            f"{where}: no bigram pattern, so {TOOL[fmt]} would train without label "
            "transitions; crfopt's model always has its K × K transition block",
            PatternWarning,
            stacklevel=2,
        )
    stem = Path(source).stem if source else "patterns"
    return PatternTemplate(
        name=name or stem, features=(), source=source, format=fmt, patterns=patterns
    )


#: lines only Wapiti reads: its kinds in lower case or *, its other commands, absolute
#: positions, spaces or signs inside a macro, a comment after a pattern
_WAPITI_ONLY = re.compile(r"^[ub*]|%[XtTmM]|%x\[@|%x\[[^\]]*[\s+]|\s#")


def detect_format(text: str) -> str:
    """``crfpp``, ``wapiti`` or ``crfsuite`` (crfopt's TOML/YAML) from a file's content.

    A file whose lines (comments and blank lines aside) start with ``U``, ``B``, ``u``,
    ``b`` or ``*`` is a pattern file: Wapiti's when one line uses what only Wapiti reads
    (lower-case or ``*`` kinds, ``%X``/``%t``/``%m``, ``[@``, spaces in a macro, a
    comment after a pattern), else CRF++'s (Wapiti reads a CRF++ file with the same
    features, only its edge markers named ``_x…`` for ``_B…``). Anything else is TOML/YAML.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines or not any(ln[0] in "UuBb*" for ln in lines):
        return "crfsuite"
    return "wapiti" if any(_WAPITI_ONLY.search(ln) for ln in lines) else "crfpp"


def read_patterns(
    path: str | os.PathLike[str], fmt: str | None = None, *, encoding: str = "utf-8"
) -> PatternTemplate:
    """A CRF++ or Wapiti pattern file (``fmt`` None: detected by :func:`detect_format`)."""
    text = Path(path).read_text(encoding=encoding)
    fmt = fmt or detect_format(text)
    if fmt not in PATTERN_FORMATS:
        raise DataFormatError(
            path, "not a CRF++ or Wapiti pattern file (no line starts with U, B, u, b or *)"
        )
    return parse_patterns(text, fmt, source=os.fspath(path))


# ----------------------------------------------------------------------------- Wapiti's regexps


def _ascii(test: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda c: c.isascii() and test(c)


_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CLASSES: dict[str, Callable[[str], bool]] = {
    "a": _ascii(str.isalpha),
    "d": _ascii(str.isdigit),
    "l": _ascii(str.islower),
    "p": lambda c: c in _PUNCT,
    "s": lambda c: c in " \t\n\v\f\r",
    "u": _ascii(str.isupper),
    "w": _ascii(str.isalnum),
}
_CLASSES.update({k.upper(): (lambda c, f=f: not f(c)) for k, f in list(_CLASSES.items())})


def _match_one(regex: str, i: int, s: str, j: int) -> bool:
    """Whether the atom at ``regex[i]`` matches ``s[j]`` (rex_matchit)."""
    if j >= len(s):
        return False
    c = regex[i]
    if c == ".":
        return True
    if c == "\\":
        e = regex[i + 1]
        test = _CLASSES.get(e)
        return test(s[j]) if test else e == s[j]
    return c == s[j]


def _match_here(regex: str, i: int, s: str, j: int) -> int | None:
    """End of a match of ``regex[i:]`` starting at ``s[j]``, or None (rex_matchme)."""
    while True:
        if i == len(regex):
            return j
        if regex[i] == "$" and i == len(regex) - 1:
            return j if j == len(s) else None
        nxt = i + (2 if regex[i] == "\\" else 1)
        quant = regex[nxt] if nxt < len(regex) else ""
        if quant == "*":  # shortest first, as Wapiti
            k = j
            while True:
                end = _match_here(regex, nxt + 1, s, k)
                if end is not None:
                    return end
                if not _match_one(regex, i, s, k):
                    return None
                k += 1
        if quant == "?":
            if _match_one(regex, i, s, j):
                end = _match_here(regex, nxt + 1, s, j + 1)
                if end is not None:
                    return end
            i = nxt + 1
            continue
        if not _match_one(regex, i, s, j):
            return None
        i, j = nxt, j + 1


@lru_cache(maxsize=1 << 16)
def wapiti_search(regex: str, s: str) -> tuple[int, int] | None:
    """(start, end) of the first match of Wapiti's regular expression ``regex`` in ``s``,
    or None (rex_match: leftmost start, ``^`` anchors at the start)."""
    if regex.startswith("^"):
        end = _match_here(regex, 1, s, 0)
        return None if end is None else (0, end)
    for start in range(len(s) + 1):
        end = _match_here(regex, 0, s, start)
        if end is not None:
            return start, end
    return None


# ----------------------------------------------------------------------------- features

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _marker(fmt: str, pos: int, T: int) -> str:
    """The string a macro reads at ``pos`` outside a sentence of length ``T``."""
    if fmt == "crfpp":
        return f"_B-{-pos}" if pos < 0 else f"_B+{pos - T + 1}"
    if pos < 0:
        return f"_x-{-pos}" if -pos <= 4 else "_x-#"
    return f"_x+{pos - T + 1}" if pos - T + 1 <= 4 else "_x+#"


Token = Sequence[str]
Observer = Callable[[Sequence[Token], int], str]


def _observer(pattern: Pattern, fmt: str) -> Observer:
    """The function giving ``pattern``'s observation at token t of a sentence."""

    def read(macro: Macro, sent: Sequence[Token], t: int) -> str:
        T = len(sent)
        if macro.absolute:
            pos = macro.offset + T if macro.offset < 0 else macro.offset - 1
        else:
            pos = t + macro.offset
        value = sent[pos][macro.column] if 0 <= pos < T else _marker(fmt, pos, T)
        if macro.command == "t":
            value = "false" if wapiti_search(macro.regex, value) is None else "true"
        elif macro.command == "m":
            found = wapiti_search(macro.regex, value)
            value = "" if found is None else value[found[0] : found[1]]
        return value.translate(_ASCII_LOWER) if macro.fold else value

    parts = pattern.items
    if all(isinstance(p, str) for p in parts):
        constant = "".join(parts)  # type: ignore[arg-type]
        return lambda sent, t: constant
    if len(parts) == 2 and isinstance(parts[0], str) and isinstance(parts[1], Macro):
        prefix, macro = parts
        if macro.command == "x" and not macro.fold and not macro.absolute:
            off, col = macro.offset, macro.column

            def simple(sent: Sequence[Token], t: int) -> str:
                pos = t + off
                if 0 <= pos < len(sent):
                    return prefix + sent[pos][col]
                return prefix + _marker(fmt, pos, len(sent))

            return simple

    def general(sent: Sequence[Token], t: int) -> str:
        return "".join(p if isinstance(p, str) else read(p, sent, t) for p in parts)

    return general


@dataclass(frozen=True)
class PatternTemplate(Template):
    """A CRF++ or Wapiti pattern file as a crfopt template.

    Its unigram patterns give the attributes (the observation strings); its one constant
    bigram pattern is crfopt's transition block. Columns are read by position, the label
    being the data file's last column, as both tools do. Pattern files define the whole
    feature map: crfopt adds its bias block only when asked (:attr:`default_bias`).
    """

    format: str = "wapiti"
    patterns: tuple[Pattern, ...] = field(default=())

    @property
    def columns(self) -> tuple[str, ...]:
        return ()  # read by position, see check_corpus

    @property
    def default_bias(self) -> bool:
        return False

    @property
    def unigram_patterns(self) -> tuple[Pattern, ...]:
        return tuple(p for p in self.patterns if p.unigram)

    @property
    def transition_pattern(self) -> Pattern | None:
        """The first bigram pattern without macros: crfopt's K × K transition block."""
        return next((p for p in self.patterns if p.bigram and not p.macros), None)

    @property
    def bigram_observation_patterns(self) -> tuple[Pattern, ...]:
        """Bigram patterns crfopt's model has no weights for: those with macros, and any
        constant one after the first (a second copy of the transition block)."""
        first = self.transition_pattern
        return tuple(p for p in self.patterns if p.bigram and p is not first)

    @property
    def n_columns(self) -> int:
        """Observation columns the patterns read (1 + the largest column index)."""
        return 1 + max((m.column for p in self.patterns for m in p.macros), default=-1)

    def require_supported(self) -> None:
        unsupported = self.bigram_observation_patterns
        if not unsupported:
            return
        first = unsupported[0]
        lines = ", ".join(str(p.line) for p in unsupported if p.line)
        fix = "u:" if self.format == "wapiti" else "U"
        raise DataFormatError(
            self.source or self.name,
            f"{first.text!r} is a bigram-observation pattern (a weight per observation × "
            "previous label × label), which crfopt's model does not support yet: its "
            "transitions are label × label only (the one bare bigram pattern). "
            + (f"Lines {lines} are of this kind. " if len(unsupported) > 1 and lines else "")
            + f"Remove them, or keep their unigram half by starting them with {fix}",
            first.line or None,
        )

    def check_corpus(self, corpus: Corpus, split: str, label: str) -> None:
        if label not in corpus.columns:
            return  # featurize names the missing label column
        if corpus.columns[-1] != label:
            raise DataFormatError(
                corpus.path,
                f"the label column {label!r} is not the last: {TOOL[self.format]} patterns "
                "read columns by position with the label last "
                f"(columns: {', '.join(corpus.columns)})",
            )
        width = len(corpus.columns) - 1
        for p in self.patterns:
            bad = [m.column for m in p.macros if m.column >= width]
            if bad:
                raise DataFormatError(
                    corpus.path,
                    f"{_where(self.source, p.line)}: pattern {p.text!r} reads column "
                    f"{max(bad)}, but the {split} file has {width} observation column(s) "
                    f"(0..{width - 1}) before its label",
                )

    @cached_property
    def _observers(self) -> list[Observer]:
        return [_observer(p, self.format) for p in self.unigram_patterns]

    def token_attributes(
        self, sent: Sequence[Token], col_index: Mapping[str, int] | None = None
    ) -> list[list[str]]:
        observers = self._observers
        return [[observe(sent, t) for observe in observers] for t in range(len(sent))]

    def encoder(self, attributes: Sequence[str]) -> AttributeEncoder:
        # a pattern's attribute is an observation string, not label=value: no tables
        return AttributeEncoder(self, attributes)

    def spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "format": self.format,
            "patterns": [p.text for p in self.patterns],
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], source: str = "") -> PatternTemplate:
        fmt = spec.get("format")
        lines = spec.get("patterns")
        if fmt not in PATTERN_FORMATS or not isinstance(lines, list) or not lines:
            raise ValueError(
                f"{source or 'template'}: a pattern template needs 'format' "
                f"({' or '.join(PATTERN_FORMATS)}) and a non-empty 'patterns' list"
            )
        parse = _parse_crfpp_line if fmt == "crfpp" else _parse_wapiti_line
        patterns = tuple(parse(str(text), 0, source) for text in lines)
        return cls(
            name=str(spec.get("name", "patterns")),
            features=(),
            source=source,
            format=fmt,
            patterns=patterns,
        )

    def rules(self) -> list[str]:
        """One line per pattern, with what crfopt makes of it (``crfopt info``)."""
        transition = self.transition_pattern
        out = [f"{TOOL[self.format]} patterns, columns by position, label last"]
        for p in self.patterns:
            if p.bigram and p is not transition:
                role = "bigram-observation (not supported yet)"
            elif p is transition:
                role = "attributes + transitions" if p.unigram else "transitions (K × K)"
            else:
                role = "attributes"
            out.append(f"{p.text}  → {role}")
        return out
