"""What the GPU tests share: running `aotpack tune` against the installed wheels."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_tune(recipe: str, kernel: str, out: Path, timeout: int) -> tuple[Path, dict]:
    """`aotpack tune recipes/<recipe> --kernel <kernel>` with few runs; returns the table it wrote
    (there must be exactly one) and its contents."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT)])}
    cmd = [sys.executable, "-m", "aotpack", "tune", str(ROOT / "recipes" / recipe), "--kernel", kernel,
           "--reps", "5", "--warmup", "2", "-o", str(out)]  # fmt: skip
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    (table,) = out.glob("*.json")
    return table, json.loads(table.read_text())
