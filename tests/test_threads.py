"""Batch kernels hold every BLAS library they call to one thread (crfopt.kernels.threads)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crfopt.kernels.jit import JIT_ENABLED


@pytest.mark.skipif(not JIT_ENABLED, reason="the NumPy path sets no BLAS limit")
def test_the_batch_limit_covers_the_blas_the_kernels_load():
    """The limit covers the libraries loaded when it was first taken; the compiled
    kernels' BLAS (scipy's, through numba) is loaded only when a kernel that calls it is
    first linked, inside the first batch call. In a fresh process, after a dense pass,
    every BLAS library then loaded must be one the limit holds, and held to 1 thread
    while a batch kernel runs."""
    code = """
import json
import crfopt
from threadpoolctl import ThreadpoolController
from crfopt.kernels import threads

p = crfopt.load_problem("synthetic", dense=True)
p.value_and_gradient(p.zeros())
def blas(controller):
    return controller.select(user_api="blas").lib_controllers

held = {lib.filepath for lib in blas(threads._controller)}
loaded = {lib.filepath for lib in blas(ThreadpoolController())}
with threads.batch_threads():
    inside = [lib.num_threads for lib in blas(ThreadpoolController())]
print(json.dumps({"missed": sorted(loaded - held), "inside": inside}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["missed"] == []
    assert got["inside"] and set(got["inside"]) == {1}
