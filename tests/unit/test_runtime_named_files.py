"""Files the runtime opens because a variable names them (AOTPACK_AUTOTUNE_CACHE, AOTPACK_REPORT): whatever is
there (a FIFO, a device, a folder, a file of the wrong shape, JSON nested past reach, a name too long), importing
the package and exiting never hang, never read without bound, and never end in a traceback: a warning names the
variable and the program goes on (issue 58)."""

import json
import os
import threading
from pathlib import Path

import pytest

from aotpack.runtime import _aotpack_report, _aotpack_tune

MANIFEST = {"package": "pkg", "version": "1.0", "kernels": {"add": {"bindings": [["fp32"]]}}}


class Native:
    """The native module as the autotune cache sees it: the keys it tuned, and what it was given back."""

    def __init__(self, tuned=()):
        self.tuned, self.put = list(tuned), []

    def _memo(self, name):
        return self.tuned

    def _memo_put(self, *entry):
        self.put.append(entry)


def bounded(call, *args):
    """``call(*args)`` in a thread that must end within 10 s (a FIFO opened for reading blocks for ever)."""
    out: list = []
    worker = threading.Thread(target=lambda: out.append(call(*args)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), f"{call.__name__} blocked"
    return out[0] if out else None


def named(tmp_path, kind):
    path = tmp_path / "named"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "dev-zero":
        return "/dev/zero"
    elif kind == "wrong-shape":
        path.write_text("[1]")
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "not-utf8":
        path.write_bytes(b"\xff\xfe{")
    elif kind == "entries-of-other-shapes":
        path.write_text(json.dumps({"format": _aotpack_tune.CACHE_FORMAT, "package": "pkg", "version": "1.0",
                                    "entries": [1, None, {"kernel": 3}, {"kernel": "add", "key": 5}]}))  # fmt: skip
    return str(path)


@pytest.mark.parametrize("kind", ["fifo", "folder", "dev-zero", "wrong-shape", "deep", "not-utf8"])
def test_an_autotune_cache_that_is_not_one_is_said_and_left(tmp_path, kind):
    path = named(tmp_path, kind)
    with pytest.warns(RuntimeWarning, match="AOTPACK_AUTOTUNE_CACHE"):
        assert bounded(_aotpack_tune._read, MANIFEST, path) == []
    native = Native()
    with pytest.warns(RuntimeWarning, match="AOTPACK_AUTOTUNE_CACHE"):
        bounded(_aotpack_tune._load, native, MANIFEST, path)
    assert native.put == []


def test_entries_of_other_shapes_are_skipped_and_a_save_still_writes_the_process_s(tmp_path):
    path = named(tmp_path, "entries-of-other-shapes")
    native = Native(tuned=[("sm_90", 0, "DDDD", (4096,), "cfg")])
    _aotpack_tune._load(native, MANIFEST, path)
    assert native.put == []
    _aotpack_tune.save_autotune(native, MANIFEST, path)
    saved = json.loads(Path(path).read_text())["entries"]
    assert saved == [{"kernel": "add", "target": "sm_90", "types": ["fp32"], "specialization": "DDDD",
                      "key": [4096], "config": "cfg"}]  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "folder", "lock-fifo", "dev-zero"])
def test_an_autotune_cache_that_cannot_be_written_is_said_at_exit_not_raised(tmp_path, kind):
    path = str(tmp_path / "c.json") if kind == "lock-fifo" else named(tmp_path, kind)
    if kind == "lock-fifo":
        os.mkfifo(path + ".lock")
    native = Native(tuned=[("sm_90", 0, "DDDD", (4096,), "cfg")])
    with pytest.warns(RuntimeWarning, match="was not written"):
        bounded(_aotpack_tune.save_autotune, native, MANIFEST, path)
    if kind == "fifo":
        assert Path(path).is_fifo()  # (not replaced by a file)


@pytest.mark.parametrize("kind", ["a-file", "dev-null", "fifo", "name-too-long", "under-a-file"])
def test_a_report_folder_that_cannot_hold_a_report_is_said_at_exit_not_raised(tmp_path, kind):
    folder = {"a-file": tmp_path / "f", "dev-null": Path("/dev/null"), "fifo": tmp_path / "p",
              "name-too-long": tmp_path / ("x" * 300), "under-a-file": tmp_path / "f" / "sub"}[kind]  # fmt: skip
    (tmp_path / "f").write_text("a file")
    os.mkfifo(tmp_path / "p")
    with pytest.warns(RuntimeWarning, match="AOTPACK_REPORT=.*the report of pkg was not written"):
        bounded(_aotpack_report.write_report, str(folder), lambda: {"package": "pkg"})
    assert (tmp_path / "f").read_text() == "a file"


@pytest.mark.parametrize(
    "value", ["nosuchmodule:Manager", "os:nosuchclass", "os:sep", ":Manager", "os", "a..b:C", "\x1b[2J:X"]
)
def test_a_cache_manager_variable_naming_no_class_is_an_error_naming_the_variable(monkeypatch, value):
    """TRITON_CACHE_MANAGER as the program set it (activate() keeps it in AOTPACK_CACHE_MANAGER, record in
    AOTPACK_RECORDED_CACHE_MANAGER): naming no class is an ImportError that names the variable and its value."""
    pytest.importorskip("triton")
    from aotpack.runtime import _aotpack_env, _aotpack_guard

    for kept in (_aotpack_env.PROGRAMS_MANAGER, _aotpack_env.RECORDED_MANAGER):
        monkeypatch.setenv(kept, value)
        with pytest.raises(ImportError) as info:
            _aotpack_guard._named(kept)
        said = str(info.value)
        assert said.startswith(f"TRITON_CACHE_MANAGER={value!r} (kept by aotpack as {kept}) names no cache manager")
        assert said.endswith("set it to a class Triton can use, or unset it")
    monkeypatch.setenv(_aotpack_env.PROGRAMS_MANAGER, "triton.runtime.cache:FileCacheManager")
    assert _aotpack_guard._named(_aotpack_env.PROGRAMS_MANAGER).__name__ == "FileCacheManager"
