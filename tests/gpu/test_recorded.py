"""`aotpack record` end to end on a real workload (tests/gpu/record_workload.py: liger-kernel's own
entry points). The package liger_recorded is the recipe recorded from that workload on this GPU,
built by the Triton release the JIT here runs; make gpu-test installs it when dist/ has it.

In fresh processes, each with an empty TRITON_CACHE_DIR: the workload under the JIT, and after
`liger_recorded.activate(fallback="error")`: identical results bit for bit, no JIT compilation at
all (counted through Triton's hook), and the time to first result of each."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("liger_kernel")
pytest.importorskip("liger_recorded", reason="build the recorded recipe (docs/dropin.md)")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

WORKLOAD = Path(__file__).with_name("record_workload.py")


def run(tmp_path: Path, name: str, *extra: str, cache: Path | None = None) -> dict[str, float]:
    cache = cache or tmp_path / f"triton-cache-{name}"
    cache.mkdir(exist_ok=True)
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, str(WORKLOAD), str(tmp_path / f"{name}.pt"), *extra], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = dict(line.split() for line in proc.stdout.splitlines() if line.count(" ") == 1)
    print(name, values)
    return {k: float(v) for k, v in values.items()}


def test_replay_runs_no_jit_and_matches_the_jit_bit_for_bit(tmp_path):
    jit = run(tmp_path, "jit")
    assert jit["jit-compilations"] > 0, "the JIT compiled the workload's kernels"
    aot = run(tmp_path, "aot", "--activate", "liger_recorded")
    assert aot["jit-compilations"] == 0
    expected, got = torch.load(tmp_path / "jit.pt"), torch.load(tmp_path / "aot.pt")
    assert len(expected) == len(got) == 16
    for e, g in zip(expected, got, strict=True):
        assert torch.equal(e, g)
    warm = run(tmp_path, "jit-warm", cache=tmp_path / "triton-cache-jit")
    assert aot["class-misses"] == 0  # every call ran the class the JIT compiled for it
    print(f"first result: JIT cold {jit['first-result-s'] * 1e3:.1f} ms, JIT warm {warm['first-result-s'] * 1e3:.1f} "
          f"ms, aotpack {aot['first-result-s'] * 1e3:.2f} ms: {jit['first-result-s'] / aot['first-result-s']:.0f}x "
          f"and {warm['first-result-s'] / aot['first-result-s']:.0f}x faster")  # fmt: skip


def test_shapes_the_recording_never_saw_run_with_no_jit_and_match_it(tmp_path):
    """A server's next request has another width: RMSNorm at odd widths (the recorded configs, in classes never
    recorded) runs a recorded class's floor under fallback="error" with no compilation: the floor with the
    integers' divisibility relaxed is the very class the JIT compiles for such a call (aligned tensors), so
    no class miss and the same bits."""
    jit = run(tmp_path, "jit-unseen", "--unseen")
    assert jit["jit-compilations"] > 0
    aot = run(tmp_path, "aot-unseen", "--unseen", "--activate", "liger_recorded")
    assert aot["jit-compilations"] == 0 and aot["class-misses"] == 0
    expected, got = torch.load(tmp_path / "jit-unseen.pt"), torch.load(tmp_path / "aot-unseen.pt")
    assert len(expected) == len(got) == 3
    for e, g in zip(expected, got, strict=True):
        assert torch.equal(e, g)
