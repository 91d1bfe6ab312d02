"""Every file aotpack writes goes through one helper (``_temp.atomic_file``): a write that fails (a full disk) or is
killed leaves the old bytes or the new ones, never a part, and no temporary file behind."""

from __future__ import annotations

import ast
import errno
import os
import signal
import time

import pytest

from aotpack import _temp
from aotpack.errors import OutputError

from ..shared import ROOT

WRITING_METHODS = {"write_text", "write_bytes", "touch", "copyfile", "copy", "copy2", "copytree", "symlink_to",
                   "hardlink_to", "mkfifo"}  # fmt: skip
OPENERS = {"open", "fdopen", "ZipFile", "TarFile"}
# (file, call) that write elsewhere than a file of their own, each for its reason
ALLOWED = {
    ("aotpack/_temp.py", "fdopen"): "the helper itself",
    ("aotpack/commands/cli.py", "open"): "stdout pointed at /dev/null after a broken pipe: no file is written",
    ("aotpack/pipeline/wheel.py", "ZipFile"): "the zip is written into atomic_file's handle",
    ("aotpack/build_meta.py", "open"): "the sdist's tar is built in memory, then written by atomic_file",
    (
        "aotpack/pipeline/native.py",
        "symlink_to",
    ): "a link inside the build's own scratch folder (Python's headers by arch)",
    (
        "aotpack/runtime/_aotpack_agent.py",
        "open",
    ): "runs in the recorded program: appends whole event lines; a process killed "
    "mid-line leaves its last line short, which record.read_events skips",
}


def _mode(call: ast.Call) -> str:
    """The mode a call opens with, where it says one as a constant (positional or mode=/flags=)."""
    for arg in [*call.args[1:2], *(k.value for k in call.keywords if k.arg in ("mode", "flags"))]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        if isinstance(arg, (ast.Attribute, ast.BinOp)):  # os.O_WRONLY | os.O_CREAT
            return ast.unparse(arg)
    return "r"


def writers() -> list[tuple[str, int, str]]:
    """Calls in aotpack's own code (not the runtime the wheels ship, which cannot import aotpack) that write."""
    found = []
    for path in sorted((ROOT / "aotpack").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("aotpack/runtime/", "aotpack/templates/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            mode = _mode(node)
            writes = name in WRITING_METHODS or (
                name in OPENERS and any(c in mode for c in "wax+")
            ) or (name == "open" and "O_WR" in mode) or (name == "open" and "O_CREAT" in mode)  # fmt: skip
            if writes and (rel, name) not in ALLOWED:
                found.append((rel, node.lineno, ast.unparse(node)[:80]))
    return found


def test_every_writer_is_the_atomic_helper():
    assert writers() == []


def test_the_scan_finds_a_writer(tmp_path, monkeypatch):
    """The scan is not blind: the calls it looks for, written as aotpack's code writes them, are found."""
    sample = tmp_path / "aotpack" / "sample.py"
    sample.parent.mkdir()
    sample.write_text("p.write_text('x')\nopen(p, 'wb')\nos.open(p, os.O_WRONLY | os.O_CREAT)\nshutil.copyfile(a, b)\n"
                      "zipfile.ZipFile(p, mode='a')\nopen(p)\n")  # fmt: skip
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert [line for _, line, _ in writers()] == [1, 2, 3, 4, 5]


class _Full:
    """A file on a full disk: every write fails with ENOSPC."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_a_full_disk_leaves_the_old_bytes(tmp_path, monkeypatch):
    target = tmp_path / "recipe.yaml"
    target.write_bytes(b"old\n")
    real = os.fdopen
    monkeypatch.setattr("aotpack._temp.os.fdopen", lambda *a, **k: _Full(real(*a, **k)))
    with pytest.raises(OutputError, match=r"^cannot write .*recipe.yaml: No space left on device; free space there"):
        _temp.write_file(target, "new\n")
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml"]


def test_a_killed_writer_leaves_old_or_new_bytes(tmp_path):
    """A writer killed at random moments, many times: the file is always whole, and the next write sweeps what the
    killed ones left."""
    target = tmp_path / "table.json"
    new = b"n" * (8 << 20)
    target.write_bytes(b"old")
    for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.05):
        pid = os.fork()
        if pid == 0:
            try:
                _temp.write_file(target, new)
            finally:
                os._exit(0)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert target.read_bytes() in (b"old", new)
    _temp.write_file(target, b"last")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]
