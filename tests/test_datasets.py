"""Built-in problems reproduce PROVENANCE.md's counts; fetching, caching, user corpora."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import crfopt
from crfopt.apps.cli import main
from crfopt.data.sources import ChecksumError, DataFile, fetch

from conftest import DATA_DIR


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One featurization cache for this module (never the user's)."""
    path = tmp_path_factory.mktemp("crfopt-cache")
    old = os.environ.get("CRFOPT_CACHE")
    os.environ["CRFOPT_CACHE"] = str(path)
    yield path
    if old is None:
        del os.environ["CRFOPT_CACHE"]
    else:
        os.environ["CRFOPT_CACHE"] = old


# name: (n, N, K, {split: (n, N)})
COUNTS = {
    "ocr": (6251, 47535, 26, {"test": (626, 4617)}),
    "conll2000": (8936, 211727, 22, {"test": (2012, 47377)}),
    "ner-nl": (15806, 202644, 9, {"testa": (2895, 37687), "test": (5195, 68875)}),
    "pos-ewt": (12544, 204577, 49, {"dev": (2001, 25147), "test": (2077, 25094)}),
    "pos-conll2000": (8936, 211727, 44, {"test": (2012, 47377)}),
    "sag4crf-conll": (2012, 47377, 23, {}),
    "sag4crf-ner": (5195, 68994, 9, {}),
    "sag4crf-pos": (5462, 129654, 45, {}),
}


@pytest.mark.data
@pytest.mark.parametrize("name", list(COUNTS))
def test_builtin_counts(cache, name):
    n, N, K, splits = COUNTS[name]
    t0 = time.perf_counter()
    p = crfopt.load_problem(name)
    first = time.perf_counter() - t0
    assert (p.n, p.n_tokens, p.n_labels) == (n, N, K)
    info = p.info()
    for split, (sn, sN) in splits.items():
        assert (info[f"{split}_n"], info[f"{split}_tokens"]) == (sn, sN)
    assert p.lam == pytest.approx(1.0 / n)
    t0 = time.perf_counter()
    q = crfopt.load_problem(name, lam=0.01)
    cached = time.perf_counter() - t0
    assert q.fingerprint != p.fingerprint and q.lam == 0.01 and q.n == n
    print(f"{name}: first load {first:.2f} s, cached load {cached:.3f} s")


@pytest.mark.data
def test_ocr_raw_file_layout(cache):
    """OCR in full: 6877 words / 52152 letters over all folds (PROVENANCE.md §1)."""
    p = crfopt.load_problem("ocr", test_fold=-7)  # no such fold: every word trains
    assert (p.n, p.n_tokens) == (6877, 52152)
    assert p.dim == 26 * (128 + 3 + 26) == 4082


@pytest.mark.data
def test_conll2000_attributes_and_template_parameter(cache):
    p = crfopt.load_problem("conll2000")
    assert p.n_attributes == 335672 and p.max_active == 19
    assert p.metadata["template"] == "chunking"
    q = crfopt.load_problem("conll2000", min_count=2)
    assert q.n_attributes < p.n_attributes


@pytest.mark.data
def test_info_names_the_sources_and_the_wsj_caveat(cache):
    res = CliRunner().invoke(main, ["info", "--problem", "pos-ewt"])
    assert res.exit_code == 0, res.output
    assert "LDC-licensed" in res.output and "en_ewt-ud-train.conllu.gz" in res.output
    assert "CC BY-SA 4.0" in res.output


@pytest.mark.data
def test_wrong_local_file_is_refused(cache, tmp_path, monkeypatch):
    fake = tmp_path / "data" / "conll2000"
    fake.mkdir(parents=True)
    (fake / "train.txt.gz").write_bytes(gzip.compress(b"a DT B-NP\n"))
    (fake / "test.txt.gz").write_bytes(gzip.compress(b"a DT B-NP\n"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "data"))
    with pytest.raises(ChecksumError, match="does not match the expected"):
        crfopt.load_problem("conll2000")


def test_user_corpus_by_path(cache, tmp_path):
    train = tmp_path / "nl.conll"
    train.write_text("De Art O\nstad N B-LOC\n\nJan N B-PER\nloopt V O\n", encoding="utf-8")
    p = crfopt.load_problem(str(train), columns="word,pos,label", template="ner", test=str(train))
    assert (p.n, p.n_tokens, p.n_labels) == (2, 4, 3)
    assert p.splits == ("train", "test")
    conllu = tmp_path / "x.conllu"
    conllu.write_text("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n")
    assert crfopt.load_problem(str(conllu)).label_names == ("UH",)
    with pytest.raises(ValueError, match="valid parameters: columns"):
        crfopt.load_problem(str(train), colums="word,label")


# ------------------------------------------------------------------------ fetch


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = lambda *a, **k: _Quiet(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_fetch_verifies_and_stores(server, tmp_path, monkeypatch):
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    payload = gzip.compress(b"a DT B-NP\n")
    (root / "train.txt.gz").write_bytes(payload)
    df = DataFile("train.txt.gz", "demo", sha256=_sha(payload), url=f"{base}/train.txt.gz")
    path = fetch(df)
    assert path.read_bytes() == payload
    assert path == Path(tmp_path / "cache" / "data" / "demo" / "train.txt.gz")


def test_fetch_plain_upstream_into_a_gz_name(server, tmp_path, monkeypatch):
    """UD distributes .conllu uncompressed; the staged copies are gzipped (PROVENANCE.md)."""
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    plain = b"1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"
    (root / "x.conllu").write_bytes(plain)
    df = DataFile(
        "x.conllu.gz", "demo", sha256="0" * 64, url=f"{base}/x.conllu", raw_sha256=_sha(plain)
    )
    path = fetch(df)
    assert gzip.decompress(path.read_bytes()) == plain


def test_fetch_wrong_checksum_leaves_nothing(server, tmp_path, monkeypatch):
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    (root / "f.gz").write_bytes(b"tampered")
    df = DataFile("f.gz", "demo", sha256="1" * 64, url=f"{base}/f.gz", raw_sha256="2" * 64)
    with pytest.raises(ChecksumError, match=r"checksum mismatch.*download was deleted"):
        fetch(df)
    folder = tmp_path / "cache" / "data" / "demo"
    assert not any(folder.rglob("*")), list(folder.rglob("*"))


def test_fetch_cli_reports_problems_without_urls(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "nothing-here"))
    res = CliRunner().invoke(main, ["fetch", "sag4crf-ner"])
    assert res.exit_code == 1 and "no download URL" in res.output
    res = CliRunner().invoke(main, ["fetch"])
    assert res.exit_code == 2 and "name the problems" in res.output


@pytest.mark.data
def test_fetch_cli_finds_staged_files(cache):
    res = CliRunner().invoke(main, ["fetch", "conll2000"])
    assert res.exit_code == 0, res.output
    assert res.output.count("present and verified") == 2
    assert str(DATA_DIR) in res.output


def test_pos_conll2000_is_registered_by_the_module_that_owns_the_conll2000_files():
    """One owner per set of raw files: the CoNLL-2000 module registers both problems read
    from them, with the very same file declarations (not a second copy of the checksums)."""
    from crfopt.optim.registry import get_registry

    reg = get_registry()
    chunk, pos = reg.problems["conll2000"], reg.problems["pos-conll2000"]
    assert pos.source == chunk.source == "builtin:conll2000"
    assert pos.files == chunk.files and all(a is b for a, b in zip(pos.files, chunk.files))
    assert reg.problems["pos-ewt"].source == "builtin:pos"
