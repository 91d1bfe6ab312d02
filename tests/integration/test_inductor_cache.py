"""torch.compile's own caches, recorded and served, on the CPU (torch's CPU build compiles C++ where a GPU build
compiles Triton; the caches and Dynamo's profile are the same machinery): ``aotpack record`` of a program whose
compiled function meets two sizes saves them with the recipe (``inductor_cache:``), the built wheel ships them,
and a fresh process that activates it and starts at sizes never recorded compiles no graph: Dynamo compiles the
size dynamic from the first call (the recorded profile) and Inductor finds the recorded graph. Without them the
same process compiles a graph for its first size and another when the size changes. The graphs' C++ kernels
(Inductor builds them with a C++ compiler as a graph loads) are the recorded process's shared objects: served
with no compiler on PATH and ``fallback="error"``; a graph the recording never compiled is refused there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..shared import without_c_compiler
from .helpers import install_wheel

pytest.importorskip("torch")
if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("torch.compile on the CPU needs a C++ compiler", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = textwrap.dedent("""
    import json, os, sys
    import torch, triton  # noqa: F401  (a GPU program imports Triton; the recorder starts with it)

    @torch.compile
    def f(x):
        return torch.nn.functional.gelu(x).sum(0) * 2

    @torch.compile
    def g(x):  # a graph only a program run with OTHER=1 compiles
        return torch.sigmoid(x).amax(0)

    out = []
    for n in [int(s) for s in sys.argv[1:]]:
        torch.manual_seed(n)
        out.append((g if os.environ.get("OTHER") else f)(torch.randn(n, 16)).tolist())
    counters = torch._dynamo.utils.counters
    print(json.dumps({"out": out, "frames": counters["frames"]["total"],
                      "hits": counters["inductor"]["fxgraph_cache_hit"]}))
""")
SERVE = textwrap.dedent("""
    import runpy, sys
    if sys.argv[1] != "-":
        import graphs_kernels
        graphs_kernels.activate(fallback=sys.argv[1])
    sys.argv = [sys.argv[2], *sys.argv[3:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


def run(args, tmp_path, cache, site=None, fails=False, **more):
    path = os.pathsep.join([str(ROOT), *([str(site)] if site else [])])
    env = {**os.environ, "PYTHONPATH": path, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / cache), **more}
    for name in ("TORCH_COMPILE_JOB_ID", *(("CC", "CXX") if "PATH" in more else ())):
        env.pop(name, None)
    done = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert (done.returncode != 0) == fails, done.stderr[-3000:]
    return done


def test_a_recording_s_graphs_serve_sizes_it_never_saw_with_no_compiled_graph(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "serve.py").write_text(SERVE)
    recorded = run(["-m", "aotpack", "record", "-o", "r/recipe.yaml", "--package", "graphs_kernels", "--",
                    "python", "prog.py", "8", "12"], tmp_path, "record-cache")  # fmt: skip
    assert "torch.compile's caches of 1 process" in recorded.stderr + recorded.stdout
    recipe = (tmp_path / "r" / "recipe.yaml").read_text()
    assert "inductor_cache: inductor-cache" in recipe
    files = sorted((tmp_path / "r" / "inductor-cache").iterdir())
    sets = [p for p in files if p.suffix != ".cpp"]
    assert [p.suffix for p in sets] == [".bin", ".json"]
    meta = json.loads(sets[1].read_text())
    assert meta["job_id"] == "aotpack"  # record runs it under a job id
    objects = sorted(p.name for p in files if p.suffix == ".cpp")  # each C++ kernel's shared object, kept
    assert len(objects) == meta["cpp_kernels"] >= 1 and sorted(meta["cpp"]["kernels"].values()) == [
        p[:-4] for p in objects
    ]
    # a GPU program's recording names the targets of its Triton entries; this CPU one has none, and builds as written
    assert "targets:" not in recipe
    run(["-m", "aotpack", "build", "r/recipe.yaml", "-o", "dist"], tmp_path, "build-cache")
    site = install_wheel(next((tmp_path / "dist").glob("*.whl")), tmp_path / "site")
    assert sorted(p.name for p in (site / "graphs_kernels" / "_inductor_cache").iterdir()) == [p.name for p in files]

    bare = without_c_compiler(tmp_path / "bin")  # served where no compiler is
    (tmp_path / "tmp").mkdir()
    served = json.loads(run(["serve.py", "error", "prog.py", "20", "33"], tmp_path, "served", site, PATH=bare,
                            TMPDIR=str(tmp_path / "tmp")).stdout)  # fmt: skip
    cold = json.loads(run(["serve.py", "-", "prog.py", "20", "33"], tmp_path, "cold", site).stdout)
    assert served["frames"] == 1 and served["hits"] >= 1  # one graph, dynamic from the first call, found
    assert cold["frames"] == 2 and cold["hits"] == 0  # a static graph for 20, then a dynamic one
    assert served["out"] == cold["out"]
    # its C++ kernel the recording's object (no compiler here, and fallback="error" refuses a build), loaded from
    # a folder of the process's own: nothing written into Inductor's shared cache folder, none left in the temp one
    assert not list((tmp_path / "served").rglob("*.so")) and not list((tmp_path / "tmp").glob("aotpack-cpp-*"))

    other = run(["serve.py", "error", "prog.py", "20"], tmp_path, "other", site, fails=True, OTHER="1")
    assert "Inductor would compile Inductor's C++ kernel" in other.stderr  # a graph never recorded: refused
    assert "no activated package holds it" in other.stderr
    # Inductor generating a graph's code probes the CPU's vector extensions with small programs it compiles first
    # (its own checks, not the program's kernels); no kernel of the graph was built
    written = [p.read_text() for p in (tmp_path / "other").rglob("*.cpp")]
    assert written and not [t for t in written if re.search(r"\bvoid\s+kernel\(", t)]


def test_the_recording_agent_leaves_the_program_s_modules_as_they_would_be(tmp_path, monkeypatch):
    # Inductor's cache keys hash pickles, and pickle names torch.contiguous_format by the first module in sys.modules
    # holding `torch`: an agent that imported the aotpack package (and with it multiprocessing, whose __mp_main__ is
    # the program's main module, which imports torch) made every key of a torch.compile'd Llama on the CPU other than
    # in the program served, and no recorded graph was found (torch 2.13, 2026-11-27)
    from aotpack.record import program

    probe = tmp_path / "probe.py"
    probe.write_text("import json, sys\nimport torch\nimport pickle\njson.dump({'modules': sorted(sys.modules), "
                     "'by': pickle.whichmodule(torch.contiguous_format, 'torch.contiguous_format')}, "
                     "open(sys.argv[1], 'w'))\n")  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # (aotpack importable in the program, as from a checkout)
    assert program.run(["python", str(probe), str(tmp_path / "recorded.json")], tmp_path / "rec").status == 0
    recorded = json.loads((tmp_path / "recorded.json").read_text())
    assert "sitecustomize" in recorded["modules"]  # (the agent ran)
    assert not [m for m in recorded["modules"] if m.split(".")[0] == "aotpack"]
    subprocess.run([sys.executable, str(probe), str(tmp_path / "plain.json")], check=True)
    assert json.loads((tmp_path / "plain.json").read_text())["by"] == recorded["by"]


PAIRS = textwrap.dedent("""
    import json, sys
    import torch, triton  # noqa: F401

    @torch.compile(dynamic=True)
    def h(x, y):
        return torch.cat([x, y]).sin().sum(0)

    out = []
    for pair in sys.argv[1:]:
        a, b = (int(s) for s in pair.split(","))
        torch.manual_seed(a * 100 + b)
        out.append(h(torch.randn(a, 16), torch.randn(b, 16)).tolist())
    counters = torch._dynamo.utils.counters
    print(json.dumps({"out": out, "misses": counters["inductor"]["fxgraph_cache_miss"]}))
""")


@pytest.mark.parametrize("runs", [1, 3])
def test_a_recording_holds_the_graphs_its_own_profile_makes_a_served_process_compile(runs, tmp_path):
    # The first run compiles h with both sizes one symbol at (4, 4) (equal sizes: Dynamo's duck sizing), then at
    # (1, 5) another graph, and its profile marks both sizes as ones that change. A process that starts with that
    # profile gives each its own symbol from the first call: a graph the first run never compiled (a Llama's
    # generate() on the GPU did the same). record runs the program again while a run changes the profile: the
    # second run starts as a served process does, and compiles and records that graph
    (tmp_path / "prog.py").write_text(PAIRS)
    (tmp_path / "serve.py").write_text(SERVE)
    recorded = run(["-m", "aotpack", "record", "-o", "r/recipe.yaml", "--package", "graphs_kernels", "--runs",
                    str(runs), "--", "python", "prog.py", "4,4", "1,5"], tmp_path, "record-cache")  # fmt: skip
    said = recorded.stdout + recorded.stderr
    if runs == 1:
        assert "changed torch.compile's profile" in said and "with a larger --runs" in said, said
    else:  # the second run changed nothing: not run a third time
        assert "running it again" in said and "the program ran 2 times" in said, said
    run(["-m", "aotpack", "build", "r/recipe.yaml", "-o", "dist"], tmp_path, "build-cache")
    site = install_wheel(next((tmp_path / "dist").glob("*.whl")), tmp_path / "site")

    bare = without_c_compiler(tmp_path / "bin")
    args = ["prog.py", "7,7", "1,9"]  # sizes never recorded
    if runs == 1:  # the graph of two symbols: never recorded, its C++ kernel refused (where a compiler is: where
        # none is, Inductor's own check of the CPU's vector extensions fails first)
        refused = run(["serve.py", "error", *args], tmp_path, "served", site, fails=True)
        assert "Inductor would compile Inductor's C++ kernel" in refused.stderr, refused.stderr[-3000:]
        return
    served = run(["serve.py", "error", *args], tmp_path, "served", site, PATH=bare)
    cold = json.loads(run(["serve.py", "-", *args], tmp_path, "cold", site).stdout)
    assert json.loads(served.stdout) == {"out": cold["out"], "misses": 0}


DECORATED = textwrap.dedent("""
    import functools, json, sys
    import torch, triton  # noqa: F401


    def deprecated(fn):  # as transformers' decorators: one code object for every function, told apart by its closure
        @functools.wraps(fn)
        def wrapped_func(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapped_func


    @torch.compile
    @deprecated
    def f(x):
        return torch.nn.functional.gelu(x).sum(0) * 2


    out = [f(torch.randn(n, 16, generator=torch.Generator().manual_seed(n))).tolist() for n in map(int, sys.argv[1:])]
    counters = torch._dynamo.utils.counters
    print(json.dumps({"out": out, "misses": counters["inductor"]["fxgraph_cache_miss"]}))
""")


def test_a_decorated_function_s_recorded_profile_is_found_in_a_served_process(tmp_path):
    # Dynamo keys a frame's profile by a hash of its closure's functions, which Python salts anew in each process
    # (torch 2.13): a transformers model's forward, wrapped by a decorator, was never found in its recorded profile,
    # and the served process compiled it static at its first sizes (a Qwen2 on the CPU: 4 graphs), while record ran
    # it 3 times and the profile never settled. With the closure keyed the same in every process: 2 runs, and none
    (tmp_path / "prog.py").write_text(DECORATED)
    (tmp_path / "serve.py").write_text(SERVE)
    recorded = run(["-m", "aotpack", "record", "-o", "r/recipe.yaml", "--package", "graphs_kernels", "--", "python",
                    "prog.py", "8", "12"], tmp_path, "record-cache")  # fmt: skip
    assert "the program ran 2 times" in recorded.stdout + recorded.stderr
    run(["-m", "aotpack", "build", "r/recipe.yaml", "-o", "dist"], tmp_path, "build-cache")
    site = install_wheel(next((tmp_path / "dist").glob("*.whl")), tmp_path / "site")
    args = ["prog.py", "20", "33"]  # sizes never recorded
    served = json.loads(run(["serve.py", "error", *args], tmp_path, "served", site,
                            PATH=without_c_compiler(tmp_path / "bin")).stdout)  # fmt: skip
    cold = json.loads(run(["serve.py", "-", *args], tmp_path, "cold", site).stdout)
    assert served == {"out": cold["out"], "misses": 0}


WRAPPER = textwrap.dedent("""
    import json, sys
    import torch
    import torch._inductor.config
    from aotpack.runtime import _aotpack_activate

    torch._inductor.config.cpp_wrapper = True  # the graph's wrapper is C++ too: built with its kernels, not through
    _aotpack_activate.activate([], sys.argv[1], LookupError)  # the C++ kernels' cpp_pybinding


    @torch.compile
    def f(x):
        return (x.sin() * 2).sum(0)


    try:
        print(json.dumps({"ran": f(torch.randn(8, 4)).shape[0]}))
    except Exception as exc:
        print(json.dumps({"refused": str(exc)[-1500:]}))
    print(json.dumps([e["name"] for e in _aotpack_activate.coverage()]))
""")


@pytest.mark.parametrize("fallback", ["error", "jit"])
def test_inductor_s_cpp_wrapper_is_refused_or_listed_like_its_kernels(fallback, tmp_path):
    # with cpp_wrapper=True Inductor builds a graph's wrapper and its kernels in one C++ build, which no
    # cpp_pybinding call goes through: it compiled and ran a graph never recorded under fallback="error"
    (tmp_path / "prog.py").write_text(WRAPPER)
    done = run(["prog.py", fallback], tmp_path, "cache")
    said, listed = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    if fallback == "error":
        assert "Inductor would run a C++ compiler for Inductor's C++ build " in said["refused"], said
        assert listed == []
    else:
        assert said == {"ran": 4} and listed and all(n.startswith("Inductor's C++ build ") for n in listed), listed


def test_a_rehearsal_lists_what_a_served_program_would_compile_before_it_is_deployed(tmp_path):
    """aotpack rehearse builds the recording and runs a traffic sample with it activated in a fresh environment:
    at sizes the recording covers, nothing compiles and it says so (exit 0); a graph the recording lacks is listed
    with what would compile and why (exit 7, RecordError), every compilation, not the first alone."""
    (tmp_path / "prog.py").write_text(PROGRAM)
    run(["-m", "aotpack", "record", "-o", "r/recipe.yaml", "--package", "graphs_kernels", "--", "python", "prog.py",
         "8", "12"], tmp_path, "record-cache")  # fmt: skip
    clean = run(["-m", "aotpack", "rehearse", "r/recipe.yaml", "--", "python", "prog.py", "20", "33"], tmp_path,
                "rehearse-cache")  # fmt: skip
    assert "no compilation: the program is served with none, and with no C compiler" in clean.stderr, clean.stderr
    assert json.loads(clean.stdout.splitlines()[-1])["frames"] == 1  # (the program's own output, served)
    lacking = run(["-m", "aotpack", "rehearse", "r/recipe.yaml", "--", "python", "prog.py", "20"], tmp_path,
                  "rehearse-other", fails=True, OTHER="1")  # fmt: skip
    listed = [line for line in lacking.stdout.splitlines() if line.startswith("Inductor runs a C++ compiler for ")]
    assert listed == [next(line for line in listed if "C++ kernel" in line)], lacking.stdout  # said once
    assert listed[0].endswith(": no activated package holds it"), listed
    assert "1 compilation a served process would meet (above)" in lacking.stderr
