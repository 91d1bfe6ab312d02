"""Where the extension's C finds Python.h: the interpreter's include folder, and on Debian and Ubuntu
system Pythons the per-architecture folder of pyconfig.h, reached through a link in the build folder."""

import sysconfig
from pathlib import Path

import pytest

from aotpack.errors import ToolNotFound
from aotpack.pipeline import native


def layout(root: Path, multiarch: bool) -> Path:
    include = root / "include" / "python3.11"
    include.mkdir(parents=True)
    (include / "Python.h").write_text("")
    if multiarch:
        per_arch = root / "include" / "x86_64-linux-gnu" / "python3.11"
        per_arch.mkdir(parents=True)
        (per_arch / "pyconfig.h").write_text("#define DEBIAN 1\n")
    return include


@pytest.mark.parametrize("multiarch", [False, True])
def test_python_include_reaches_a_per_architecture_pyconfig(tmp_path, monkeypatch, multiarch):
    include = layout(tmp_path / "py", multiarch)
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(include)})
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: "x86_64-linux-gnu" if name == "MULTIARCH" else None)
    build = tmp_path / "build"
    build.mkdir()
    dirs = native.python_include(build)
    if not multiarch:
        assert dirs == (include,) and not list(build.iterdir())
        return
    assert dirs == (include, Path("python-multiarch"))
    linked = build / "python-multiarch" / "x86_64-linux-gnu" / "python3.11" / "pyconfig.h"
    assert linked.read_text() == "#define DEBIAN 1\n"
    assert native.python_include(build) == dirs  # a second build in the same folder reuses the link


def test_python_include_without_headers_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(ToolNotFound, match="install the Python development headers"):
        native.python_include(tmp_path)
