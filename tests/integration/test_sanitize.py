"""The shipped runtime and the generated C under AddressSanitizer (leaks included) and
UndefinedBehaviorSanitizer: sanitize_main.c drives the small recipe's C API on the fake driver with
good calls, bad calls (dtypes, sizes, alignment, raw pointers, empty and negative grids, shapes past
int64, too many dimensions) and eight threads launching at once. Any finding fails the run
(-fno-sanitize-recover). Skipped where no C compiler with the sanitizer runtimes is installed."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from aotpack import build

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]


def sanitizing_compiler(tmp_path: Path) -> str | None:
    for cc in ("gcc", "clang"):
        if shutil.which(cc) is None:
            continue
        probe = tmp_path / "probe.c"
        probe.write_text("int main(void) { return 0; }\n")
        done = subprocess.run([cc, *FLAGS, str(probe), "-o", str(tmp_path / "probe")], capture_output=True)
        if done.returncode == 0:
            return cc
    return None


def test_the_runtime_and_generated_code_are_clean_under_asan_and_ubsan(small_recipe, fake_driver, tmp_path):
    cc = sanitizing_compiler(tmp_path)
    if cc is None:
        pytest.skip("no C compiler with AddressSanitizer and UBSan runtimes (apt install gcc)")
    work = tmp_path / "build"
    build(small_recipe, tmp_path / "dist", jobs=2, keep_build_dir=work, use_cache=False)
    program = tmp_path / "sanitized"
    sources = [HERE / "sanitize_main.c", work / "kernels.c", work / "capi.c", work / "aot_runtime.c"]
    subprocess.run([cc, *FLAGS, f"-I{work}", *map(str, sources), "-ldl", "-lpthread", "-o", str(program)],
                   check=True, capture_output=True)  # fmt: skip
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver), "FAKE_CUDA_LOG": str(tmp_path / "cuda.log"),
           "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}  # fmt: skip
    run = subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    assert lines["good"] == "add/T=fp32,BLOCK=256,w4,s1/sm_90a/hinted"
    assert lines["fp16 with fp32"] == "argument y_ptr: expected dtype fp32 (the dtype of x_ptr), got fp16"
    assert lines["too small"].startswith("argument y_ptr is too small")
    assert lines["misaligned"].endswith("/safe") and lines["raw pointers"].endswith("/safe")
    assert lines["empty"].startswith("add(): grid dimension 0") and lines["negative"].startswith("add(): grid")
    assert lines["span past int64"] == "argument x_ptr: its shape and strides span more than 64-bit sizes"
    assert lines["threads"] == "done"
    launches = [line for line in (tmp_path / "cuda.log").read_text().splitlines() if line.startswith("launch")]
    assert len(launches) == 4 + 8 * 200  # good, misaligned, raw pointers, nine dimensions (a bare pointer), threads
