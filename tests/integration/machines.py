"""Where the fake-driver tests run a wheel: this host, or an aarch64 machine emulated in user mode.

The aarch64 machine is a folder: Debian's arm64 CPython (python3.11-minimal and the few libraries it loads)
and Debian's statically linked qemu-aarch64-static, fetched with apt-get into a private state (nothing of
the host's apt or dpkg is changed; the host's own sources are read), and the fake driver
(fake_libcuda.c) cross-compiled by zig. A Python or C program runs as
``qemu-aarch64-static <the arm64 program>`` with QEMU_LD_PREFIX at the folder, so its loader and libraries
are the folder's: the wheel's binding, its runtime and the fake libcuda all run as aarch64 code.

On a host that cannot make the folder (no apt-get, not Debian on x86-64, no network) the aarch64 tests skip,
unless AOTPACK_TEST_AARCH64=1 (the Makefile's test target sets it: CI must run them), which makes that a
failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aotpack import build

FAKE_LIBCUDA = Path(__file__).with_name("fake_libcuda.c")
ARM64_PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "libc6", "libexpat1",
                  "zlib1g", "libffi8")  # fmt: skip
QEMU = "qemu-user-static"  # of the host's architecture: one static binary per guest machine
REQUIRED = "AOTPACK_TEST_AARCH64"


@dataclass(frozen=True)
class Machine:
    """How to run programs of one machine here, and its fake driver."""

    name: str  # as `uname -m` says it
    platform: str  # the wheel's: aotpack build --platform
    zig_target: str  # zig cc -target, for C programs
    fake_driver: Path  # a folder holding this machine's libcuda.so.1
    prefix: tuple[str, ...] = ()  # what runs one of its programs (an emulator)
    python: tuple[str, ...] = (sys.executable,)
    env: Mapping[str, str] = field(default_factory=dict)

    def install(self, wheel: Path, target: Path) -> Path:
        """pip's install of the wheel into a plain folder, for this machine's tags."""
        tags = [] if self.name == host_machine() else ["--platform", self.platform.replace("linux", "manylinux2014"),
                                                      "--only-binary=:all:", "--implementation", "cp"]  # fmt: skip
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                        str(target), *tags, str(wheel)], check=True)  # fmt: skip
        return target

    def site(self, recipe: Path, here: Callable[[], Path], folders: pytest.TempPathFactory) -> Path:
        """The recipe's wheel for this machine, installed for it; on this host, ``here()`` (built already)."""
        if self.name == host_machine():
            return here()
        wheel = build(recipe, folders.mktemp("dist"), jobs=2, platform=self.platform).wheel
        return self.install(wheel, folders.mktemp("site"))

    def compile_c(self, *args: str) -> list[str]:
        """zig cc's command line for a C program or library of this machine."""
        return [sys.executable, "-m", "ziglang", "cc", "-target", self.zig_target, *args]


def host_machine() -> str:
    return os.uname().machine


def host(fake_driver: Path) -> Machine:
    name = host_machine()
    return Machine(name=name, platform=f"linux_{name}", zig_target=f"{name}-linux-gnu.2.17", fake_driver=fake_driver)


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"the emulated aarch64 machine is required here ({REQUIRED}=1) and cannot be made: {why}")
    pytest.skip(f"no emulated aarch64 machine: {why}")


def aarch64(folder: Path) -> Machine:
    """The emulated machine, made in ``folder`` (about 75 MB fetched, 30 MB kept)."""
    if host_machine() != "x86_64":
        _unavailable(f"the host is {host_machine()}, and only an x86-64 host's emulator is fetched")
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        _unavailable("apt-get and dpkg-deb (Debian's) are needed to fetch Debian's arm64 CPython and QEMU")
    state, debs, root = folder / "apt", folder / "debs", folder / "root"
    for d in (state / "lists" / "partial", state / "cache" / "archives" / "partial", debs, root):
        d.mkdir(parents=True, exist_ok=True)
    apt = ["apt-get", "-q", "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
           "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1", "-o", "APT::Architecture=amd64",
           "-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64", "-o", "APT::Sandbox::User=root"]  # fmt: skip
    for step in (["update"], ["download", *(f"{p}:arm64" for p in ARM64_PACKAGES), f"{QEMU}:amd64"]):
        proc = subprocess.run([*apt, *step], cwd=debs, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            _unavailable(f"apt-get {step[0]} failed: {proc.stderr.strip()[-500:]}")
    for deb in sorted(debs.glob("*.deb")):
        if deb.name.startswith(QEMU):  # 60 MB of emulators: only aarch64's is kept
            tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(root), "./usr/bin/qemu-aarch64-static"], input=tar, check=True)
        else:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    shutil.rmtree(debs)
    shutil.rmtree(state)
    driver = folder / "fakecuda"
    driver.mkdir()
    qemu = str(root / "usr" / "bin" / "qemu-aarch64-static")
    machine = Machine(name="aarch64", platform="linux_aarch64", zig_target="aarch64-linux-gnu.2.17", fake_driver=driver,
                      prefix=(qemu,), python=(qemu, str(root / "usr" / "bin" / "python3.11")),
                      env={"QEMU_LD_PREFIX": str(root)})  # fmt: skip
    subprocess.run(machine.compile_c("-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(driver / "libcuda.so.1"),
                                     str(FAKE_LIBCUDA), "-lpthread"), check=True)  # fmt: skip
    return machine
