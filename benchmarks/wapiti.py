"""Wapiti (Lavergne, Cappé & Yvon, ACL 2010) built from source, for the tests and the
benchmark that measure crfopt against it.

Wapiti 1.5's C source ships inside the PyPI sdist ``libwapiti``. :func:`wapiti_binary`
downloads it with pip (``pip download --no-deps --no-binary :all: libwapiti==0.2.1``) into
crfopt's user cache (``<user cache>/crfopt/wapiti/``, ``CRFOPT_WAPITI_CACHE`` moves it),
runs ``make`` in its ``cwapiti/`` folder (seconds) and returns the binary; later calls
reuse the build.
``CRFOPT_WAPITI=/path/to/wapiti`` uses a binary of your own instead (its ``dat/`` examples
are then looked for beside it). Nothing of Wapiti enters the repository. When the download
or the build fails, :class:`WapitiUnavailable` says why; :func:`binary_or_skip` turns that
into a pytest skip that prints it.

The rest runs the binary and reads what it prints: :func:`train` (the feature count, the
objective and time of each iteration, a crash), :func:`dump` (the weights, to evaluate
crfopt's objective at them) and :func:`label`. Wapiti's objective is
Σᵢ NLLᵢ + ρ₁‖w‖₁ + ρ₂‖w‖²/2 (gradient.c, ``grd_gradient``); crfopt's is
(1/n)Σᵢ NLLᵢ + λ‖w‖²/2, so with ρ₁ = 0 the two are the same problem for ρ₂ = nλ, Wapiti's
value being n times crfopt's. It prints its objective with two decimals: compare it to
n·P only to that precision, and evaluate crfopt's P at the dumped weights for more.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

#: the sdist holding Wapiti 1.5.0's C source (cwapiti/)
SDIST = "libwapiti==0.2.1"
#: how long the download and the build may take before Wapiti counts as unavailable
DOWNLOAD_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 300.0


class WapitiUnavailable(RuntimeError):
    """Wapiti could not be downloaded or built here; the message says why."""


def _cache_root() -> Path:
    """``CRFOPT_WAPITI_CACHE``, else ``wapiti/`` in the platform's user cache of crfopt.

    Not ``CRFOPT_CACHE``: the test suite points that at a fresh folder per session, and
    the build is kept across sessions (the download is the only network access)."""
    own = os.environ.get("CRFOPT_WAPITI_CACHE")
    if own:
        root = Path(own).expanduser()
    else:
        import pooch

        root = Path(pooch.os_cache("crfopt")) / "wapiti"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _run(cmd: Sequence[str], what: str, timeout: float, cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WapitiUnavailable(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise WapitiUnavailable(f"{what} failed (exit {done.returncode}): {tail}")


def _build(root: Path) -> Path:
    """Download the sdist and build Wapiti in a fresh folder under ``root``; the built
    tree replaces ``root/src`` only once complete (a killed build leaves nothing half)."""
    if shutil.which("make") is None or not (shutil.which("cc") or shutil.which("gcc")):
        raise WapitiUnavailable("building Wapiti needs make and a C compiler (cc/gcc)")
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        tmp_path = Path(tmp)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                SDIST,
                "-d",
                str(tmp_path),
            ],
            f"pip download {SDIST}",
            DOWNLOAD_TIMEOUT_S,
        )
        archives = sorted(tmp_path.glob("libwapiti-*.tar.gz"))
        if not archives:
            raise WapitiUnavailable(f"pip download {SDIST} gave no source archive")
        with tarfile.open(archives[0]) as tar:
            if sys.version_info >= (3, 12):
                tar.extractall(tmp_path, filter="data")
            else:  # the archive is PyPI's sdist: plain files and folders
                tar.extractall(tmp_path)
        cwapiti = next(tmp_path.glob("libwapiti-*/cwapiti"), None)
        if cwapiti is None:
            raise WapitiUnavailable(f"{archives[0].name} has no cwapiti/ folder")
        _run(["make", "-C", str(cwapiti), "wapiti"], "make (Wapiti)", BUILD_TIMEOUT_S)
        if not (cwapiti / "wapiti").is_file():
            raise WapitiUnavailable("make ran but built no cwapiti/wapiti")
        target = root / "src"
        if target.exists():
            shutil.rmtree(target)
        cwapiti.rename(target)
    return target / "wapiti"


@cache
def wapiti_binary() -> Path:
    """The Wapiti executable: ``CRFOPT_WAPITI``, else built once into the user cache."""
    own = os.environ.get("CRFOPT_WAPITI")
    if own:
        path = Path(own).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise WapitiUnavailable(f"CRFOPT_WAPITI={own} is not an executable file")
        return path
    from filelock import FileLock

    root = _cache_root()
    binary = root / "src" / "wapiti"
    with FileLock(str(root / ".build.lock")):  # two processes build it once
        if not binary.is_file():
            binary = _build(root)
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=False
    )
    if "Wapiti v1.5" not in version.stderr + version.stdout:
        raise WapitiUnavailable(f"{binary} --version does not say Wapiti v1.5")
    return binary


def wapiti_data(name: str) -> Path:
    """A file of Wapiti's ``dat/`` examples (``nptrain.txt``, ``nppattern.txt``…)."""
    path = wapiti_binary().parent / "dat" / name
    if not path.is_file():
        raise WapitiUnavailable(f"no {name} beside the Wapiti binary ({path})")
    return path


def binary_or_skip() -> Path:
    """:func:`wapiti_binary`, or a pytest skip that prints why Wapiti is unavailable."""
    import pytest

    try:
        return wapiti_binary()
    except WapitiUnavailable as exc:
        print(f"Wapiti unavailable: {exc}", file=sys.stderr)
        pytest.skip(f"Wapiti unavailable: {exc}")
        raise  # unreachable: pytest.skip raises


# ----------------------------------------------------------------------------- training


@dataclass(frozen=True)
class Iteration:
    """One line of Wapiti's training log: iteration, objective (None: ``obj=NA``, the
    algorithms that do not compute it) and Wapiti's own clock, cumulative seconds."""

    number: int
    objective: float | None
    seconds: float


@dataclass
class TrainRun:
    """What ``wapiti train`` printed and how it ended."""

    command: list[str]
    labels: int | None = None
    blocks: int | None = None
    features: int | None = None
    iterations: list[Iteration] = field(default_factory=list)
    returncode: int | None = None
    stopped: bool = False  # stopped by us (the target was reached or time ran out)
    timed_out: bool = False
    log: str = ""
    wall_s: float = math.nan

    @property
    def crashed(self) -> str | None:
        """``"signal 11 (SIGSEGV)"``, ``"exit 1"``… when Wapiti died on its own."""
        if self.stopped or self.returncode in (0, None):
            return None
        if self.returncode < 0:
            sig = -self.returncode
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = "?"
            return f"signal {sig} ({name})"
        return f"exit {self.returncode}"

    @property
    def final_objective(self) -> float | None:
        values = [it.objective for it in self.iterations if it.objective is not None]
        return values[-1] if values else None


_ITERATION = re.compile(r"^\s*\[\s*(\d+)\]\s+obj=(\S+).*time=([\d.]+)s/([\d.]+)s")
_SUMMARY = re.compile(r"^\s*nb (labels|blocks|features):\s+(\d+)")


def train(
    data: str | os.PathLike[str],
    model: str | os.PathLike[str],
    *,
    pattern: str | os.PathLike[str] | None = None,
    algorithm: str = "l-bfgs",
    rho1: float = 0.0,
    rho2: float,
    threads: int = 1,
    maxiter: int = 0,
    sparse: bool = False,
    options: Iterable[str] = (),
    stop: Callable[[Iteration], bool] | None = None,
    keep_model: bool = False,
    timeout: float | None = None,
    echo: Callable[[str], None] | None = None,
) -> TrainRun:
    """``wapiti train`` on ``data`` into ``model``, to convergence unless ``maxiter``.

    Wapiti's own stopping rules on the error rate and the objective's progress are
    switched off (``--stopwin 0 --stopeps 0``): L-BFGS then stops where its gradient
    test or its line search says it has converged. ``stop(iteration)`` returning True
    ends the run there (the process is terminated); so does ``timeout`` (wall seconds).
    With ``keep_model``, ``stop`` and ``timeout`` interrupt Wapiti as Ctrl-C does instead
    (SIGINT): it drops the step under way, restores the last finished iteration's
    weights (lbfgs.c, ``uit_stop``) and saves the model. That is the iteration ``stop``
    saw or, when Wapiti ran on before the signal landed, a later one, whose line is read
    too: the saved weights are always those of the last iteration in ``iterations``.
    ``echo`` sees every line Wapiti prints as it prints it.
    """
    cmd = [str(wapiti_binary()), "train", "-a", algorithm, "-1", repr(float(rho1))]
    cmd += ["-2", repr(float(rho2)), "-t", str(threads), "--stopwin", "0", "--stopeps", "0"]
    if pattern is not None:
        cmd += ["-p", os.fspath(pattern)]
    if maxiter:
        cmd += ["-i", str(maxiter)]
    if sparse:
        cmd.append("-s")
    cmd += [*options, os.fspath(data), os.fspath(model)]
    run = TrainRun(cmd)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    timer = None
    if timeout is not None:

        def expire() -> None:
            run.timed_out = run.stopped = True
            if keep_model:
                proc.send_signal(signal.SIGINT)
            else:
                proc.terminate()

        timer = threading.Timer(timeout, expire)
        timer.start()
    lines = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if echo is not None:
                echo(line.rstrip("\n"))
            m = _SUMMARY.match(line)
            if m:
                setattr(run, m.group(1), int(m.group(2)))
                continue
            m = _ITERATION.match(line)
            if not m:
                continue
            obj = None if m.group(2) == "NA" else float(m.group(2))
            it = Iteration(int(m.group(1)), obj, float(m.group(4)))
            run.iterations.append(it)
            if stop is not None and not run.stopped and stop(it):
                run.stopped = True
                if keep_model:
                    proc.send_signal(signal.SIGINT)
                else:
                    proc.terminate()
        run.returncode = proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run.wall_s = time.perf_counter() - t0
    run.log = "".join(lines)
    return run


def dump(model: str | os.PathLike[str]) -> list[tuple[str, str | None, str, float]]:
    """Every weight of a model, zeros included: (observation, previous label or None for
    a unigram feature, label, weight), printed with 20 decimals."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dump.txt"
        _checked([str(wapiti_binary()), "dump", "-p", "20", "--all", os.fspath(model), str(out)])
        rows = []
        for line in out.read_text(encoding="utf-8").splitlines():
            if not line:
                continue
            obs, prev, label, value = line.rsplit("\t", 3)
            rows.append((obs, None if prev == "#" else prev, label, float(value)))
    return rows


def label(
    model: str | os.PathLike[str], data: str | os.PathLike[str], out: str | os.PathLike[str]
) -> list[list[tuple[str, str]]]:
    """``wapiti label --check``: (gold, predicted) labels of every token, per sentence
    (Wapiti writes each input line with its prediction appended)."""
    binary = str(wapiti_binary())
    _checked([binary, "label", "-m", os.fspath(model), "--check", os.fspath(data), os.fspath(out)])
    sentences: list[list[tuple[str, str]]] = [[]]
    for line in Path(out).read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if not fields:
            if sentences[-1]:
                sentences.append([])
            continue
        sentences[-1].append((fields[-2], fields[-1]))
    return [s for s in sentences if s]


def _checked(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-500:]}")


# ----------------------------------------------------------------------------- raw mode


def write_raw(problem, path: str | os.PathLike[str]) -> None:
    """The problem's training split as a Wapiti data file in raw observation mode (no
    pattern file): each token's attributes as ``u:<column>`` observations, the bias
    block's three attributes as ``u:bias``, ``u:first``, ``u:last``, and one constant
    ``b`` observation whose K × K bigram features are the transition block; the label
    last. Wapiti then has exactly crfopt's feature map (:func:`weights_from_raw` maps
    its weights back). Binary attribute values only: Wapiti has no feature values."""
    import numpy as np

    kd = problem.data
    labels = problem.label_names or [str(k) for k in range(problem.n_labels)]
    A = problem.n_attributes
    with open(path, "w", encoding="utf-8") as f:
        for i in range(problem.n):
            s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
            for r in range(s, e):
                if kd.dense:
                    x = kd.X[r, :A]
                    cols = np.flatnonzero(x)
                    values = x[cols]
                else:
                    q0, q1 = int(kd.indptr[r]), int(kd.indptr[r + 1])
                    cols, values = kd.indices[q0:q1], kd.values[q0:q1]
                    keep = cols < A
                    cols, values = cols[keep], values[keep]
                if np.any(values != 1.0):
                    raise ValueError(
                        f"{problem.name}: token {r} has attribute values other than 1; "
                        "Wapiti's features are binary"
                    )
                obs = [f"u:{j}" for j in cols.tolist()]
                if problem.bias:
                    obs.append("u:bias")
                    if r == s:
                        obs.append("u:first")
                    if r == e - 1:
                        obs.append("u:last")
                obs.append("b")
                f.write(" ".join(obs) + " " + labels[int(kd.y[r])] + "\n")
            f.write("\n")


def weights_from_raw(problem, rows: Iterable[tuple[str, str | None, str, float]]):
    """crfopt's weight vector holding the :func:`dump` of a raw-mode model."""
    w = problem.zeros()
    blocks = problem.unpack(w)
    names = problem.label_names or [str(k) for k in range(problem.n_labels)]
    lab = {name: k for k, name in enumerate(names)}
    bias = {"u:bias": 0, "u:first": 1, "u:last": 2}
    for obs, prev, label_name, value in rows:
        k = lab[label_name]
        if prev is not None:
            blocks.transition[lab[prev], k] = value
        elif obs in bias:
            blocks.bias[k, bias[obs]] = value
        else:
            blocks.emission[k, int(obs[2:])] = value
    return w
