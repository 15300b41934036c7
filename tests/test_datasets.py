"""Built-in problems reproduce their documented counts; fetching, caching, user corpora."""

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
from crfopt.data.paths import DataNotFoundError
from crfopt.data.readers import DataFormatError, read_sag4crf_mat
from crfopt.data.sources import ChecksumError, DataFile, fetch, locate

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
    """OCR in full: 6877 words / 52152 letters over all folds (docs/datasets.md "ocr")."""
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


class _Served(tuple):
    """(root, base URL), unpacked as before, plus ``requests``."""

    requests: list[str]


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A local HTTP server on tmp_path/www (no test touches the network); ``server.requests``
    lists the paths asked for, so a test can show that nothing was downloaded. Downloads
    are allowed (conftest turns them off for every other test); a test that wants them
    off sets CRFOPT_OFFLINE itself."""
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)
    root = tmp_path / "www"
    root.mkdir()
    requests: list[str] = []

    class Recording(_Quiet):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    handler = lambda *a, **k: Recording(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    served = _Served((root, f"http://127.0.0.1:{httpd.server_address[1]}"))
    served.requests = requests
    yield served
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
    """UD distributes .conllu uncompressed; the staged copies are gzipped (docs/datasets.md)."""
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
    out = " ".join(res.output.split())  # rich wraps long lines
    assert res.exit_code == 1, res.output
    assert "sag4crf/NER_test.mat not found" in out and "does not download it" in out
    assert str(tmp_path / "cache" / "data" / "sag4crf" / "NER_test.mat") in out
    assert "docs/datasets.md" in out and "PROVENANCE" not in out
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


# ------------------------------------------------- data that fetches itself


def _demo_file(root: Path, base: str, payload: bytes = b"a DT B-NP\n", **kw) -> DataFile:
    (root / "f.txt").write_bytes(payload)
    return DataFile("f.txt", "demo", sha256=_sha(payload), url=f"{base}/f.txt", **kw)


def test_locate_downloads_on_first_use_then_uses_the_cache(server, tmp_path, monkeypatch, capsys):
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)
    df = _demo_file(root, base, size=10)
    path = locate(df)
    assert path == tmp_path / "cache" / "data" / "demo" / "f.txt"
    assert path.read_bytes() == b"a DT B-NP\n"
    err = capsys.readouterr().err
    assert f"downloading demo/f.txt (0.0 kB) from {base}/f.txt" in err
    assert server.requests == ["/f.txt"]
    assert locate(df) == path and server.requests == ["/f.txt"]  # second use: no download


def test_locate_order_is_crfopt_data_then_cache(server, tmp_path, monkeypatch):
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "data"))
    df = _demo_file(root, base)
    for folder in (tmp_path / "data" / "demo", tmp_path / "cache" / "data" / "demo"):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_bytes(b"a DT B-NP\n")
    assert locate(df) == tmp_path / "data" / "demo" / "f.txt"
    (tmp_path / "data" / "demo" / "f.txt").unlink()
    assert locate(df) == tmp_path / "cache" / "data" / "demo" / "f.txt"
    assert server.requests == []


def test_offline_refuses_to_download_and_says_where_to_put_the_file(server, tmp_path, monkeypatch):
    root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("CRFOPT_OFFLINE", "1")
    df = _demo_file(root, base)
    for call in (lambda: locate(df), lambda: fetch(df)):
        with pytest.raises(DataNotFoundError) as info:
            call()
        msg = str(info.value)
        assert "demo/f.txt not found" in msg and "CRFOPT_OFFLINE" in msg
        assert str(tmp_path / "cache" / "data" / "demo" / "f.txt") in msg
        assert "docs/datasets.md" in msg and "PROVENANCE" not in msg
    assert server.requests == []
    assert isinstance(info.value, FileNotFoundError)  # old `except FileNotFoundError` holds


def test_a_file_the_licence_keeps_from_download_names_its_source(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)
    df = DataFile("x.gz", "demo", sha256="0" * 64, licence="shared task only", source="SRC")
    with pytest.raises(
        DataNotFoundError,
        match=r"does not download it \(licence: shared task "
        r"only\); obtain it from SRC\. Put the file at .*demo/x\.gz",
    ):
        locate(df)


def test_a_failed_download_is_a_data_not_found_error(server, tmp_path, monkeypatch):
    _root, base = server
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)
    df = DataFile("gone.txt", "demo", sha256="0" * 64, url=f"{base}/gone.txt")
    with pytest.raises(DataNotFoundError, match=r"download from .*gone\.txt failed .*404"):
        locate(df)
    assert not list((tmp_path / "cache" / "data" / "demo").iterdir())


def test_builtin_files_downloadable_when_the_licence_allows():
    """Every built-in file has a checksum; CoNLL-2002 and LDC-derived files have no URL
    (licence) but say where to get them; none of them points at a file we do not ship."""
    from crfopt.optim.registry import get_registry

    reg = get_registry()
    urls = {}
    for name, spec in reg.problems.items():
        for df in spec.files:
            assert len(df.sha256) == 64, (name, df)
            assert df.url or df.source, (name, df.name)
            assert "PROVENANCE" not in (spec.notes or "") + df.licence
            urls[f"{df.folder}/{df.name}"] = df.url
    assert urls["ocr/ocr.mat"].startswith("https://") and urls["sag4crf/coNLL_test.mat"]
    assert urls["conll2000/train.txt.gz"] and urls["ud_english_ewt/en_ewt-ud-train.conllu.gz"]
    assert urls["conll2002/ned.train.gz"] is None and urls["sag4crf/POS_test.mat"] is None


@pytest.mark.data
def test_ocr_downloads_itself_on_first_use(server, tmp_path, monkeypatch):
    """load_problem("ocr") with no data anywhere fetches ocr.mat (here from a local copy
    behind a local server), verifies it and builds the problem."""
    import crfopt_datasets.ocr as ocr

    root, base = server
    (root / "ocr.mat").write_bytes((DATA_DIR / "ocr" / "ocr.mat").read_bytes())
    monkeypatch.setattr(
        ocr, "OCR_MAT", ocr.OCR_MAT.__class__(**{**ocr.OCR_MAT.__dict__, "url": f"{base}/ocr.mat"})
    )
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)
    p = crfopt.load_problem("ocr")
    assert (p.n, p.n_labels) == (6251, 26)
    assert server.requests == ["/ocr.mat"]
    assert (tmp_path / "cache" / "data" / "ocr" / "ocr.mat").is_file()


# ------------------------------------------------------------- .mat labels


def _write_mat(path: Path, y: list[float]) -> Path:
    import numpy as np
    import scipy.io

    y_arr = np.array(y, dtype=np.float64)[:, None]
    scipy.io.savemat(path, {"X": np.ones((len(y), 3)), "y": y_arr})
    return path


@pytest.mark.parametrize("bad", [float("inf"), 1e9, 2.5, -1.0, float("nan")])
def test_mat_reader_refuses_non_integer_or_out_of_range_labels(tmp_path, bad):
    path = _write_mat(tmp_path / "bad.mat", [1, bad, 0])
    with pytest.raises(DataFormatError, match=r"bad\.mat: variable 'y' must hold integer labels"):
        read_sag4crf_mat(path, max_label=26)
    good = read_sag4crf_mat(_write_mat(tmp_path / "ok.mat", [1, 26, 0, 3, 0]), max_label=26)
    assert good.labels.tolist() == [1, 26, 3]
    with pytest.raises(DataFormatError, match="row 2 holds 27"):
        read_sag4crf_mat(_write_mat(tmp_path / "k.mat", [1, 27, 0]), max_label=26)
