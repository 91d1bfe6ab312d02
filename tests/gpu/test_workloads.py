"""Whole workloads replayed from their recordings (tests/gpu/workloads.py; benchmarks/workloads.sh records them on
this GPU, and their wheels are built on the CPU host by the JIT's Triton): each in a fresh process with an empty
Triton cache and ``activate(fallback="error")``, compiling nothing, and every output, loss, gradient and generated
token bit-identical to the JIT's. Needs AOTPACK_WORKLOAD_REFERENCE (the JIT's outputs) and the wheels installed;
skipped otherwise."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..shared import without_c_compiler

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
REFERENCE = Path(os.environ.get("AOTPACK_WORKLOAD_REFERENCE", "/nonexistent"))
if not REFERENCE.is_dir():
    pytest.skip("no recorded workloads (AOTPACK_WORKLOAD_REFERENCE; benchmarks/workloads.sh)", allow_module_level=True)
NAMES = os.environ.get("AOTPACK_WORKLOADS", "llama helion fla").split()
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", NAMES)
def test_a_replay_compiles_nothing_and_matches_the_jit(name, tmp_path):
    from .workloads import RECORDED_AS, REFUSED

    pytest.importorskip(f"{RECORDED_AS.get(name, name)}_kernels")
    cache = tmp_path / "triton-cache"
    env = {
        **os.environ,
        "TRITON_CACHE_DIR": str(cache),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),  # (a graph it holds brings its kernels back)
        "HOME": str(tmp_path),  # (a library caches there)
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
        "PATH": without_c_compiler(tmp_path / "bin"),
        "CC": str(tmp_path / "no-c-compiler"),  # (Triton takes CC before PATH)
    }
    # Inductor takes CXX, and its cache key holds it: unset, as on a serving machine without a compiler (and as
    # benchmarks/workloads.sh records), so that the recorded torch.compile caches are found; PATH holds none
    env.pop("CXX", None)
    done = subprocess.run([sys.executable, "-m", "tests.gpu.workloads", name, "replay", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if name in REFUSED:  # a compilation no recording has: refused in whichever process it was to run, by name
        assert done.returncode != 0 and not (tmp_path / f"{name}-replay.json").exists()
        assert "CompilationRefused" in done.stderr and "Triton would compile" in done.stderr, done.stderr[-6000:]
        print(name, "refused:", [line for line in done.stderr.splitlines() if "Triton would compile" in line][:1])
        return
    want_file = REFERENCE / "cold" / f"{name}-jit.json"
    # the reference: the recorded run itself where there is one (an autotuner picks anew in every JIT run: the
    # recording is what the package replays), else the JIT's cold run; what the JIT's own cold and warm runs
    # disagree on (its autotuners timed anew) is no bit-identity anyone gets from the JIT
    # (sizes never recorded, served by the recorded torch.compile caches: the JIT running those same graphs)
    recorded = next((f for f in (REFERENCE / run / f"{name}-jit.json" for run in ("graphs", "recorded", "cold"))
                     if f.is_file()), None)  # fmt: skip
    if recorded is None:
        pytest.skip(f"{name} was not recorded")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    report = json.loads((tmp_path / f"{name}-replay.json").read_text())
    assert report["compilations"] == 0, report["compiled"]
    # Triton's driver builds its own helper module (cuda_utils) when a library asks it for device properties
    # itself (fla's get_multiprocessor_count does); anything else in the cache is a kernel or an autotuner's run
    # (and what the package serves into it: Triton's cache entries recorded from torch.compile's compilations)
    import importlib

    package = importlib.import_module(f"{RECORDED_AS.get(name, name)}_kernels")
    held = Path(str(package.__file__)).parent / "_triton_cache"
    # what the guard served: a packaged entry under its key, or under the key this process asked for where the
    # package holds the kernel compiled by the recorded program's other ptxas (its files byte for byte)
    packaged = {(p.name, p.read_bytes()) for p in held.rglob("*") if p.is_file()} if held.is_dir() else set()
    written = [p.name for p in cache.rglob("*") if p.is_file() and not p.name.startswith(("cuda_utils.", "__grp__"))
               and (p.name, p.read_bytes()) not in packaged]  # fmt: skip
    assert not written, f"Triton's cache got files: something compiled or was autotuned: {written}"
    want = json.loads(recorded.read_text())["outputs"]
    # (the JIT's own cold and warm runs: optional where the recorded graphs' run is the reference)
    runs = {
        run: json.loads(f.read_text())
        for run in ("cold", "warm")
        if (f := REFERENCE / run / f"{name}-jit.json").is_file()
    }
    cold = (runs.get("cold") or runs.get("warm") or {}).get("outputs", {})
    warm = runs["warm"]["outputs"] if "warm" in runs else cold
    unstable = sorted(k for k in cold if cold[k] != warm.get(k))
    assert sorted(report["outputs"]) == sorted(want)
    differ = [k for k in want if report["outputs"][k] != want[k]]
    misses = report["class_misses"]  # calls that ran a floor: the JIT would have compiled a narrower class
    print(name, "class misses:", sum(m["calls"] for m in misses), misses[:8], "differ:", differ,
          "the JIT's own runs differ on:", unstable)  # fmt: skip
    if name in RECORDED_AS and recorded == want_file:  # shapes never recorded, compared with the JIT's cold run:
        # an autotuner times the configs anew (so does the JIT), and a floor's code may round otherwise than the
        # JIT's own class
        beyond = [k for k in differ if k not in unstable]
        assert not beyond or misses, f"not bit-identical to the JIT, and every call ran the JIT's class: {beyond}"
    elif name in RECORDED_AS:  # shapes never recorded, compared with the JIT running the recorded graphs: an eager
        # kernel may run a floor at a shape the recording widened to (listed above), and every output is the same
        assert not differ, f"not bit-identical to the JIT running the recorded graphs: {differ}"
    else:
        assert not misses and not differ, f"not bit-identical to the recorded run: {differ}"
    times = {"replay": {**{k: v for k, v in report.items() if k != "outputs"}, "differ": differ, "unstable": unstable}}
    times.update({f"jit {run}": data for run, data in runs.items()})
    out = Path(os.environ.get("AOTPACK_WORKLOAD_OUT", tmp_path))
    (out / f"{name}-times.json").write_text(json.dumps(times, indent=1))
    print(name, {k: (round(v["first_step_s"], 3), round(v.get("step_s", 0), 3)) for k, v in times.items()},
          "outputs:", len(want))  # fmt: skip
