"""The performance report: every figure of reports/performance.md, measured in one run.

    pip install -e ".[test,bench]"
    python benchmarks/performance.py                 # everything (see the runtime below)
    python benchmarks/performance.py --only P2 P3 --problems ocr
    python benchmarks/performance.py --render        # the report again, nothing measured

Every figure is a ratio against a baseline measured in the same run, on the same
machine, one thread each unless said otherwise. Sections (``--only``):

* epochs   one epoch of sdca-gap, oeg and sag-nus-star in full value+gradient passes of
           the same tree, before (``--ref``, default 2fe8d3c, the commit before issue 19's
           speed work) → after (the working tree), on OCR and CoNLL-2000: fresh processes
           per tree through benchmarks/before_after.py's git worktrees (CPU seconds,
           alternating rounds, or ``--callgrind`` instruction counts).
* floor    the floors of sdca-gap's and oeg's epochs on OCR and CoNLL-2000 with their
           iterates kept, in full passes of the working tree: the work they cannot skip,
           each part timed alone (benchmarks/epoch_floor.py, in three fresh processes:
           medians, and the floor's range).
* pos-passes  an sdca-gap effective pass against a sag-nus-star one on POS-EWT (K = 49)
           and POS-CoNLL (K = 44), where SDCA's K² work per entry shows: CPU seconds of
           three epochs after an untimed one over the effective passes they made, one
           thread, a fresh process per problem (about 3 minutes).
* threads  the batch oracle (full value+gradient pass) on 2 threads against 1, OCR and
           CoNLL-2000: benchmarks/bench_oracle.py's measurement, called.
* P1       one value+gradient pass on OCR: crfopt vs CRFsuite (python-crfsuite) on
           identical attributes, λ matched (c2 = nλ/2); with the bias block off, both
           solvers' converged objectives side by side.
* P2       one sdca-gap epoch on OCR: crfopt vs the reference sdca4crf code itself (its
           own "iteration per second" log over a fixed number of iterations, run from a
           temporary copy), and vs a lean NumPy SDCA (benchmarks/reference_sdca.py).
* P3       time to target on OCR, CoNLL-2000, NER-nl and POS-EWT: optimizer seconds for
           the best of sdca-gap, sag-nus-star and oeg (1 thread; separately 2 threads, with
           the parallel plugins) to reach CRFsuite L-BFGS's converged objective + 1e-4
           relative, against CRFsuite's training time. CRFsuite's figures are cached in the
           user cache (``<cache>/crfsuite/``) and reused unless ``--retrain-crfsuite``.
* parallel sdca-passcode-wild on 2 threads against sdca-gap on 1 (issue 48): seconds to
           1e-3 relative sub-optimality on OCR and CoNLL-2000, 3 seeds, with the curves
           (reports/figures/sdca-passcode-seconds.png); about 20 minutes, needs both cores.
* parallel-limits  the same runs on NER-nl and POS-EWT (seed 0), and what limits the
           2-thread epoch (benchmarks/passcode_limits.py) on OCR, CoNLL-2000 and NER-nl;
           about 12 minutes, needs both cores.
* auto     ``--optimizer auto`` (crfopt/apps/auto.py) against every candidate optimizer
           on every built-in problem and NER-nl read as a user file, ℓ2 and ℓ1 + ℓ2:
           seconds to 1e-4 relative sub-optimality, the pick's own run against the
           fastest (benchmarks/perf_auto.py); ``--refit`` first refits the rule on this
           run's candidates and writes the table into crfopt/apps/auto.py. About 2 h
           on the 2-core machine of 2026-12-07 (the candidates 100 min, the P* runs of
           the ℓ1 + ℓ2 cases among them; the picks 15 min); ``--resume`` takes back
           the cases an interrupted run saved.
* wapiti   Wapiti 1.5 (benchmarks/wapiti.py builds it) on exactly crfopt's feature map and
           λ, in raw observation mode (each token's attributes as ``u:`` observations, the
           bias block as three more, one constant ``b`` observation for the transitions;
           ρ₁ = 0, ρ₂ = nλ), on OCR, CoNLL-2000, NER-nl and POS-EWT, 1 and 2 threads: each
           Wapiti algorithm's time to P*(1 + 1e-4) on its own clock (crashes reported),
           and the best crfopt optimizer's time to the same point, and CRFsuite trained
           on the problem in the same run (cached unless ``--retrain-crfsuite``). Checked
           first: Wapiti's feature count = d and its L-BFGS objective = n·P* (1e-6
           relative). Each problem is saved as it ends; ``--resume`` takes them back, and
           a run narrowed by ``--problems`` keeps the earlier run's other problems.
* P4       peak resident memory of sdca-gap on pos-ewt, float64 and float32 duals.
* P5       a 4-run grid with 1 and 2 joblib workers and a 2-worker Dask LocalCluster.
* startup  ``crfopt --help`` / ``crfopt list`` and the first ``compare`` cold and warm:
           benchmarks/bench_startup.py's measurements, called.
* L1       ℓ1 and search: ``crfopt.CRF`` against sklearn-crfsuite on the tutorial's NER
           features, one c1 = c2 = 0.1 fit on 700 sentences and on all of them and a
           10 × 3 RandomizedSearchCV, default threading, ``--rounds`` rounds alternating:
           benchmarks/l1_search.py's measurements, called.
* tagging  ``crfopt tag``, ``CRF.predict`` and ``CRF.predict_marginals`` against
           CRFsuite's tagger on the CoNLL-2000 test set (tokens per second, featurization
           and decoding apart, 1 and 2 threads), and the saved model's size and the
           tagger's peak memory beside CRFsuite's on CoNLL-2000 and POS-EWT, ℓ2 and
           ℓ1 + ℓ2 models: benchmarks/bench_tagging.py's measurement, called (its
           CRFsuite models are cached like P3's, ``--retrain-crfsuite``).

Runtime: 55 minutes in all for the run behind reports/performance.md (2026-11-28, 2-core
Xeon, quiet, ``--rounds 5 --retrain-crfsuite``): epochs 5.5 min (the 'before' tree's
kernels compiled once; ``--keep DIR`` saves that on reruns), floor 2 min (three
processes, measured on its own, 2026-11-29), threads 8 s, P1 2.3 min
(CRFsuite run to convergence without the bias block), P2 20 s, P3 42 min (CRFsuite
trained on the four problems, 12 min of it; POS-EWT the longest), P4 1 min, P5 1 min,
startup 2 min (the cold ``compare`` compiles every kernel it runs). The tagging section,
measured alone on a loaded machine (2026-12-07, ``--rounds 5``): 17 min when it trains
CRFsuite's POS-EWT models (load 5-6), 6-12 min with all four of them cached (load 3-6;
crfopt trains its four models in each run, 4-8.5 min of it). The wapiti section
is long and is not part of that run: on OCR alone, with ``--wapiti-algorithms l-bfgs
rprop+ bcd sgd-l1 --wapiti-seconds 900``, 100 min at a load of 5 (2026-12-07; its L-BFGS
needs 532 iterations to settle, and each capped algorithm takes its cap on each thread
count); CoNLL-2000's L-BFGS iterations take 2.2 s, POS-EWT's more. Run it with
``--only P3 wapiti --retrain-crfsuite`` to measure Wapiti and CRFsuite in the same run,
narrowed with ``--problems`` as needed.

``--render`` rewrites the report from the last run's raw figures
(.benchmarks/performance.json) without measuring anything: after editing
reports/performance_notes.md, the reading appended to the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))

import wapiti as wapiti_tool  # noqa: E402, F401  (benchmarks/wapiti.py; tests reach it here)
from crfsuite import crfsuite_reference  # noqa: E402, F401  (P1, P3; tests reach it here)
from harness import (  # noqa: E402
    RESULTS,
    ROOT,
    SECTIONS,
    dist_version,
    from_report,
    git_tree,
    label_of,
    machine,
    now_utc,
    ok_mark,
)
from perf_auto import AUTO_PROBLEMS, auto, auto_section  # noqa: E402
from perf_baselines import P3_PROBLEMS, PARALLEL_OPTIMIZERS, p1, p2, p3, p3_section  # noqa: E402
from perf_epochs import (  # noqa: E402
    BEFORE,
    epoch_section,
    epochs,
    floor,
    floor_section,
    pos_pass_rows,
    pos_pass_section,
    pos_passes,
    threads,
    threads_section,
)
from perf_parallel import (  # noqa: E402
    parallel,
    parallel_limits,
    parallel_limits_section,
    parallel_section,
    parallel_summary_rows,
)
from perf_system import p4, p5, startup, startup_section  # noqa: E402
from perf_users import TAGGING_ROWS, l1, l1_section, tagging, tagging_section  # noqa: E402
from perf_wapiti import (  # noqa: E402
    WAPITI_ALGORITHMS,
    wapiti,
    wapiti_section,
    wapiti_summary_rows,
)
from sdca4crf import SDCA4CRF_DEFAULT, sdca4crf_speed  # noqa: E402, F401  (tests reach it here)
from targets import TAGGING_TARGET, TARGETS  # noqa: E402

import crfopt  # noqa: E402

#: each section's measurement (its ``*_section`` renders it in write_report)
MEASURES = {
    "epochs": epochs,
    "floor": floor,
    "pos-passes": pos_passes,
    "threads": threads,
    "P1": p1,
    "P2": p2,
    "P3": p3,
    "parallel": parallel,
    "parallel-limits": parallel_limits,
    "auto": auto,
    "wapiti": wapiti,
    "P4": p4,
    "P5": p5,
    "startup": startup,
    "L1": l1,
    "tagging": tagging,
}
assert list(MEASURES) == SECTIONS


def _summary_rows(res: dict) -> list[str]:
    rows = []
    if "P1" in res and "skipped" not in res["P1"]:
        r = res["P1"]
        rows.append(
            f"| P1 | OCR value+gradient pass, 1 thread (all threads) vs CRFsuite evaluation | "
            f"{r['crfopt_pass_1thread_s'] * 1e3:.1f} ms ({r['crfopt_pass_all_threads_s'] * 1e3:.1f}"
            f" ms) | {r['crfsuite_eval_s'] * 1e3:.1f} ms | {r['ratio']:.2f} "
            f"({r['ratio_all_threads']:.2f}) | ≤ 1.0 | {ok_mark(r['ratio'] <= TARGETS['P1'])} |"
        )
    if "P2" in res and "skipped" not in res["P2"]:
        r = res["P2"]
        ref = r["sdca4crf"]
        rows.append(
            f"| P2 | OCR sdca-gap epoch vs sdca4crf's (its log: {ref['iterations_per_s']:.0f} it/s"
            f" over {ref['iterations_timed']} iterations) | {r['crfopt_epoch_s']:.3f} s | "
            f"{ref['epoch_s']:.1f} s | {r['speedup']:.1f}× faster | ≥ 50× | "
            f"{ok_mark(r['speedup'] >= TARGETS['P2'])} |"
        )
        rows.append(
            f"| P2b | the same epoch vs a lean NumPy SDCA ({r['numpy_iterations_per_s']:.0f} it/s)"
            f" | {r['crfopt_epoch_s']:.3f} s | {r['numpy_epoch_s']:.1f} s | "
            f"{r['numpy_speedup']:.1f}× faster | | |"
        )
    if "pos-passes" in res and "skipped" not in res["pos-passes"]:
        rows += pos_pass_rows(res["pos-passes"])
    if "P3" in res and "skipped" not in res["P3"]:
        for name, e in res["P3"]["problems"].items():
            for k, t in e["threads"].items():
                best = t["fastest"]
                what = f"{label_of(name)}, {k} thread{'s' if k != '1' else ''}: time to CRFsuite's"
                if best:
                    b = t["runs"][best]
                    rows.append(
                        f"| P3 | {what} objective (1e-4 rel.), {best} | "
                        f"{b['optimizer_s']:.1f} s | {e['crfsuite']['train_s']:.1f} s | "
                        f"{t['ratio']:.3f} | ≤ 0.1 | {ok_mark(t['ratio'] <= TARGETS['P3'])} |"
                    )
                else:
                    rows.append(
                        f"| P3 | {what} objective (1e-4 rel.): none reached it in the budget | "
                        f"| {e['crfsuite']['train_s']:.1f} s | | ≤ 0.1 | **missed** |"
                    )
    if "wapiti" in res and "skipped" not in res["wapiti"]:
        rows += wapiti_summary_rows(res["wapiti"])
    if "parallel" in res and "skipped" not in res["parallel"]:
        rows += parallel_summary_rows(res["parallel"])
    if "P4" in res and "skipped" not in res["P4"]:
        r = res["P4"]
        rows.append(
            f"| P4 | pos-ewt sdca-gap peak RSS, float32 (float64) duals | "
            f"{r['float32']['peak_rss'] / 2**30:.2f} GiB ({r['float64']['peak_rss'] / 2**30:.2f}"
            f" GiB) | | | ≤ 4 GiB | {ok_mark(r['float32']['peak_rss'] <= TARGETS['P4'])} |"
        )
    if "P5" in res and "skipped" not in res["P5"]:
        r = res["P5"]
        s = r["speedup"]
        rows.append(
            f"| P5 | 4-run grid: 2 joblib workers (2-worker Dask) vs 1 worker | "
            f"{r['seconds']['joblib, 2 workers']:.1f} s "
            f"({r['seconds']['dask LocalCluster, 2 workers']:.1f} s) | "
            f"{r['seconds']['joblib, 1 worker']:.1f} s | {s['joblib, 2 workers']:.2f}× "
            f"({s['dask LocalCluster, 2 workers']:.2f}×) | ≥ 1.7× | "
            f"{ok_mark(min(s['joblib, 2 workers'], s['dask LocalCluster, 2 workers']) >= 1.7)} |"
        )
    if "L1" in res and "skipped" not in res["L1"]:
        for key, what in (("fit-700", "700 sentences"), ("fit-all", "all 15,806 sentences")):
            e = res["L1"].get(key)
            if e:
                rows.append(
                    f"| L1 | one ℓ1 fit (c1 = c2 = 0.1), {what}, vs sklearn-crfsuite, same F "
                    f"({e['objective_rel']:+.0e} rel.) | {e['crfopt_s']:.2f} s | "
                    f"{e['crfsuite_s']:.2f} s | {e['ratio']:.2f} | ≤ 1.0 | "
                    f"{ok_mark(e['ratio'] <= 1.0 and e['objective_rel'] <= 1e-6)} |"
                )
        e = res["L1"].get("search")
        if e:
            rows.append(
                f"| L1 | RandomizedSearchCV 10 × 3 on 1,000 sentences vs sklearn-crfsuite | "
                f"{e['crfopt_s']:.1f} s | {e['crfsuite_s']:.1f} s | {e['ratio']:.2f} | ≤ 1.0 | "
                f"{ok_mark(e['ratio'] <= 1.0 and e['objective_rel'] <= 1e-6)} |"
            )
    if "tagging" in res and "speed" in res["tagging"]:
        sp = res["tagging"]["speed"]
        for what, ours, base, title in TAGGING_ROWS:
            one, two = (
                sp["rows"][f"{ours}, {k}"]["total_tok_s"] for k in ("1 thread", "2 threads")
            )
            theirs = sp["rows"][f"{base}, 1 thread"]["total_tok_s"]
            r1, r2 = (sp["ratios"][f"{what}|{k}"]["median"] for k in (1, 2))
            rows.append(
                f"| tagging | {label_of(sp['problem'])} test, {title}, tokens/s, 1 thread (2 "
                f"threads) | {one:,.0f} ({two:,.0f}) | {theirs:,.0f} | {r1:.2f}× ({r2:.2f}×) | "
                f"≥ {TAGGING_TARGET:g}× | {ok_mark(r1 >= TAGGING_TARGET)} |"
            )
    return rows


def write_report(res: dict, path: Path) -> None:
    """reports/performance.md from a result dict (sections missing from it are left out)."""
    lines = [
        "# Performance",
        "",
        f"Measured {res['date']} on {res['machine']} by `python benchmarks/performance.py`",
        f"(crfopt {res.get('crfopt', crfopt.__version__)}, numba {res['numba']}, "
        f"python-crfsuite {res['crfsuite']}). Each figure is a ratio against a baseline",
        "measured in the same run (each section's Details give the time it was measured).",
        "",
    ]
    measured = [key for key in SECTIONS if key in res and "skipped" not in res[key]]
    if measured:
        lines += [
            "| section | measured | tree | load (1 min) at start → end | minutes |",
            "|---|---|---|---|---|",
        ]
        for key in measured:
            sec = res[key]
            load = sec.get("load_1min")
            lines.append(
                f"| `{key}` | {sec.get('measured_at', '?')} | {sec.get('tree', 'not recorded')} | "
                + (f"{load[0]:.2f} → {load[1]:.2f}" if load else "not recorded")
                + (f" | {sec['elapsed_s'] / 60:.0f} |" if "elapsed_s" in sec else " | ? |")
            )
        lines.append("")
    rows = _summary_rows(res)
    if rows:
        lines += [
            "| | what | crfopt | baseline | ratio | target | |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    for key in ("P2", "P3"):
        if key in res and "skipped" in res[key]:
            lines += [f"{key}: not measured — {res[key]['skipped']}.", ""]
    if "epochs" in res:
        lines += epoch_section(res["epochs"])
    if "floor" in res:
        lines += floor_section(res["floor"])
    if "pos-passes" in res:
        lines += pos_pass_section(res["pos-passes"])
    if "threads" in res:
        lines += threads_section(res["threads"])
    if "P3" in res and "skipped" not in res["P3"]:
        lines += p3_section(res["P3"], res["machine"])
    if "parallel" in res:
        lines += parallel_section(res["parallel"])
    if "parallel-limits" in res:
        lines += parallel_limits_section(res["parallel-limits"])
    if "auto" in res:
        lines += auto_section(res["auto"])
    if "wapiti" in res:
        lines += wapiti_section(res["wapiti"])
    if "startup" in res:
        lines += startup_section(res["startup"])
    if "L1" in res:
        lines += l1_section(res["L1"])
    if "tagging" in res:
        lines += tagging_section(res["tagging"])
    notes = path.with_name("performance_notes.md")
    if notes.exists():  # the reading of these numbers: targets missed, why, what was fixed
        lines += [notes.read_text(encoding="utf-8").rstrip(), ""]
    lines += ["## Details", ""]
    for key in SECTIONS:
        if key in res:
            lines += [f"### {key}", "", "```json", json.dumps(res[key], indent=2), "```", ""]
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(
        description=doc.split("\n")[0],
        epilog=doc.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        metavar="SECTION",
        help=f"measure only these sections ({', '.join(SECTIONS)}); the others of the last "
        "run (.benchmarks/performance.json) stay in the report. Default: all",
    )
    ap.add_argument(
        "--problems",
        nargs="+",
        choices=list(dict.fromkeys(P3_PROBLEMS + AUTO_PROBLEMS)),
        metavar="PROBLEM",
        help="narrow epochs (ocr, conll2000), pos-passes (pos-ewt, pos-conll2000), P3 and "
        "wapiti (ocr, conll2000, ner-nl, pos-ewt), tagging (conll2000, pos-ewt) and auto "
        "(every built-in problem, 'ner-nl (file)') to these",
    )
    ap.add_argument(
        "--out",
        default=str(ROOT / "reports" / "performance.md"),
        help="the report to write (default: reports/performance.md)",
    )
    ap.add_argument(
        "--ref",
        default=BEFORE,
        help=f"epochs: the 'before' commit (default {BEFORE}, before issue 19's speed work)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="epochs: processes per tree, alternating; L1: rounds per measurement; tagging: "
        "rounds of every tagger (3)",
    )
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="epochs: count instructions under valgrind instead of CPU seconds (exact on a "
        "loaded machine; the first run compiles each tree under valgrind, ~15 min: use --keep)",
    )
    ap.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="epochs: keep the git worktrees and their numba caches in DIR for later runs",
    )
    ap.add_argument(
        "--sdca4crf",
        default=os.environ.get("CRFOPT_SDCA4CRF", str(SDCA4CRF_DEFAULT)),
        metavar="PATH",
        help="P2: the reference sdca4crf code (env CRFOPT_SDCA4CRF; default "
        "../shared/reference/sdca4crf beside the repository); P2 is skipped when absent",
    )
    ap.add_argument(
        "--optimizers",
        nargs="+",
        default=["sdca-gap", "sag-nus-star", "oeg"],
        metavar="NAME",
        help="P3 and wapiti: the crfopt optimizers tried (default: sdca-gap sag-nus-star oeg; "
        f"P3 on 2 threads also {', '.join(PARALLEL_OPTIMIZERS)} when registered)",
    )
    ap.add_argument(
        "--threads",
        nargs="+",
        type=int,
        default=[1, 2],
        metavar="K",
        help="P3 and wapiti: thread counts, each reported separately (default: 1 2)",
    )
    ap.add_argument(
        "--passes",
        type=float,
        default=60.0,
        help="P3 and wapiti: the budget of each crfopt run in effective passes (60)",
    )
    ap.add_argument(
        "--wapiti-algorithms",
        nargs="+",
        default=WAPITI_ALGORITHMS,
        choices=WAPITI_ALGORITHMS,
        metavar="NAME",
        help=f"wapiti: Wapiti's algorithms timed (default: {' '.join(WAPITI_ALGORITHMS)})",
    )
    ap.add_argument(
        "--wapiti-seconds",
        type=float,
        default=1800.0,
        help="wapiti: the wall-clock cap of each Wapiti algorithm's run (1800)",
    )
    ap.add_argument(
        "--wapiti-check-seconds",
        type=float,
        default=7200.0,
        help="wapiti: the cap of the L-BFGS run to convergence that checks the objective (7200)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="auto, wapiti: take back the cases (problems) an interrupted run saved "
        "(.benchmarks/auto-partial.json, .benchmarks/wapiti-partial.json)",
    )
    ap.add_argument(
        "--refit",
        action="store_true",
        help="auto: refit the rule on this run's candidates and write its table into "
        "crfopt/apps/auto.py before timing auto's picks",
    )
    ap.add_argument(
        "--retrain-crfsuite",
        action="store_true",
        help="P3, wapiti, tagging: train CRFsuite again instead of reusing its cached "
        "objective and seconds (P3, wapiti) or models (tagging)",
    )
    ap.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: rewrite the report from the last run "
        "(.benchmarks/performance.json) and the performance_notes.md beside the report",
    )
    args = ap.parse_args(argv)
    if args.render and args.only:
        ap.error("--render measures nothing; it cannot be combined with --only")
    if (
        args.rounds < 1
        or args.passes <= 0
        or min(args.threads) < 1
        or min(args.wapiti_seconds, args.wapiti_check_seconds) <= 0
    ):
        ap.error("--rounds, --passes, --threads and the --wapiti-*seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        if not RESULTS.exists():
            sys.exit(f"--render: no earlier run to render: {RESULTS} is missing")
        write_report(json.loads(RESULTS.read_text()), Path(args.out))
        print(f"rendered {args.out} from {RESULTS}")
        return 0
    import numba

    if {"P1", "P3", "tagging"} & set(args.only or SECTIONS):
        import pycrfsuite  # noqa: F401  (fail before the first measurement if missing)

    RESULTS.parent.mkdir(exist_ok=True)
    res: dict = {}
    if args.only:  # keep the other measurements of an earlier run
        res = json.loads(RESULTS.read_text()) if RESULTS.exists() else from_report(args.out)
    res.update(
        {
            "date": now_utc(),
            "machine": machine(),
            "crfopt": crfopt.__version__,
            "numba": numba.__version__,
            "crfsuite": dist_version("python-crfsuite"),
        }
    )
    tree = git_tree()  # before this run writes its report, which would make the tree dirty
    for key in args.only or SECTIONS:
        print(f"== {key}", flush=True)
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        res[key] = MEASURES[key](args)
        res[key]["measured_at"] = res["date"]
        res[key]["elapsed_s"] = time.perf_counter() - t0
        # which code and how quiet: a section kept from an earlier --only run may differ
        res[key]["tree"] = tree
        res[key]["load_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        if "skipped" in res[key]:
            print(f"{key} skipped: {res[key]['skipped']}", flush=True)
        print(json.dumps(res[key], indent=2), f"\n({res[key]['elapsed_s']:.0f} s)", flush=True)
        RESULTS.write_text(json.dumps(res, indent=2))
        write_report(res, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
