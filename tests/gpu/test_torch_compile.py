"""torch.compile under an activated package (issue 43, first part): Inductor compiles its own kernels by calling
``triton.compile`` itself, in the program and in its compile-worker processes, never through Triton's JIT. With
``activate(fallback="error")`` none of them compiles: the first is refused before compiling, in whichever
process compiles it, and the error reaches the program; with ``fallback="jit"`` they compile and ``coverage()``
lists them. Each case in a fresh process with empty Triton and Inductor caches, where Triton also builds its
driver's C module (cuda_utils) before the first kernel: refused or listed too, unless the program built it before
activate()."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import json, os, sys, torch
from aotpack.runtime import _aotpack_activate


def f(x, y):
    return torch.nn.functional.gelu(x @ y) * 2 + x.sum(dim=-1, keepdim=True)


x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")


def ready():  # Inductor's compile workers up and ready: the next compilation goes to one of them
    import time
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.warm_pool()
    for _ in range(600):
        if AsyncCompile._ready_future is not None and AsyncCompile._ready_future.done():
            return
        time.sleep(0.1)


if {before!r}:  # torch.compile ran before activate(): its compile workers are up, and ready
    torch.compile(lambda a: a.cos() + 1)(x)
    ready()
if {utils!r}:  # Triton's driver up before activate(): its C module (cuda_utils) built and loaded already
    import triton

    triton.runtime.driver.active.get_current_device()
_aotpack_activate.activate([], {fallback!r}, LookupError)
if {before!r}:  # workers started anew by activate(), ready again: the next compilation is a worker's
    ready()
compiled = torch.compile(f)
try:
    out = compiled(x, y)
    torch.cuda.synchronize()
    print(json.dumps({{"ran": True, "equal": bool(torch.allclose(out, f(x, y), atol=1e-3)),
                      "coverage": [e["name"] for e in _aotpack_activate.coverage()]}}))
except Exception as exc:
    print(json.dumps({{"ran": False, "error": f"{{type(exc).__name__}}: {{exc}}"[:2000]}}))
"""


def run(tmp_path: Path, fallback: str, threads: str, before: bool = False, utils: bool = True) -> dict:
    case = f"{fallback}-{threads}-{before}-{utils}"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / f"triton-{case}"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor-{case}"),
           "TORCHINDUCTOR_COMPILE_THREADS": threads, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM).format(fallback=fallback, before=before, utils=utils)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    print(fallback, threads, result)
    return result


@pytest.mark.parametrize("threads", ["1", "4"], ids=["in-process", "compile-workers"])
def test_fallback_error_refuses_inductor_s_compilations_in_every_process(tmp_path, threads):
    got = run(tmp_path, "error", threads)
    assert not got["ran"]
    assert "CompilationRefused" in got["error"] and "Triton would compile triton_" in got["error"]


def test_compile_workers_started_before_activate_are_restarted_guarded(tmp_path):
    """The program compiled something before activate(): its workers, up and ready, knew nothing of the guard.
    activate() restarts them; the next compilation, in a worker, is refused there."""
    got = run(tmp_path, "error", "4", before=True)
    assert not got["ran"]
    assert "CompilationRefused" in got["error"] and "(__main__.py)" in got["error"]  # a compile worker's argv[0]


def test_fallback_jit_lets_inductor_compile_and_lists_it(tmp_path):
    got = run(tmp_path, "jit", "1")
    assert got["ran"] and got["equal"]
    assert got["coverage"] and all(name.startswith("triton_") for name in got["coverage"])


def test_triton_s_driver_module_is_refused_or_listed_like_a_kernel(tmp_path):
    """A served program's first Triton kernel needs the driver's C module, which Triton builds with a C compiler
    where its cache lacks it: under fallback="error" that build is refused (no package here holds it), under "jit"
    it is listed beside the kernels."""
    refused = run(tmp_path, "error", "1", utils=False)
    assert not refused["ran"] and "Triton would build its C module cuda_utils" in refused["error"]
    listed = run(tmp_path, "jit", "1", utils=False)
    assert listed["ran"] and listed["equal"]
    assert "cuda_utils" in listed["coverage"] and any(n.startswith("triton_") for n in listed["coverage"])
