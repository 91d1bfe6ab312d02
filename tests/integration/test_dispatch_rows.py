"""The dispatch table as the runtime reads it (aotpack/codegen/c.py's blocks: a target's, a binding's and a class's
rows together, a class the call fails skipped whole): rows of less specialized classes serve a call whose own class
has none, and of rows that serve it equally well the one earlier in the table wins, whatever order the runtime
reads the classes in: built (the add kernel, its select()), and on random tables read in two orders
(dispatch_order_main.c)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack import build, limits, runtime
from aotpack.backends import recipes as recipe
from aotpack.codegen import c as codegen_c

from ..shared import GOOD
from .helpers import install_wheel

pytestmark = pytest.mark.integration


def _picks(kernel_dir: Path, order: list[str], tmp_path: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The add kernel with a table of one key (4096) for two classes, listed in this order, each with its own
    config; the package's select() for an aligned call of 4096 elements (class DDDD, which has no row: both
    listed classes hold for it) and of 4100 (class DDD_: its own row wins), planned for sm_90a: (config, class)
    of each, and each class's config."""
    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    labels = {"DDD_": kernel.configs[1].label, "____": kernel.configs[2].label}
    assert len(set(labels.values())) == 2
    rows = [{"key": [4096], "types": {"T": "fp16"}, "specialization": spec, "config": labels[spec],
             "median_us": {labels[spec]: 1.0}, "rejected": {}} for spec in order]  # fmt: skip
    table = {"format": "aotpack-tuning-table/1", "package": "kit", "arch": "sm_90a", "device": "model",
             "driver_cuda": "13.0", "date": "2026-11-30", "sms": 132, "kernels": {"add": rows}}  # fmt: skip
    (kernel_dir / "table.json").write_text(json.dumps(table))
    (kernel_dir / "r.yaml").write_text(GOOD.replace("kernels:", "tables: [table.json]\nkernels:", 1))
    wheel = build(kernel_dir / "r.yaml", kernel_dir / f"dist-{order[0]}", jobs=2).wheel
    installed = install_wheel(wheel, tmp_path / f"site-{order[0]}")
    code = """
import numpy as np, kit
def aligned(n):  # 256-byte aligned, as CUDA allocations are
    raw = np.empty(n + 128, np.float16)
    skip = (-raw.ctypes.data % 256) // 2
    return raw[skip:skip + n]
for n in (4096, 4100):
    x, y, out = aligned(n), aligned(n), aligned(n)
    print(kit.add.select(x, y, out, target="sm_90a", sms=132))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**env, "PYTHONPATH": str(installed)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [(line.split("/")[1].removeprefix("T=fp16,"), line.split("/")[3]) for line in done.stdout.split()], labels


@pytest.mark.parametrize("first", ["____", "DDD_"])
def test_of_rows_that_tie_the_earlier_in_the_table_serves(kernel_dir, tmp_path, first):
    order = [first, next(s for s in ("____", "DDD_") if s != first)]
    (tied, own), labels = _picks(kernel_dir, order, tmp_path)
    assert tied == (labels[first], "DDDD"), (tied, labels)  # the call's own class runs the tied row's config
    assert own == (labels["DDD_"], "DDD_"), (own, labels)  # a call of class DDD_: its own row, wherever listed


def test_the_pick_does_not_depend_on_the_order_the_blocks_are_read(tmp_path):
    """200,000 random tables, 12 calls each, read through the generator's block order and a shuffle of each span's
    blocks: the same config, exact flag and status every time. (Each of three broken runtimes fails it: no tie-break
    between the nearest rows, none in the nearest-row rule, a block skipped at the best score rather than below it.)"""
    (tmp_path / "aot_vocabulary.h").write_text(codegen_c.vocabulary_h())
    (tmp_path / "aot_limits.h").write_text(limits.header())
    folder = Path(runtime.__file__).parent
    others = [
        str(folder / name) for name in runtime.RUNTIME_SOURCES if name not in ("aot_dispatch.c", "aot_measured.c")
    ]
    program = tmp_path / "order"
    subprocess.run([sys.executable, "-m", "ziglang", "cc", "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    f"-I{tmp_path}", f"-I{folder}", str(Path(__file__).with_name("dispatch_order_main.c")), *others,
                    "-ldl", "-lpthread", "-lm", "-o", str(program)], check=True)  # fmt: skip
    done = subprocess.run([str(program), "200000"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.endswith("0 mismatches in 2400000 calls\n"), done.stdout
