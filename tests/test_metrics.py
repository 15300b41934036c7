"""Pluggable checkpoint metrics (issue 21 item 3): the hook, the two built-in metrics,
the cost flag's schedule, results and report columns, and that nobody counts them."""

from __future__ import annotations

import math
import textwrap
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tagging import write_corpus

import crfopt
from crfopt.apps.tagging import chunk_scores
from crfopt.bench.evaluator import Evaluator, MetricWarning
from crfopt.bench.results import load_run, read_results, run_path, to_frame, write_run
from crfopt.bench.runner import run
from crfopt.data.corpus import load_corpus
from crfopt.optim.registry import EXPENSIVE_EVERY, MetricSpec, get_registry
from crfopt_plugins import metrics as builtin

COUNTED = ("iterations", "oracle_calls", "forward_calls", "updates", "effective_passes")

#: A third-party metric plugin: ‖w‖₂, expensive, every 3rd checkpoint. It also calls
#: the problem's *counted* objective and sleeps, to show neither is charged to the run.
NORM_PLUGIN = textwrap.dedent(
    """
    import time

    import numpy as np

    import crfopt


    def norm(point):
        point.problem.primal(point.w)  # counted on the problem it is handed, not the run's
        time.sleep(0.05)
        return float(np.linalg.norm(point.w))


    @crfopt.hookimpl
    def crfopt_register_metrics():
        return [crfopt.MetricSpec("w_norm", norm, cost="expensive", every=3, summary="‖w‖₂")]
    """
)


@pytest.fixture
def norm_dir(tmp_path):
    d = tmp_path / "metric_plugins"
    d.mkdir()
    (d / "norm.py").write_text(NORM_PLUGIN, encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def tagging_problem(tmp_path_factory):
    d = tmp_path_factory.mktemp("metrics_corpus")
    write_corpus(d / "train.txt", 60, seed=1)
    write_corpus(d / "test.txt", 30, seed=2)
    return load_corpus(d / "train.txt", template="chunking", test=d / "test.txt")


def _point(names, gold, pred):
    """What chunk_f1 reads of a checkpoint, for sentences given as tag lists."""
    ids = {n: i for i, n in enumerate(names)}
    flat_g = np.array([ids.get(t, -1) for s in gold for t in s], dtype=np.int64)
    flat_p = np.array([ids[t] for s in pred for t in s], dtype=np.int64)
    offsets = np.cumsum([0, *map(len, gold)]).astype(np.int64)
    return SimpleNamespace(
        problem=SimpleNamespace(label_names=tuple(names)),
        offsets=lambda split: offsets,
        gold=lambda split: flat_g,
        predict=lambda split: flat_p,
    )


# ----------------------------------------------------------------------- chunk F1


def test_chunk_f1_by_hand():
    names = ["O", "B-NP", "I-NP", "B-VP", "I-VP"]
    gold = [
        ["B-NP", "I-NP", "B-VP", "O", "B-NP"],  # NP[0,2) VP[2,3) NP[4,5)
        ["I-VP", "I-VP", "O"],  # VP[0,2): I after a boundary begins a chunk
    ]
    pred = [
        ["B-NP", "B-NP", "B-VP", "O", "I-NP"],  # NP[0,1) NP[1,2) VP[2,3) NP[4,5)
        ["B-VP", "I-VP", "O"],  # VP[0,2)
    ]
    # gold 4 chunks, predicted 5, correct 3 (VP[2,3), NP[4,5), VP[0,2)):
    # P = 3/5, R = 3/4, F1 = 2PR/(P+R) = 2/3
    assert builtin.chunk_f1(_point(names, gold, pred)) == pytest.approx(2 / 3)
    assert chunk_scores(gold, pred).precision_recall_f1[2] == pytest.approx(2 / 3)
    assert builtin.chunk_f1(_point(names, gold, gold)) == 1.0
    # a typeless "B" then ".": conlleval never closes that chunk, so it is not counted,
    # not even when a later sentence has an end boundary and no start of its own
    for sents in ([["B", "."]], [["B", "."], [".", "B", "O"]]):
        odd = _point(TAGS, sents, sents)
        assert len(builtin.chunk_keys(odd.gold("test"), odd.offsets("test"), tuple(TAGS))) == 0
        assert chunk_scores(sents, sents).gold_chunks == 0


# the tag set mixes IOB2, IOE, a "." tag and typeless tags, where conlleval's rules bite
TAGS = ["O", "B-A", "I-A", "E-A", "B-B", "I-B", "S-B", ".", "B", "I"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([*TAGS, None]), min_size=1, max_size=9),
            st.randoms(use_true_random=False),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_chunk_f1_counts_as_the_projects_conlleval(data):
    # None in gold: a label unseen in training (-1), whose true tag is unknown; it is
    # a one-token chunk of its own type, which the string reading sees as "B-<unseen>"
    gold = [[t if t is not None else "B-unseen!" for t in g] for g, _ in data]
    pred = [[rng.choice(TAGS) for _ in g] for g, rng in data]
    point = _point(TAGS, gold, pred)
    offsets = point.offsets("test")
    g = builtin.chunk_keys(point.gold("test"), offsets, tuple(TAGS))
    p = builtin.chunk_keys(point.predict("test"), offsets, tuple(TAGS))
    sc = chunk_scores(gold, pred)
    assert (len(g), len(p)) == (sc.gold_chunks, sc.pred_chunks)
    assert len(np.intersect1d(g, p)) == sc.correct_chunks
    assert builtin.chunk_f1(point) == pytest.approx(sc.precision_recall_f1[2], abs=1e-15)


def test_chunk_f1_column_on_a_tagging_run_matches_conlleval(tagging_problem):
    problem = tagging_problem
    res = run(problem, "sg", passes=2, seed=0, checkpoints="every:0.5")
    assert res.status == "budget"
    trace = res.trace
    assert trace["chunk_f1"].notna().all()  # cheap: every checkpoint
    names = problem.label_names
    kd = problem.split_data("test")
    pred = Evaluator(problem).predict(res.w, "test")
    bounds = zip(kd.offsets[:-1], kd.offsets[1:])
    sents = [(kd.y[a:b], pred[a:b]) for a, b in bounds]
    sc = chunk_scores(
        [[names[i] for i in g] for g, _ in sents], [[names[i] for i in q] for _, q in sents]
    )
    assert trace["chunk_f1"].iloc[-1] == pytest.approx(sc.precision_recall_f1[2], abs=1e-12)
    assert 0.3 < trace["chunk_f1"].iloc[-1] <= 1.0  # it learned something
    # test_error, now a metric plugin, is still the per-token error it always was
    assert trace["test_error"].iloc[-1] == pytest.approx(float(np.mean(pred != kd.y)))
    assert trace["test_error"].notna().all()


def test_metrics_that_do_not_apply_write_no_column():
    res = run(crfopt.make_synthetic(n=20, seed=0), "sg", passes=1)
    assert "chunk_f1" not in res.trace.columns  # synthetic labels are not chunk tags
    assert "chunk_f1" not in res.meta["metrics"]
    assert res.trace["test_error"].notna().all()
    assert set(res.meta["metrics"]) == {"test_error"}


# ----------------------------------------------------------------------- the cost flag


@pytest.mark.parametrize(
    ("checkpoint", "final", "due"),
    [(0, False, True), (1, False, False), (2, False, False), (3, False, True), (7, True, True)],
)
def test_expensive_schedule(checkpoint, final, due):
    spec = MetricSpec("m", lambda p: 0.0, cost="expensive", every=3)
    assert spec.due(checkpoint, final) is due
    assert MetricSpec("c", lambda p: 0.0).due(checkpoint, final) is True
    assert MetricSpec("d", lambda p: 0.0, cost="expensive").interval == EXPENSIVE_EVERY


def test_third_party_metric_plugin_in_a_run(norm_dir):
    reg = get_registry([norm_dir])
    assert reg.metric("w_norm").source.startswith("plugin-dir")
    assert not reg.failures
    problem = crfopt.make_synthetic(n=20, seed=0)
    res = run(problem, "sg", passes=4, checkpoints="every:0.5", registry=reg)
    trace = res.trace
    last = len(trace) - 1
    assert last == 8 and trace["status"].iloc[-1] == "budget"
    computed = [int(c) for c in trace.loc[trace["w_norm"].notna(), "checkpoint"]]
    assert computed == [0, 3, 6, 8]  # every 3rd and the last; the others null
    assert trace["w_norm"].iloc[-1] == pytest.approx(float(np.linalg.norm(res.w)))
    assert trace["w_norm"].iloc[0] == 0.0  # sg starts at w = 0
    assert res.meta["metrics"]["w_norm"] == {
        "cost": "expensive",
        "every": 3,
        "summary": "‖w‖₂",
        "source": reg.metric("w_norm").source,
    }


def test_counters_and_clock_unchanged_by_metrics(norm_dir):
    problem = crfopt.make_synthetic(n=20, seed=0)
    kw = dict(passes=3, checkpoints="every:0.25", seed=1)
    plain = run(problem, "sg", metrics=[], **kw)
    extra = run(problem, "sg", registry=get_registry([norm_dir]), **kw)
    assert "w_norm" in extra.trace and "w_norm" not in plain.trace
    for col in (*COUNTED, "primal"):
        assert plain.trace[col].tolist() == extra.trace[col].tolist(), col
    assert plain.meta["final_counters"] == extra.meta["final_counters"]
    # 13 checkpoints, w_norm at 0,3,6,9,12: 5 sleeps of 0.05 s, plus its primal calls,
    # none of it on the optimizer's clock
    assert extra.trace["w_norm"].notna().sum() == 5
    assert extra.meta["time_s"] < 0.25
    assert extra.trace["time_s"].iloc[-1] < 0.25


# ----------------------------------------------------------------------- failures


def test_a_broken_metric_is_null_and_named_not_fatal():
    def broken(point):
        raise ZeroDivisionError("boom")

    specs = [MetricSpec("broken", broken), MetricSpec("primal", lambda p: 1.0)]
    with pytest.warns(MetricWarning) as caught:
        res = run(crfopt.make_synthetic(n=10, seed=0), "sg", passes=1, metrics=specs)
    assert res.status == "budget"
    assert res.trace["broken"].isna().all()
    assert res.meta["metric_errors"]["broken"] == "ZeroDivisionError: boom"
    assert "named like the results column" in res.meta["metric_errors"]["primal"]
    assert res.trace["primal"].iloc[-1] != 1.0  # not overwritten
    assert len([w for w in caught if "'broken'" in str(w.message)]) == 1  # once per run


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Chunk-F1"}, "not a column name"),
        ({"cost": "pricey"}, "valid costs: cheap, expensive"),
        ({"every": 3}, "needs cost='expensive'"),
        ({"cost": "expensive", "every": 0}, "positive whole number"),
    ],
)
def test_bad_metric_specs_fail_their_plugin(tmp_path, kwargs, message):
    args = {"name": "m", **kwargs}
    (tmp_path / "bad.py").write_text(
        "import crfopt\n\n@crfopt.hookimpl\ndef crfopt_register_metrics():\n"
        f"    return [crfopt.MetricSpec(compute=float, **{args!r})]\n",
        encoding="utf-8",
    )
    with pytest.warns(crfopt.optim.registry.PluginWarning, match=message):
        reg = get_registry([tmp_path])
    assert [f.name for f in reg.failures] == ["bad"]
    assert set(reg.metrics) == {"test_error", "chunk_f1"}  # the built-ins still work


# ----------------------------------------------------------------------- results, report


def test_results_files_with_and_without_metric_columns(tmp_path, norm_dir):
    problem = crfopt.make_synthetic(n=20, seed=0)
    out = tmp_path / "results"
    with_norm = run(problem, "sg", passes=1, registry=get_registry([norm_dir]), run_id="a")
    without = run(problem, "sg", passes=1, metrics=[], run_id="b")
    write_run(run_path(out, "a"), with_norm.trace, {"run_id": "a", **with_norm.meta})
    write_run(run_path(out, "b"), without.trace, {"run_id": "b", **without.meta})
    frame, _ = load_run(run_path(out, "a"))  # checksums include the metric column
    assert frame["w_norm"].tolist()[-1] == pytest.approx(with_norm.trace["w_norm"].iloc[-1])
    old, _ = load_run(run_path(out, "b"))
    assert "w_norm" not in old and old["test_error"].isna().all()
    both = read_results(out)
    assert str(both["w_norm"].dtype) == "Float64"
    assert both.loc[both["run_id"] == "b", "w_norm"].isna().all()
    assert both.loc[both["run_id"] == "a", "w_norm"].notna().any()
    assert list(to_frame([{"checkpoint": 0, "x_metric": 0.5}], ["x_metric"])["x_metric"]) == [0.5]


def test_compare_and_report_show_a_plugin_metric(tmp_path, norm_dir):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = crfopt.compare(
            "synthetic",
            "sg,lbfgs",
            passes=2,
            checkpoints="every:0.5",
            out=out,
            plugin_dirs=[str(norm_dir)],
            backend="serial",
        )
    assert frame["w_norm"].notna().any() and frame["w_norm"].isna().any()
    from crfopt.bench.report import make_report

    rep = make_report(out, tmp_path / "report", formats=("png",))
    names = {p.name for p in rep.figures}
    assert "synthetic-w_norm.png" in names and "synthetic-test-error.png" in names
    assert "final w_norm" in rep.summary.columns
    finals = read_results(out).sort_values("checkpoint").groupby("optimizer")["w_norm"].last()
    got = rep.summary.set_index("optimizer")["final w_norm"]
    assert got.to_dict() == pytest.approx(finals.astype(float).to_dict())
    assert not any(math.isnan(v) for v in got)
