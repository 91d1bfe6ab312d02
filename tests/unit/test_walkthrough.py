"""docs/walkthrough.md's program and recording as the repository ships them: the recording plans to the variants
the page shows with no GPU, a recording's Triton cache of modules alone is said as such, and the program says
so without a GPU instead of failing."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack.backends import recipes as recipe
from aotpack.plan import variants as plan

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "walkthrough.md").read_text()
RECORDING = ROOT / "examples" / "serve" / "recording" / "recipe.yaml"


def test_the_shipped_recording_plans_what_the_page_shows():
    rec = recipe.load(RECORDING)
    lines = plan.plan_summary(rec, plan.plan_variants(rec))
    for line in lines:
        if line.startswith(("layernorm_kernel ", "softmax_kernel ", "total: ", "widen: ")):
            assert line in PAGE, line
    assert "total: 88 variants (88 triton) of 2 kernels" in lines


def test_the_page_names_files_that_exist():
    for path in set(re.findall(r"examples/serve/[\w/.]+\.(?:py|yaml)", PAGE)):
        assert (ROOT / path).is_file(), path


def test_a_cache_of_modules_alone_is_said_as_such(tmp_path):
    """A recording whose Triton cache holds only the launcher modules Triton built (no kernel compiled outside
    the JIT): plan says how many modules, not an empty Triton release and target."""
    folder = tmp_path / "rec"
    shutil.copytree(RECORDING.parent, folder)
    for key in ("A" * 52, "B" * 52):
        (folder / "triton-cache" / key).mkdir(parents=True)
        (folder / "triton-cache" / key / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    text = (folder / "recipe.yaml").read_text().replace("widen:", "triton_cache: triton-cache\nwiden:", 1)
    (folder / "recipe.yaml").write_text(text)
    rec = recipe.load(folder / "recipe.yaml")
    (line,) = [x for x in plan.plan_summary(rec, plan.plan_variants(rec)) if x.startswith("triton_cache:")]
    assert line == ("triton_cache: 2 Triton cache entries shipped as recorded (2 modules Triton built with a C "
                    "compiler), served by activate() as cache hits")  # fmt: skip


def test_the_program_without_a_gpu_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the program serves")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "serve" / "app.py"), "traffic"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no CUDA GPU here" in done.stdout
