"""Kernel sources shipped to a Dask worker, written there once per digest (no Dask needed): a use marks
the copy, copies no task has used for a week go when another is written, and what a killed writer
left is swept."""

import os
import subprocess
import sys
import tempfile
import time

from aotpack.pipeline import distributed


def test_a_worker_keeps_the_copies_in_use_and_drops_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = distributed.materialize((("k.py", b"old = 1\n"),), "a" * 64)
    used = distributed.materialize((("k.py", b"used = 1\n"),), "b" * 64)
    week_ago = time.time() - 8 * 86400
    for folder in (old, used):
        os.utime(folder / ".complete", (week_ago, week_ago))
    assert distributed.materialize((), "b" * 64) == used  # in use again: marked, not rewritten
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = old.parent / f"{distributed.STAGING}{int(dead.stdout)}-x"  # a staging folder whose writer is gone
    killed.mkdir()
    new = distributed.materialize((("k.py", b"new = 1\n"),), "c" * 64)
    assert (new / "k.py").read_bytes() == b"new = 1\n"
    assert sorted(p.name for p in new.parent.iterdir()) == sorted(["b" * 32, "c" * 32])
    assert (used / "k.py").read_bytes() == b"used = 1\n"
