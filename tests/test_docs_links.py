"""No file of the project cites a document the project does not ship.

Code, docstrings and docs once cited ALGORITHMS.md, DESIGN.md, STYLE.md, PROVENANCE.md and
BASELINES.md about 40 times, and none of them was in the repository or the wheel (issue 21
item 5). These tests scan every git-tracked .py/.md/.toml/.ini file for those names, for
paths into ../shared (outside the repository), for `docs/NAME.md` / `reports/NAME.md`
references whose file does not exist, and for `docs/algorithms.md §X.Y` citations of a
section docs/algorithms.md does not have.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = ROOT / "docs" / "algorithms.md"
SUFFIXES = ("*.py", "*.md", "*.toml", "*.ini")
UNSHIPPED = ("ALGORITHMS.md", "DESIGN.md", "STYLE.md", "PROVENANCE.md", "BASELINES.md")
# ../shared/datasets is where the tests find the raw data (CRFOPT_DATA's default in tox.ini
# and conftest.py) and ../shared/reference/sdca4crf where the performance benchmark finds
# the reference SDCA code it times (never copied in): locations of inputs, not documents.
# Any other path into ../shared is.
SHARED = re.compile(r"\.\./shared(?!/datasets\b|/reference/sdca4crf\b)")
DOC_REF = re.compile(r"(?<![\w./-])((?:docs|reports)/[\w./-]*?\.md)\b")
# "docs/algorithms.md §3.4", "§3.4–3.7", "§§1–5", "§5.1–§5.9", "§1.5, §3.3", "§3.1-3.3"
SECTION = r"§{1,2}\d+(?:\.\d+)*(?:\s*[–-]\s*§?\d+(?:\.\d+)*)?"
CITATION = re.compile(rf"algorithms\.md[`\"']?,?\s+({SECTION}(?:(?:,\s*|\s+and\s+){SECTION})*)")


def tracked_files() -> list[Path]:
    """The git-tracked files this scan covers (this file excluded: it names the culprits)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", *SUFFIXES],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:  # an sdist has no .git
        pytest.skip(f"not a git checkout ({exc}): cannot list the tracked files")
    files = [ROOT / name for name in out.split("\0") if name]
    return [f for f in files if f.is_file() and f.resolve() != Path(__file__).resolve()]


def lines_of(path: Path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        yield f"{path.relative_to(ROOT)}:{number}", line


def algorithms_sections(text: str) -> set[str]:
    """Section numbers of docs/algorithms.md: its numbered headings ("## 3. Optimizers",
    "### 3.4 SAG …") and the numbered entries of its decision log ("- **7.1 Max-gap …"),
    which the page itself says are cited as §7.1 … §7.13."""
    sections = set(re.findall(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s", text, flags=re.M))
    sections |= set(re.findall(r"^-\s+\*\*(\d+\.\d+)\b", text, flags=re.M))
    return sections


def expand(citation: str) -> list[str]:
    """'§3.4–3.7' → 3.4, 3.5, 3.6, 3.7; '§§1–5' → 1 … 5; '§2' → 2."""
    found = []
    for m in re.finditer(r"§{1,2}(\d+(?:\.\d+)*)(?:\s*[–-]\s*§?(\d+(?:\.\d+)*))?", citation):
        first, last = m.group(1), m.group(2)
        if last is None:
            found.append(first)
            continue
        head, _, a = first.rpartition(".")
        head_b, _, b = last.rpartition(".")
        if head != head_b or int(b) < int(a):
            raise ValueError(f"cannot expand the range {m.group(0)!r}")
        prefix = f"{head}." if head else ""
        found += [f"{prefix}{k}" for k in range(int(a), int(b) + 1)]
    return found


def test_expand_reads_every_citation_form():
    assert expand("§3.4–3.7") == ["3.4", "3.5", "3.6", "3.7"]
    assert expand("§5.1–§5.9") == [f"5.{k}" for k in range(1, 10)]
    assert expand("§§1–5") == ["1", "2", "3", "4", "5"]
    assert expand("§3.1-3.3, §1.5") == ["3.1", "3.2", "3.3", "1.5"]
    m = CITATION.search("see docs/algorithms.md §1.5, §3.3 and §7.2: the rule")
    assert m is not None and expand(m.group(1)) == ["1.5", "3.3", "7.2"]


def test_algorithms_sections_are_parsed_from_the_page():
    sections = algorithms_sections(ALGORITHMS.read_text(encoding="utf-8"))
    # the page's own table of contents, as its introduction states it
    assert {"0", "1", "1.8", "3.4", "3.10", "5.9", "6", "9"} <= sections
    assert {f"7.{k}" for k in range(1, 16)} <= sections
    assert "3.16" in sections and "3.17" not in sections and "7.16" not in sections


def test_no_file_cites_an_unshipped_document():
    found = []
    for path in tracked_files():
        for where, line in lines_of(path):
            found += [f"{where}: {name}" for name in UNSHIPPED if name in line]
            if SHARED.search(line):
                found.append(f"{where}: a path into ../shared, outside the repository")
            for ref in DOC_REF.findall(line):
                if not (ROOT / ref).is_file():
                    found.append(f"{where}: {ref} does not exist")
    assert not found, "citations of documents the project does not ship:\n" + "\n".join(found)


def test_every_algorithms_citation_names_an_existing_section():
    sections = algorithms_sections(ALGORITHMS.read_text(encoding="utf-8"))
    cited, bad = 0, []
    for path in tracked_files():
        for where, line in lines_of(path):
            for m in CITATION.finditer(line):
                for section in expand(m.group(1)):
                    cited += 1
                    if section not in sections:
                        bad.append(f"{where}: docs/algorithms.md §{section} ({m.group(0)!r})")
    assert cited > 50  # the scan reads the citations, not nothing
    assert not bad, (
        "docs/algorithms.md has no such section (its sections: "
        f"{', '.join(sorted(sections, key=lambda s: [int(x) for x in s.split('.')]))}):\n"
        + "\n".join(bad)
    )


# ---- the documentation site (mkdocs.yml; tox -e docs) ---------------------------------------


def build_site(tmp_path: Path, extra_line: str = "") -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of a copy of docs/ (EXTRA_LINE appended to its index.md),
    with mkdocs.yml's own settings and the sources read from this checkout."""
    import yaml

    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mathjax", reason="the docs extra is not installed")
    import shutil

    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a", encoding="utf-8") as f:
        f.write(extra_line)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(tmp_path / "site")
    config["hooks"] = [str(docs / Path(h).relative_to("docs")) for h in config["hooks"]]
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )


def test_docs_site_builds_without_warning(tmp_path):
    res = build_site(tmp_path)
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    site = tmp_path / "site"
    assert (site / "assets" / "mathjax" / "tex-chtml.js").is_file()  # maths offline
    api = (site / "api" / "running" / "index.html").read_text(encoding="utf-8")
    assert "Run one optimizer on one problem" in api  # generated from run()'s docstring
    assert ":func:" not in api  # Sphinx roles rendered as code
    # every $…$ / $$…$$ of the docs became maths: a dollar left in the text is a formula
    # arithmatex did not recognise (e.g. $$ inside a paragraph, a space before the closing $)
    stray = []
    for page in site.rglob("*.html"):
        html = re.sub(
            r"<(code|pre|script)\b.*?</\1>", "", page.read_text(encoding="utf-8"), flags=re.S
        )
        html = re.sub(r'<(span|div) class="arithmatex">.*?</\1>', "", html, flags=re.S)
        text = re.sub(r"<[^>]+>", "", html)
        stray += [
            f"{page.relative_to(site)}: {m.group(0)!r}"
            for m in re.finditer(r".{0,40}\$.{0,40}", text)
        ]
    assert not stray, "maths not rendered:\n" + "\n".join(stray)


def test_docs_site_build_fails_on_a_broken_link(tmp_path):
    res = build_site(tmp_path, "\nSee [the missing page](missing.md).\n")
    assert res.returncode != 0
    assert "missing.md" in res.stderr, res.stderr
