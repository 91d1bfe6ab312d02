"""What a command prints that cannot be written (standard output on a full device): aotpack's own message and
exit code, never a traceback, never a command that seems to have ended well."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack.errors import OutputError

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
FULL = Path("/dev/full")


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["plan", "--help"], ["plan", "{root}/recipes/demo.yaml"],
                                  ["cache", "--cache-dir", "{tmp}/cache"], ["new", "mykernels"]])  # fmt: skip
def test_output_that_cannot_be_written_is_aotpack_s_error(argv, tmp_path):
    argv = [a.format(tmp=tmp_path, root=ROOT) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    with FULL.open("w") as full:
        done = subprocess.run([sys.executable, "-m", "aotpack", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, env=env, timeout=120)  # fmt: skip
    assert done.returncode == OutputError.exit_code, done.stderr[-2000:]
    assert (
        done.stderr.strip().splitlines()[-1] == "aotpack: error: cannot write standard output: No space left on device"
    )
    assert "Traceback" not in done.stderr
