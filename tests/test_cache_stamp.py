"""numba's disk cache follows crfopt's compiled sources, not only the cached function's
own file (issue 19 item 5: ``cache=True`` where it is safe).

numba stamps a cache entry with the source of the function it caches; a plugin block
that inlines a crfopt kernel kept the old kernel's machine code after the kernel changed.
The stamp of crfopt's functions and of those compiled with ``crfopt.jit`` now includes a
digest of crfopt's compiled modules.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crfopt.kernels.jit import JIT_ENABLED, compiled_sources_digest

# A third-party block compiled with crfopt.jit around a crfopt kernel; the script's first
# argument, unless "-", stands in for an edited kernel (another digest of crfopt's sources).
SCRIPT = """
import sys
from numba.core import event
import crfopt.kernels.jit as J
if sys.argv[1] != "-":
    J.compiled_sources_digest = lambda root=None: sys.argv[1]
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
sys.path.insert(0, sys.argv[2])
import userblock
assert userblock.block(0.0) == 1.0
print("compiled:" + ",".join(compiled))
"""

USERBLOCK = """
import crfopt
from crfopt.kernels.vmath import exp_scalar

@crfopt.jit
def block(x):
    return exp_scalar(x)
"""


@pytest.mark.skipif(not JIT_ENABLED, reason="numba's cache exists only with the JIT")
def test_a_cached_plugin_block_recompiles_when_crfopt_kernels_change(tmp_path):
    (tmp_path / "userblock.py").write_text(USERBLOCK)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def compiled(digest: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, digest, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.strip().splitlines()[-1].removeprefix("compiled:").split(",")

    assert "block" in compiled("-")  # an empty cache: compiled and stored
    assert "block" not in compiled("-")  # the same sources: loaded from the cache
    assert "block" in compiled("edited")  # a kernel changed: the entry is stale
    assert "block" not in compiled("edited")  # and is stored again


def test_the_digest_covers_compiled_modules_only(tmp_path):
    root = tmp_path / "crfopt"
    files = {
        "kernels/_numba/chain.py": "X = 1\n",  # every kernels module: constants are compiled in
        "optim/pieces.py": "@jit(inline=True)\ndef f(x):\n    return x\n",
        "apps/cli.py": "def main():\n    pass\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    before = compiled_sources_digest(root)
    for rel, changes in (
        ("apps/cli.py", False),
        ("kernels/_numba/chain.py", True),
        ("optim/pieces.py", True),
    ):
        (root / rel).write_text(files[rel] + "# edited\n")
        assert (compiled_sources_digest(root) != before) is changes, rel
        (root / rel).write_text(files[rel])
        assert compiled_sources_digest(root) == before


UNCACHABLE = """
import numba
import crfopt

@crfopt.jit
def block(x):
    return x + 0 * numba.get_num_threads()  # a dynamic global: numba cannot cache this
"""


@pytest.mark.skipif(not JIT_ENABLED, reason="numba's cache exists only with the JIT")
def test_a_block_numba_cannot_cache_still_compiles_with_numbas_warning(tmp_path):
    """numba reads its locator's ``_py_file`` to warn that it cannot cache a function:
    crfopt's stamping locator must answer like numba's own (it raised AttributeError,
    so such a plugin block failed to compile at all)."""
    (tmp_path / "uncachable.py").write_text(UNCACHABLE)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import uncachable; "
        "assert uncachable.block(1.0) == 1.0; print('ran')"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ran")
    assert "Cannot cache compiled function" in out.stderr
