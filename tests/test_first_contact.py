"""What a newcomer meets first: errors that name their real cause, backends that mean
what they say, help a person reads, user text that cannot break the display."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from crfopt.apps.cli import main


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """No CRFOPT_DATA, an empty user cache and no network: a first run on a fresh machine.

    Downloads are off through the data layer's own switch (CRFOPT_OFFLINE) and, should
    it be ignored, pooch cannot reach anything either.
    """
    import pooch

    def offline(*args, **kwargs):
        raise OSError("network unreachable (test)")

    monkeypatch.setenv("CRFOPT_DATA", "")
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_OFFLINE", "1")
    monkeypatch.delenv("CRFOPT_DEBUG", raising=False)
    monkeypatch.setattr(pooch, "retrieve", offline)
    return tmp_path


def _handled(res) -> bool:
    """The command ended with a message and an exit status, not an escaped exception
    (which the shell would show as a traceback)."""
    return res.exception is None or isinstance(res.exception, SystemExit)


# ------------------------------------------------------------------ errors name the cause


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--problem", "ocr", "--optimizers", "lbfgs", "--passes", "1", "--quiet"],
        ["info", "--problem", "ocr"],
        ["optimum", "--problem", "ocr"],
        ["train", "--problem", "ocr", "--passes", "1"],
    ],
    ids=lambda a: a[0],
)
def test_missing_data_names_the_file_and_how_to_get_it(no_data, args):
    out = no_data / "out"
    extra = ["--out", str(out)] if args[0] == "compare" else []
    if args[0] == "train":
        extra = ["--model", str(no_data / "m.crfopt")]
    res = CliRunner().invoke(main, [*args, *extra])
    assert res.exit_code == 2, res.output
    assert _handled(res), res.exception
    assert "ocr/ocr.mat" in res.output
    assert "crfopt fetch" in res.output or "CRFOPT_DATA" in res.output
    assert "cannot write" not in res.output and "free space" not in res.output


def test_missing_data_without_optimum_is_an_input_error_not_failed_runs(no_data):
    """With --no-optimum no P* step loads the problem first: each run used to record the
    missing file as its own failure (exit 0 or 1, one error per run); the inputs are now
    loaded once before the grid."""
    out = no_data / "out"
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "ocr", "--optimizers", "lbfgs,sag", "--passes", "1",
         "--no-optimum", "--out", str(out), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert _handled(res), res.exception
    assert "ocr/ocr.mat" in res.output and "missing input" in res.output
    assert not list(out.glob("run-*.parquet"))  # no run was attempted, none stored failed


def test_missing_data_in_a_real_process_prints_no_traceback(tmp_path):
    env = {
        **os.environ,
        "CRFOPT_DATA": "",
        "CRFOPT_CACHE": str(tmp_path / "cache"),
        "CRFOPT_OFFLINE": "1",
    }
    env.pop("CRFOPT_DEBUG", None)
    cmd = [sys.executable, "-m", "crfopt", "compare", "--problem", "ocr"]
    cmd += ["--optimizers", "sdca-gap,sag-nus,oeg", "--out", str(tmp_path / "r"), "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "ocr/ocr.mat" in proc.stderr and "missing input" in proc.stderr


def test_debug_shows_the_traceback(no_data, monkeypatch):
    res = CliRunner().invoke(main, ["info", "--problem", "ocr", "--debug"])
    assert isinstance(res.exception, FileNotFoundError)
    monkeypatch.setenv("CRFOPT_DEBUG", "1")
    res = CliRunner().invoke(main, ["info", "--problem", "ocr"])
    assert isinstance(res.exception, FileNotFoundError)


def test_an_unexpected_error_is_one_line_without_traceback(monkeypatch):
    import crfopt.bench.report

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.delenv("CRFOPT_DEBUG", raising=False)
    monkeypatch.setattr(crfopt.bench.report, "make_report", broken)
    res = CliRunner().invoke(main, ["report", ".", "--out", "unused"])
    assert res.exit_code == 1 and _handled(res)
    assert "unexpected ZeroDivisionError: a bug" in res.output and "--debug" in res.output


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_named_before_any_work(tmp_path, monkeypatch):
    """--scheduler alone means Dask (it used to run serially and succeed); an address
    nobody answers is its own error (exit 3), reported before P* is computed."""
    import dask
    import distributed  # noqa: F401  (loads its config: setting it before would shadow it)

    import crfopt.bench.optimum

    computed = []
    monkeypatch.setattr(
        crfopt.bench.optimum, "reference_optimum", lambda *a, **k: computed.append(a)
    )
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = CliRunner().invoke(
            main,
            ["compare", "--problem", "synthetic", "--optimizers", "lbfgs", "--passes", "1",
             "--scheduler", address, "--out", str(tmp_path / "r"), "--quiet"],
        )  # fmt: skip
    assert res.exit_code == 3, res.output
    assert _handled(res)
    assert f"cannot reach the Dask scheduler at {address}" in res.output
    assert "cannot write" not in res.output
    assert computed == []


def test_a_running_scheduler_is_reached():
    """The other side of the unreachable case: the same check passes when a scheduler
    answers (a connect that always failed would pass the test above)."""
    from distributed import LocalCluster

    from crfopt.bench.backends import check_scheduler

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        check_scheduler(cluster.scheduler_address)


def test_scheduler_with_a_non_dask_backend_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--optimizers", "lbfgs", "--passes", "1",
         "--backend", "joblib", "--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path)],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "dask backend" in res.output


def test_runs_are_shipped_with_the_callers_absolute_out(tmp_path, monkeypatch):
    """A remote worker resolves a relative --out in its own working directory; the
    tasks it receives must carry the caller's absolute folder."""
    import importlib

    compare_module = importlib.import_module("crfopt.bench.compare")
    from crfopt.bench.execute import execute_task

    shipped = {}

    def fake_run_tasks(backend, tasks, **kwargs):
        shipped.update(backend=backend, tasks=list(tasks), scheduler=kwargs.get("scheduler"))
        # run them here, from another working directory, as a worker would
        elsewhere = tmp_path / "worker-cwd"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        return [execute_task(t) for t in tasks]

    monkeypatch.setattr(compare_module, "run_tasks", fake_run_tasks)
    monkeypatch.setattr(compare_module, "check_scheduler", lambda address: None)
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--set", "synthetic.n=20", "--optimizers",
         "lbfgs", "--passes", "1", "--no-optimum", "--scheduler", "tcp://10.0.0.5:8786",
         "--out", "relative/dir", "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert shipped["backend"] == "dask" and shipped["scheduler"] == "tcp://10.0.0.5:8786"
    assert [Path(t.out_dir) for t in shipped["tasks"]] == [tmp_path / "relative" / "dir"]
    assert len(list((tmp_path / "relative" / "dir").glob("run-*.parquet"))) == 1
    assert not (tmp_path / "worker-cwd" / "relative").exists()


def test_a_bad_template_is_an_input_error(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("The DT B-NP\ncat NN I-NP\n\nA DT B-NP\n", encoding="utf-8")
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", str(corpus), "--template", "no-such-template",
         "--optimizers", "lbfgs", "--passes", "1", "--out", str(tmp_path / "r"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert _handled(res)
    assert "unknown template 'no-such-template'" in res.output


# ------------------------------------------------------------------ user text and rich


def test_a_path_with_rich_markup_is_printed_verbatim(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "a[/x]b[bold]"
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--set", "synthetic.n=20", "--optimizers",
         "lbfgs", "--passes", "1", "--no-optimum", "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"in {out}" in res.output.replace("\n", "")


# ------------------------------------------------------------------ help a person reads


def _commands():
    return sorted(main.commands.items())


def test_every_command_and_option_has_help():
    """Walks the whole command line: a summary that is not cut, an example, and a help
    text for every option (arguments are described in the command's own text)."""
    missing = []
    for name, cmd in _commands():
        if not cmd.short_help or len(cmd.short_help) > 50:
            missing.append(f"{name}: short help missing or longer than 50 characters")
        if f"crfopt {name} " not in (cmd.help or ""):
            missing.append(f"{name}: no example in its help")
        for param in cmd.params:
            if isinstance(param, click.Option):
                if not (param.help or "").strip():
                    missing.append(f"{name} {param.opts[0]}: no help")
            elif (param.metavar or param.name or "").upper().strip("[].") not in (cmd.help or ""):
                missing.append(f"{name} {param.human_readable_name}: argument not described")
    for param in main.params:
        if isinstance(param, click.Option) and not (param.help or "").strip():
            missing.append(f"crfopt {param.opts[0]}: no help")
    assert missing == []


def test_top_level_help_shows_every_summary_whole():
    res = CliRunner().invoke(main, ["--help"], terminal_width=80)
    assert res.exit_code == 0
    listed = res.output[res.output.index("Commands:") : res.output.index("Exit codes:")]
    assert "..." not in listed and "…" not in listed
    for name, cmd in _commands():
        assert f"{name}  " in listed and cmd.short_help in listed


def test_every_command_help_renders_its_example_and_defaults_read_well():
    for name, _ in _commands():
        res = CliRunner().invoke(main, [name, "--help"])
        assert res.exit_code == 0, res.output
        assert f"crfopt {name} " in res.output, name
        assert "[default: default]" not in res.output, name


def test_list_optimizers_prints_shared_parameters_once_per_family():
    from crfopt.apps.cli.problems import optimizer_families
    from crfopt.optim.registry import get_registry

    reg = get_registry()
    families = optimizer_families(reg)
    seen = [v for fam in families for v, _, _ in fam.variants]
    assert sorted(seen) == sorted(reg.optimizers)  # every variant once
    for fam in families:
        for variant, _, own in fam.variants:
            truth = {k: p.default for k, p in reg.optimizers[variant].parameters().items()}
            assert {**fam.shared, **own} == truth, variant  # nothing lost or invented
            assert not set(fam.shared) & set(own)
    sdca = next(f for f in families if any(v == "sdca-gap" for v, _, _ in f.variants))
    assert len(sdca.variants) >= 2 and "sub_precision" in sdca.shared
    res = CliRunner().invoke(main, ["list", "optimizers"], terminal_width=200)
    assert res.exit_code == 0
    # once per family that shares it, and once per variant that has it as its own
    printed = sum("sub_precision" in f.shared for f in families)
    printed += sum("sub_precision" in own for f in families for _, _, own in f.variants)
    assert res.output.count("sub_precision=") == printed


def test_info_prints_the_template_as_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "train.txt"
    corpus.write_text("The DT B-NP\ncat NN I-NP\n\nA DT B-NP\n", encoding="utf-8")
    res = CliRunner().invoke(
        main, ["info", "--problem", str(corpus), "--template", "chunking"], terminal_width=200
    )
    assert res.exit_code == 0, res.output
    assert "template rules" in res.output and "template_spec" not in res.output
    assert "w = word at -2 -1 0 +1 +2" in res.output
    assert "pos|pos = pos[-2] & pos[-1]; pos[-1] & pos[0]" in res.output
    assert "{'name':" not in res.output and "'parts'" not in res.output


# ------------------------------------------------------------------ layouts checked


def _tagged_corpus(path: Path, *, sentences: int = 400, encoding: str = "utf-8") -> Path:
    """A `word POS chunk` file: 3 columns whose middle one (POS) has more values than
    the last one (chunk), so a POS-as-label mistake shows in the label set."""
    import random

    rng = random.Random(0)
    words = [("the", "DT", "B-NP"), ("a", "DT", "B-NP"), ("cat", "NN", "I-NP"),
             ("dogs", "NNS", "I-NP"), ("runs", "VBZ", "B-VP"), ("ran", "VBD", "B-VP"),
             ("on", "IN", "B-PP"), ("quickly", "RB", "B-ADVP")]  # fmt: skip
    lines = []
    for _ in range(sentences):
        lines += [" ".join(rng.choice(words)) for _ in range(rng.randint(2, 6))] + [""]
    path.write_bytes("\n".join(lines).encode(encoding))
    return path


def test_train_reads_the_label_from_the_last_column(tmp_path, monkeypatch):
    from crfopt.apps.model import Model

    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    corpus = _tagged_corpus(tmp_path / "train.txt")
    model = tmp_path / "m.crfopt"
    res = CliRunner().invoke(
        main,
        ["train", "--problem", str(corpus), "--optimizer", "lbfgs", "--passes", "2",
         "--model", str(model), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert sorted(Model.load(model).labels) == ["B-ADVP", "B-NP", "B-PP", "B-VP", "I-NP"]


def test_an_undecodable_file_names_line_and_byte_and_train_takes_encoding(tmp_path, monkeypatch):
    """The decoder reads 8 KiB chunks: the offset it reports is within a chunk. The
    message must give the file's own line and byte, and --encoding must fix it."""
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    corpus = _tagged_corpus(tmp_path / "train.txt", encoding="latin-1")
    clean = corpus.read_bytes()
    bad = clean + "\ncafé NN I-NP\n".encode("latin-1")
    corpus.write_bytes(bad)
    byte = bad.index(b"\xe9")
    line = bad[:byte].count(b"\n") + 1
    assert byte > 8192  # past the first chunk, where the old offset went wrong
    args = ["train", "--problem", str(corpus), "--optimizer", "lbfgs", "--passes", "1"]
    args += ["--model", str(tmp_path / "m.crfopt"), "--quiet"]
    res = CliRunner().invoke(main, args, terminal_width=300)
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"{corpus}:{line}:" in text and f"at byte {byte})" in text
    assert "--encoding" in text
    res = CliRunner().invoke(main, [*args, "--encoding", "latin-1"])
    assert res.exit_code == 0, res.output


def test_a_run_stopped_far_from_the_optimum_says_so(tmp_path, monkeypatch):
    """Two passes of L-BFGS leave it far from P* (sub-optimality ≫ 1 % of P(0)); the
    summary says so and names the run. Enough passes of sdca-gap: no note."""
    import crfopt

    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r"
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--set", "synthetic.n=40", "--optimizers",
         "lbfgs", "--passes", "2", "--out", str(out), "--quiet"],
        terminal_width=300,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    table = crfopt.read_results(out)
    last = table.sort_values("checkpoint").iloc[-1]
    p0 = crfopt.load_problem("synthetic", n=40).primal_at_zero()
    assert last["status"] == "budget" and last["suboptimality"] / p0 > 0.01  # the premise
    assert "1 run(s) stopped on the budget far from the optimum" in res.output
    assert f"P(w) - P* = {last['suboptimality']:.3g}" in res.output

    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--set", "synthetic.n=40", "--optimizers",
         "sdca-gap", "--passes", "40", "--out", str(tmp_path / "r2"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "far from the optimum" not in res.output

    res = CliRunner().invoke(
        main,
        ["train", "--problem", "synthetic", "--set", "synthetic.n=40", "--optimizer", "lbfgs",
         "--passes", "2", "--model", str(tmp_path / "m.crfopt"), "--quiet"],
        terminal_width=300,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "training stopped on its budget of 2 passes" in res.output
    assert "far from the optimum" in res.output


def test_tagging_a_file_whose_columns_are_not_the_models_warns(tmp_path, monkeypatch):
    """`word label` has as many columns as the model's `word pos` input without labels:
    the counts cannot tell, the values can (labels where POS tags belong)."""
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    corpus = _tagged_corpus(tmp_path / "train.txt")
    model = tmp_path / "m.crfopt"
    res = CliRunner().invoke(
        main,
        ["train", "--problem", str(corpus), "--optimizer", "lbfgs", "--passes", "2",
         "--model", str(model), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in corpus.read_text().splitlines()]
    good = tmp_path / "word_pos.txt"
    good.write_text("\n".join(" ".join(r[:2]) for r in rows))
    wrong = tmp_path / "word_label.txt"
    wrong.write_text("\n".join(" ".join([r[0], r[2]]) if r else "" for r in rows))
    res = CliRunner().invoke(main, ["tag", "--model", str(model), str(good)])
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    res = CliRunner().invoke(main, ["tag", "--model", str(model), str(wrong)], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert "warning: column 'pos'" in res.output and "100% of its tokens" in res.output


def test_a_data_file_with_the_wrong_checksum_is_an_input_error(tmp_path, monkeypatch):
    """A file in CRFOPT_DATA that is not the verified one (e.g. another release)."""
    data = tmp_path / "data"
    (data / "ocr").mkdir(parents=True)
    (data / "ocr" / "ocr.mat").write_bytes(b"not the OCR file")
    monkeypatch.setenv("CRFOPT_DATA", str(data))
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRFOPT_OFFLINE", "1")
    monkeypatch.delenv("CRFOPT_DEBUG", raising=False)
    res = CliRunner().invoke(main, ["info", "--problem", "ocr"], terminal_width=300)
    assert res.exit_code == 2, res.output
    assert _handled(res)
    assert "not the expected one" in res.output and "ocr.mat" in res.output


# ------------------------------------------------ each run records where it was timed


@pytest.fixture(scope="module")
def serial_runs(tmp_path_factory):
    """Two serial runs of a small synthetic problem in this process."""
    import crfopt

    tmp = tmp_path_factory.mktemp("serial-runs")
    mp = pytest.MonkeyPatch()
    mp.setenv("CRFOPT_CACHE", str(tmp / "cache"))
    try:
        crfopt.compare(
            "synthetic",
            "lbfgs,sag",
            passes=1,
            optimum=False,
            problem_params={"synthetic": {"n": 30}},
            out=tmp / "out",
        )
    finally:
        mp.undo()
    return tmp / "out"


def test_each_run_records_its_backend_threads_and_worker(serial_runs):
    import crfopt
    from crfopt.kernels.jit import JIT_ENABLED

    table = crfopt.read_results(serial_runs)
    assert set(table["backend"]) == {"serial"}
    if JIT_ENABLED:
        import numba

        expected_threads = numba.get_num_threads()
    else:
        expected_threads = 1
    assert set(table["threads"]) == {expected_threads}
    assert set(table["worker"]) == {f"{socket.gethostname()}:{os.getpid()}"}


def test_a_file_from_before_the_run_columns_reads_them_as_null(serial_runs, tmp_path, monkeypatch):
    """A file written before backend/threads/worker existed (by the schema without them,
    its trace checksum over the columns it had) still verifies and reads with nulls."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import crfopt
    from crfopt.bench import results
    from crfopt.bench.results import RUN_COLUMNS, DamagedResultError, load_run, write_run

    src = sorted(serial_runs.glob("run-*.parquet"))[0]
    trace, meta = load_run(src)
    meta = {k: v for k, v in meta.items() if k not in ("provenance", "trace_sha256")}
    old = tmp_path / "old" / src.name
    with monkeypatch.context() as m:  # the schema as it was before these columns
        before = {c: t for c, t in results.COLUMNS.items() if c not in RUN_COLUMNS}
        m.setattr(results, "COLUMNS", before)
        write_run(old, trace.drop(columns=list(RUN_COLUMNS)), meta)
    assert set(RUN_COLUMNS).isdisjoint(pq.read_schema(old).names)
    back = crfopt.read_results(old.parent)
    assert len(back) == len(trace)
    assert back["backend"].isna().all() and back["threads"].isna().all()
    assert back["worker"].isna().all() and str(back["threads"].dtype) == "Int64"
    # a filled column is covered by the checksum like any other
    filled = pq.read_table(src)
    i = filled.schema.get_field_index("worker")
    forged = filled.set_column(i, "worker", pa.array(["elsewhere:1"] * filled.num_rows))
    pq.write_table(forged, tmp_path / src.name, write_page_checksum=True)
    with pytest.raises(DamagedResultError, match="trace checksum"):
        load_run(tmp_path / src.name)


def _mixed_folder(serial_runs, tmp_path) -> Path:
    """The two serial runs, one of them relabelled as timed on Dask with one thread."""
    import pandas as pd

    from crfopt.bench.results import load_run, write_run

    out = tmp_path / "mixed"
    for i, src in enumerate(sorted(serial_runs.glob("run-*.parquet"))):
        trace, meta = load_run(src)
        if i == 0:
            trace["backend"] = pd.Series(["dask"] * len(trace), dtype="string")
            trace["threads"] = pd.Series([1] * len(trace), dtype="Int64")
        meta = {k: v for k, v in meta.items() if k not in ("provenance", "trace_sha256")}
        write_run(out / src.name, trace, meta)
    return out


def test_report_warns_when_the_seconds_axis_mixes_backends_or_threads(serial_runs, tmp_path):
    import numba

    from crfopt.bench.report import MixedTimingWarning, make_report
    from crfopt.bench.results import read_results

    recorded = set(read_results(serial_runs)["threads"].dropna().astype(int))
    if numba.get_num_threads() == 1 or recorded == {1}:
        # the relabelled run (1 thread) must differ from the others: not with one numba
        # thread, nor on the NumPy path, whose runs record 1 thread
        pytest.skip("the runs used one thread: relabelling to 1 thread would not mix counts")
    # one backend, one thread count: nothing to say
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rep = make_report(serial_runs, tmp_path / "same", formats=["png"])
    assert not [w for w in seen if issubclass(w.category, MixedTimingWarning)]
    assert "mixes" not in rep.markdown.read_text(encoding="utf-8")
    mixed = _mixed_folder(serial_runs, tmp_path)
    with pytest.warns(MixedTimingWarning, match="mixes backends .*dask: 1 runs, serial: 1 runs"):
        rep = make_report(mixed, tmp_path / "rep", formats=["png"])
    md = rep.markdown.read_text(encoding="utf-8")
    assert "**Warning:** synthetic: the seconds axis mixes backends" in md
    assert "thread counts (1: 1 runs" in md
    assert "the seconds axis mixes backends" in rep.html.read_text(encoding="utf-8")
    # the command line says it on stderr
    env = {**os.environ, "CRFOPT_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "crfopt", "report", str(mixed), "--out", str(tmp_path / "cli")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "synthetic: the seconds axis mixes backends" in proc.stderr


# ------------------------------------------------------ README: the first five minutes


def _five_minutes_section() -> str:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = text.index("## First five minutes")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_readme_first_five_minutes_runs_to_the_report(tmp_path, monkeypatch):
    """The section's commands, run as tests/test_docs.py runs every README block (OCR
    replaced by a tiny generated corpus, passes capped), end in the report it promises;
    the headline comparison is the one the section names."""
    import shlex

    from test_docs import commands_of, fenced_blocks, runnable

    import crfopt

    section = _five_minutes_section()
    assert "crfopt compare --problem ocr --optimizers sdca-gap,sag-nus,oeg" in section
    blocks = [
        code
        for _, code, kind, _ in fenced_blocks("README.md", ("bash",))
        if code in section and kind is None
    ]
    commands = [args for code in blocks for args in commands_of(code)]
    assert [a[:2] for a in commands] == [["crfopt", "info"], ["crfopt", "compare"],
                                         ["crfopt", "report"]]  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    builtin = set(crfopt.get_registry().problems) - {"synthetic"}
    for args in commands:
        argv, _ = runnable(args[1:], tmp_path, builtin)
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 0, f"crfopt {shlex.join(argv)}\n{res.output}"
    report = tmp_path / "report" / "ocr"
    assert (report / "report.html").is_file() and (report / "summary.md").is_file()
    assert "report/ocr/report.html" in section  # where the section tells the reader to look
    table = crfopt.read_results(tmp_path / "results" / "ocr")
    assert set(table["optimizer"]) == {"sdca-gap", "sag-nus", "oeg"}


def test_a_run_is_named_when_it_starts_not_at_its_first_checkpoint(tmp_path, monkeypatch):
    """A run's setup (SDCA's dual initialization, a first compile: minutes on OCR) comes
    before its first checkpoint; the display names the run when it starts."""
    import crfopt
    from crfopt.apps.cli.compare import RichReporter

    events = []

    class Recorder(RichReporter):
        def started(self, task, meta):
            events.append(("start", task.run_id))
            super().started(task, meta)
            events.append(("shown", self.progress.tasks[-1].description))

        def checkpoint(self, task, row):
            events.append(("checkpoint", task.run_id))
            super().checkpoint(task, row)

    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    with Recorder(quiet=False, budget_passes=1.0) as reporter:
        crfopt.compare(
            "synthetic", "sdca-gap,lbfgs", passes=1, optimum=False,
            problem_params={"synthetic": {"n": 20}}, out=tmp_path / "r", reporter=reporter,
        )  # fmt: skip
    starts = [rid for kind, rid in events if kind == "start"]
    assert len(starts) == 2
    for rid in starts:
        mine = [e for e in events if e[1] == rid]
        assert mine[0][0] == "start"  # before any checkpoint of that run
    shown = [text for kind, text in events if kind == "shown"]
    assert all("(setup)" in t and "synthetic" in t for t in shown), shown


def test_compare_summary_says_where_the_duality_gap_is_explained(tmp_path, monkeypatch):
    """A primal method's gap (‖∇P‖²/(2λ)) looks like a bug next to its sub-optimality
    unless the table says which dual point it uses."""
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--set", "synthetic.n=20", "--optimizers",
         "lbfgs", "--passes", "1", "--no-optimum", "--out", str(tmp_path / "r"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "duality gap: P(w) - D at each method's own dual point" in text
    assert "docs/algorithms.md §1.4" in text
    assert (Path(__file__).resolve().parents[1] / "docs" / "algorithms.md").read_text(
        encoding="utf-8"
    ).count("### 1.4 Duality gaps and the dual point each gap uses") == 1
