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


def test_python_include_for_another_machine_serves_the_hosts_pyconfig(tmp_path, monkeypatch):
    """Python.h built for aarch64 asks for aarch64-linux-gnu/python3.X/pyconfig.h: the host's is linked there."""
    include = layout(tmp_path / "py", multiarch=True)
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(include)})
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: "x86_64-linux-gnu" if name == "MULTIARCH" else None)
    build = tmp_path / "build"
    build.mkdir()
    native.python_include(build, "aarch64")
    linked = build / "python-multiarch" / "aarch64-linux-gnu" / "python3.11" / "pyconfig.h"
    assert linked.read_text() == "#define DEBIAN 1\n"


def test_the_libraries_are_planned_for_the_wheels_machine():
    for machine in native.PLATFORMS.values():
        for plan in native.plan_libraries("pkg", (Path("inc"),), machine):
            command = plan.command(("zig", "cc"))
            assert command[command.index("-target") + 1] == f"{machine}-linux-gnu.{native.GLIBC}"


@pytest.mark.parametrize(
    ("head", "machine"),
    [
        (b"\x7fELF\x02\x01\x01" + bytes(11) + (62).to_bytes(2, "little"), "x86_64"),
        (b"\x7fELF\x02\x01\x01" + bytes(11) + (183).to_bytes(2, "little"), "aarch64"),
        (b"\x7fELF\x02\x01\x01" + bytes(11) + (40).to_bytes(2, "little"), None),  # 32-bit Arm
        (b"\x7fELF\x02\x02\x01" + bytes(11) + (62).to_bytes(2, "big"), None),  # big-endian
        (b"MZ" + bytes(30), None),
        (b"\x7fELF", None),
    ],
)
def test_the_machine_of_an_elf_object(head, machine):
    assert native.elf_machine(head) == machine
