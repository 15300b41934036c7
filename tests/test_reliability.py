"""Reliability: faults in optimizers, in the machine, and in what users type.

Each case runs a small grid in which one optimizer misbehaves (hangs, returns NaN,
raises) and checks that it is marked and that the rest of the grid completes; then disk
and permission failures; then hypothesis fuzzing of the --set parser.
"""

from __future__ import annotations

import contextlib
import errno

import pytest
from click.testing import CliRunner
from doubles import scripted as doubles
from hypothesis import given, settings
from hypothesis import strategies as st

import crfopt
from crfopt.apps.cli import main, parse_sets
from crfopt.bench.compare import parse_optimizer, split_list
from crfopt.optim.contract import ParameterError


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    return doubles.plugin_dir(tmp_path)


def test_nan_raise_and_hang_are_marked_and_the_grid_completes(tmp_path, plugin_dir):
    out = tmp_path / "grid"
    table = crfopt.compare(
        "synthetic",
        [
            "scripted[fault=hang]",
            "scripted[fault=nan]",
            "scripted[fault=memory]",
            "scripted",
            "lbfgs",
        ],
        passes=2,
        out=out,
        plugin_dirs=[str(plugin_dir)],
        timeout=20.0,
        problem_params={"synthetic": {"n": 40}},
    )
    final = table.sort_values("checkpoint").groupby("optimizer")["status"].last().to_dict()
    assert final == {
        "scripted[fault=hang]": "failed",
        "scripted[fault=nan]": "diverged",
        "scripted[fault=memory]": "failed",
        "scripted": "budget",
        "lbfgs": "budget",
    }
    runs = table.attrs["runs"]
    errors = {
        table.loc[table["run_id"] == rid, "optimizer"].iloc[0]: meta.get("error") or ""
        for rid, meta in runs.items()
    }
    assert "hard limit of 20 s" in errors["scripted[fault=hang]"]
    assert "simulated allocation failure" in errors["scripted[fault=memory]"]
    hang_rows = table[table["optimizer"] == "scripted[fault=hang]"]
    assert len(hang_rows) >= 2  # checkpoints before the hang are kept
    # a rerun recomputes nothing, a retry reruns only the failed ones
    again = crfopt.compare(
        "synthetic",
        ["scripted[fault=nan]", "scripted", "lbfgs"],
        passes=2,
        out=out,
        plugin_dirs=[str(plugin_dir)],
        problem_params={"synthetic": {"n": 40}},
    )
    assert again["run_id"].nunique() == 3


def test_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", no_space)
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--problem",
            "synthetic",
            "--optimizers",
            "lbfgs",
            "--passes",
            "1",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ],
    )
    assert res.exit_code == 1
    assert "cannot write results" in res.output and "No space left on device" in res.output
    # no temporary or partial file; the run's lock file stays (.locks/): deleting a lock
    # file that another process may be waiting on would let two processes hold the lock
    left = sorted(p.relative_to(tmp_path / "o") for p in (tmp_path / "o").rglob("*"))
    assert all(p.parts[0] == ".locks" for p in left), left
    assert all(p.suffix == ".lock" for p in left if p.is_file()), left


def test_read_only_output_folder_fails_before_any_work(tmp_path, monkeypatch):
    """A folder we may not write to is refused up front, not after the first run.

    Simulated (the tests may run as root, who ignores permissions): creating a file in
    the output folder raises EACCES, as it does in a read-only folder."""
    import importlib
    import os
    import tempfile

    # crfopt.compare is also the function's name in the package namespace
    compare_module = importlib.import_module("crfopt.bench.compare")

    ran = []
    real_mkstemp = tempfile.mkstemp

    def denied(*a, dir=None, **k):
        if dir is not None and str(tmp_path / "ro") in str(dir):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real_mkstemp(*a, dir=dir, **k)

    monkeypatch.setattr(compare_module.tempfile, "mkstemp", denied)
    monkeypatch.setattr(compare_module, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(
        main,
        [
            *("compare", "--problem", "synthetic", "--optimizers", "lbfgs,sdca"),
            *("--passes", "1", "--out", str(tmp_path / "ro"), "--quiet"),
        ],
    )
    assert res.exit_code == 1, res.output
    assert "cannot write results" in res.output and "Permission denied" in res.output
    assert ran == [] and not [f for f in os.listdir(tmp_path / "ro")]


def test_output_path_that_is_a_file(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--problem",
            "synthetic",
            "--optimizers",
            "lbfgs",
            "--passes",
            "1",
            "--out",
            str(f),
        ],
    )
    assert res.exit_code == 2
    assert "is a file" in res.output


# ---------------------------------------------------------------- fuzzing of --set

name = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
param = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_set_parser_only_raises_usage_errors(text):
    import click

    with contextlib.suppress(click.BadParameter):
        parse_sets([text])


@settings(max_examples=300, deadline=None)
@given(
    name,
    param,
    st.one_of(
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    ),
)
def test_set_parser_roundtrips_values(n, p, v):
    text = str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)
    out = parse_sets([f"{n}.{p}={text}"])
    got = out[n][p]
    if isinstance(v, bool):
        assert got is v
    elif isinstance(v, (int, float)):
        assert got == v
    else:
        assert got == v or got in (True, False, None)  # 'true', 'none' etc. are keywords


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_optimizer_selection_parser_only_raises_parameter_errors(text):
    for part in split_list(text):
        with contextlib.suppress(ParameterError):
            parse_optimizer(part)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="lbfgs[]=,0123456789mory", max_size=30))
def test_compare_cli_never_crashes_on_garbage_selections(tmp_path_factory, text):
    out = tmp_path_factory.mktemp("garbage")
    args = [
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        text,
        "--passes",
        "0.01",
        "--out",
        str(out),
        "--no-optimum",
        "--quiet",
        "--set",
        "synthetic.n=5",
    ]
    res = CliRunner().invoke(main, args)
    # a selection is either valid (the comparison runs) or a usage error, never a crash
    assert res.exit_code in (0, 2), res.output


# ---------------------------------------------------------------- truncated inputs


def _valid_inputs(tmp_path):
    """One valid file per reader (and a model file), as bytes."""
    import gzip
    import io

    import numpy as np
    import scipy.io

    conll = "-DOCSTART- -X- O\n\nJan NNP B-PER\nzag VBD O\n\nHet DT O\n"
    conllu = (
        "# sent_id = 1\n1\tDo\tdo\tAUX\tVBP\t_\t2\taux\t_\t_\n"
        "2\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n\n"
    )
    pixels = "\t".join("1" if j % 3 else "0" for j in range(128))
    letters = f"1\ta\t2\t1\t1\t3\t{pixels}\t\n2\tb\t-1\t1\t2\t3\t{pixels}\t\n"
    buf = io.BytesIO()
    scipy.io.savemat(
        buf,
        {
            "X": np.array([[1, 2], [2, 0], [0, 0]], dtype=np.uint16),
            "y": np.array([[1], [2], [0]], dtype=np.uint8),
        },
    )
    X = [[{"w": "a"}, {"w": "b"}]]
    model = crfopt.CRF(optimizer="lbfgs", max_passes=3).fit(X, [["A", "B"]])
    model.save(tmp_path / "m.crfopt")
    return {
        "conll": conll.encode(),
        "conll.gz": gzip.compress(conll.encode()),
        "conllu": conllu.encode(),
        "letter.data": letters.encode(),
        "letter.data.gz": gzip.compress(letters.encode()),
        "mat": buf.getvalue(),
        "crfopt": (tmp_path / "m.crfopt").read_bytes(),
    }


def test_every_reader_turns_every_truncation_into_a_clear_error(tmp_path):
    """Cut each valid file at many points: each read succeeds or raises the reader's
    own error type with the file name in it — never a bare traceback."""
    from crfopt.apps.model import Model, ModelFormatError
    from crfopt.data.readers import (
        DataFormatError,
        read_conll,
        read_conllu,
        read_letter_data,
        read_sag4crf_mat,
    )

    readers = {
        "conll": (read_conll, DataFormatError),
        "conll.gz": (read_conll, DataFormatError),
        "conllu": (read_conllu, DataFormatError),
        "letter.data": (read_letter_data, DataFormatError),
        "letter.data.gz": (read_letter_data, DataFormatError),
        "mat": (read_sag4crf_mat, DataFormatError),
        "crfopt": (Model.load, ModelFormatError),
    }
    cases = 0
    for kind, data in _valid_inputs(tmp_path).items():
        reader, error = readers[kind]
        reader(_write(tmp_path / f"whole.{kind}", data))  # the untouched file is valid
        cuts = sorted({*range(0, len(data), max(1, len(data) // 40)), len(data) - 1})
        for cut in cuts:
            path = _write(tmp_path / f"cut{cut}.{kind}", data[:cut])
            try:
                reader(path)
            except error as exc:
                assert str(path) in str(exc), (kind, cut, exc)
            cases += 1
    assert cases > 250


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600))
def test_model_loader_fuzz(tmp_path_factory, blob):
    from crfopt.apps.model import Model, ModelFormatError

    path = tmp_path_factory.mktemp("fuzz") / "m.crfopt"
    path.write_bytes(b"PK\x03\x04" + blob)
    with contextlib.suppress(ModelFormatError):
        Model.load(path)
