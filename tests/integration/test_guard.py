"""``fallback="error"`` holds for every caller of ``triton.compile``, not only Triton's JIT: Inductor compiles its
kernels (and its copies of user kernels) by calling ``triton.compile`` itself, in the program and in compile-worker
processes. Here a plain ``triton.compile`` (what Inductor's ``CachingAutotuner._precompile_config`` calls) stands in
for it, in the activating process and in a process it starts afterwards, on this GPU-less host (Triton compiles for
a target without a device)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def guarded_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""

# compile the kernel as Inductor does: triton.compile(ASTSource(...)) with an explicit target
COMPILE = """
import sys
sys.path.insert(0, {folder!r})
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import guarded_kernel


def compile_it(block):
    src = ASTSource(guarded_kernel.guarded_copy, {{"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}},
                    {{(3,): block}})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32))
"""


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip


@pytest.fixture
def setting(tmp_path):
    (tmp_path / "guarded_kernel.py").write_text(KERNEL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    for name in ("TRITON_CACHE_MANAGER", "AOTPACK_FALLBACK", "AOTPACK_CACHE_MANAGER", "AOTPACK_COMPILED_DIR"):
        env.pop(name, None)
    return COMPILE.format(folder=str(tmp_path)), env


def test_error_refuses_every_compilation_in_the_process_and_those_it_starts(setting):
    compile_code, env = setting
    code = compile_code + textwrap.dedent("""
    import os, subprocess
    from aotpack.runtime import _aotpack_activate, _aotpack_guard
    _aotpack_activate.activate([], "error", LookupError)
    try:
        compile_it(64)
    except _aotpack_guard.CompilationRefused as exc:
        print("refused:", exc)
    # a compile worker: a process started afterwards, which knows nothing of activate() but its environment
    worker = subprocess.run([sys.executable, "-c", {worker!r}], capture_output=True, text=True)
    print("worker:", worker.returncode, worker.stderr.strip().splitlines()[-1])
    _aotpack_activate.deactivate()
    print("after:", os.environ.get("TRITON_CACHE_MANAGER"), os.environ.get("AOTPACK_FALLBACK"))
    print("compiled:", compile_it(64).name)
    """).format(worker=compile_code + "\ncompile_it(128)\n")
    done = run(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    refused, worker, after, compiled = done.stdout.splitlines()
    assert refused.startswith("refused: Triton would compile guarded_copy (Triton cache key ")
    assert "outside Triton's JIT (Inductor for torch.compile" in refused and "fallback='error'" in refused
    assert worker.startswith("worker: 1 ") and "CompilationRefused: Triton would compile guarded_copy" in worker
    assert after == "after: None None"  # deactivate() gives the environment back: compiling works again
    assert compiled == "compiled: guarded_copy"


def test_error_lets_a_kernel_the_cache_holds_load_and_jit_lists_what_compiled(setting):
    compile_code, env = setting
    code = compile_code + textwrap.dedent("""
    import json
    from aotpack.runtime import _aotpack_activate, _aotpack_guard
    compile_it(64)  # Triton's cache holds it now
    _aotpack_activate.activate([], "error", LookupError)
    print("hit:", compile_it(64).name)  # loaded, not compiled
    _aotpack_activate.activate([], "jit", LookupError)
    compile_it(32)
    compile_it(32)  # the second time Triton's cache holds it
    _aotpack_guard.jit_compiles()  # the JIT's hook let its compilation through and listed it: not twice
    compile_it(16)
    _aotpack_guard.jit_compiles()  # the JIT's, found in Triton's cache: the mark goes with that lookup
    compile_it(64)
    compile_it(8)  # another caller's: listed
    print(json.dumps([{k: e[k] for k in ("event", "name")} for e in _aotpack_activate.coverage()]))
    """)
    done = run(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    hit, listed = done.stdout.splitlines()
    assert hit == "hit: guarded_copy"
    assert json.loads(listed) == [{"event": "compiled", "name": "guarded_copy"}] * 2
    assert done.stderr.count("Triton compiles it outside the JIT") == 1  # said once per kernel


def test_jit_lists_what_the_processes_it_started_compiled_in_the_activating_process(setting, tmp_path):
    # Inductor's compile workers compile most of a torch.compile'd program's kernels: under fallback="jit" their
    # compilations reach the activating process's coverage() (and so AOTPACK_REPORT), each with its process id;
    # a worker's own coverage() lists nothing of the others, and deactivate() keeps what was listed
    compile_code, env = setting
    worker = compile_code + textwrap.dedent("""
    from aotpack.runtime import _aotpack_activate
    compile_it(WORKER_BLOCK)
    compile_it(WORKER_BLOCK)  # (Triton's cache holds it now: listed once)
    print(len(_aotpack_activate.coverage()))
    """)
    code = compile_code + textwrap.dedent("""
    import json, os, subprocess
    from aotpack.runtime import _aotpack_activate, _aotpack_report
    # AOTPACK_REPORT, as a package registers it at its import (before activate()): written at exit
    _aotpack_report.report_at_exit({report!r}, lambda: {{"package": "p", "compilations": _aotpack_activate.coverage()}})
    _aotpack_activate.activate([], "jit", LookupError)
    compile_it(64)
    pids = []
    for block in (32, 16):
        done = subprocess.run([sys.executable, "-c", {worker!r}.replace("WORKER_BLOCK", str(block))], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        pids.append(done.stdout.split()[-1])
    folder = os.environ["AOTPACK_COMPILED_DIR"]
    _aotpack_activate.deactivate()
    events = _aotpack_activate.coverage()
    print(json.dumps({{"pids": pids, "events": [[e["name"], e["pid"] == os.getpid()] for e in events],
                       "workers": len({{e["pid"] for e in events}}), "folder": os.path.isdir(folder)}}))
    print(folder)
    """).format(worker=worker, report=str(tmp_path / "report"))
    done = run(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    listed, folder = done.stdout.splitlines()
    (report,) = (tmp_path / "report").glob("p.*.json")
    assert [e["name"] for e in json.loads(report.read_text())["compilations"]] == ["guarded_copy"] * 3
    got = json.loads(listed)
    assert got["pids"] == ["0", "0"]  # a worker holds no list of its own
    assert got["events"] == [["guarded_copy", True], ["guarded_copy", False], ["guarded_copy", False]]
    assert got["workers"] == 3 and got["folder"]
    assert not Path(folder).exists()  # the lists go with the process that made them


MANAGER = """
from triton.runtime.cache import FileCacheManager

class Counting(FileCacheManager):
    def get_group(self, filename):
        print("program's manager:", filename)
        return super().get_group(filename)
"""


def test_the_program_s_own_cache_manager_still_serves_behind_the_guard(setting, tmp_path):
    compile_code, env = setting
    (tmp_path / "programs_manager.py").write_text(MANAGER)
    env = {**env, "TRITON_CACHE_MANAGER": "programs_manager:Counting"}
    code = compile_code + textwrap.dedent("""
    import os
    from aotpack.runtime import _aotpack_activate, _aotpack_guard
    _aotpack_activate.activate([], "error", LookupError)
    try:
        compile_it(64)
    except _aotpack_guard.CompilationRefused:
        print("refused")
    _aotpack_activate.deactivate()
    print(os.environ["TRITON_CACHE_MANAGER"])
    """)
    done = run(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["program's manager: guarded_copy.json", "refused", "programs_manager:Counting"]


def test_the_recorder_copies_what_a_process_without_the_agent_compiles_or_finds(setting, tmp_path):
    """aotpack record names Recorder as Triton's cache manager for the whole program: a process the agent does
    not run in (a compile worker forked before it started, a listener replaced) still has each entry it compiles,
    or finds in its cache, copied into the recording, with its event."""
    compile_code, env = setting
    events = tmp_path / "events"
    env = {**env, "TRITON_CACHE_MANAGER": "aotpack.runtime._aotpack_guard:Recorder", "AOTPACK_RECORD_DIR": str(events)}
    jit = "from aotpack.runtime import _aotpack_guard\n_aotpack_guard.jit_compiles()\ncompile_it(32)\n"
    done = run(compile_code + jit + "print(compile_it(64).hash)\nprint(compile_it(64).hash)\n", env)
    assert done.returncode == 0, done.stderr[-3000:]
    first, again = done.stdout.split()
    assert first == again
    (lines,) = [p.read_text().splitlines() for p in events.glob("*.jsonl")]
    # the JIT's own compilation (the agent records it) is not copied; another's, compiled then found: once
    (event,) = [json.loads(line) for line in lines]
    assert event["event"] == "cached" and event["name"] == "guarded_copy" and event["target"] == "cuda:90"
    entry = events / "triton-cache" / event["key"]
    assert sorted(p.name for p in entry.iterdir()) == event["files"] and "guarded_copy.cubin" in event["files"]
    # the program's own manager, if it named one, still stores the entries
    assert any((tmp_path / "cache").rglob("guarded_copy.cubin"))


MODULE = """
from triton.runtime.build import compile_module_from_src
SRC = r'''
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "made_here", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_made_here(void) { return PyModule_Create(&mod); }
'''
"""


@pytest.mark.parametrize("fallback", ["error", "jit"])
def test_a_c_module_no_package_holds_is_refused_or_listed_before_the_compiler_runs(setting, fallback):
    """A module Triton builds with a C compiler (a kernel launcher, its driver's utilities) that no package holds
    is a compilation like a kernel's: refused under fallback="error" before the compiler runs (a served machine may
    have none), built and listed under "jit"."""
    compile_code, env = setting
    code = (
        compile_code
        + MODULE
        + textwrap.dedent(f"""
    from aotpack.runtime import _aotpack_activate, _aotpack_guard
    _aotpack_activate.activate([], {fallback!r}, LookupError)
    try:
        print("built", compile_module_from_src(SRC, "made_here").__name__)
    except _aotpack_guard.CompilationRefused as exc:
        print("refused", exc)
    print([e["name"] for e in _aotpack_activate.coverage()])
    """)
    )
    done = run(code, {**env, "CC": "/no/such/compiler" if fallback == "error" else env.get("CC", "gcc")})
    assert done.returncode == 0, done.stderr[-3000:]
    said, listed = done.stdout.splitlines()
    if fallback == "error":
        assert said.startswith("refused Triton would build its C module made_here (Triton cache key "), said
        assert listed == "[]"
    else:
        assert said == "built made_here" and listed == "['made_here']"


@pytest.mark.parametrize("fallback", ["error", "jit"])
def test_a_cache_manager_set_after_activate_does_not_open_a_way_around_the_fallback(setting, fallback):
    """The program sets its own cache manager after activate() (Triton's knobs): the guard is no longer asked, and
    the check behind it, where Triton compiles (a backend's stages), holds the fallback all the same."""
    compile_code, env = setting
    code = compile_code + textwrap.dedent(f"""
    from triton import knobs
    from triton.runtime.cache import FileCacheManager
    from aotpack.runtime import _aotpack_activate, _aotpack_guard
    _aotpack_activate.activate([], {fallback!r}, LookupError)
    knobs.cache.manager_class = type("Mine", (FileCacheManager,), {{}})
    try:
        print("compiled", compile_it(64).name)
    except _aotpack_guard.CompilationRefused as exc:
        print("refused", exc)
    print([e["name"] for e in _aotpack_activate.coverage()])
    """)
    done = run(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    said, listed = done.stdout.splitlines()
    if fallback == "error":
        assert said.startswith("refused Triton would compile guarded_copy ") and "set after activate()" in said, said
        assert listed == "[]"
    else:
        assert said == "compiled guarded_copy" and listed == "['guarded_copy']"
