"""The Triton releases aotpack builds, records and activates with: one row per minor release, and what differs
between them where aotpack drives Triton.

Every minor release a torch release of the last twelve months pins, and the newest on PyPI, is tested (CI:
the whole suite with the newest, a subset with each other one, tests/releases.py; the H100: the demo's GPU
tests with a wheel each release built). What aotpack drives is the same in all of them: ``triton.compile`` of
an ``ASTSource`` for a ``GPUTarget``, the compiled kernel's ``asm`` and ``metadata`` (shared memory, scratch,
tensor-descriptor layouts), ``JITFunction``'s parameters, binder and ``run``, ``Autotuner``'s ``cache`` and
``configs``, and ``knobs.runtime``'s ``jit_cache_hook`` and ``launch_enter_hook``. What differs and reaches
aotpack, each read off the installed release where it is used (a feature, never a version number):

==========================================  ===================================  ==================================
difference                                  releases                             handled in
==========================================  ===================================  ==================================
the record payload's target                 in the options from 3.9; before,     runtime/_aotpack_jit.py (the
                                            the device's binder has it           device's target)
a ``@triton.jit`` constexpr in the data     3.6 raises while a hook is set;      runtime/_aotpack_jit.py:
handed to ``jit_cache_hook``                3.7 on name the function             name_function_constexprs
the JIT's ``enable_fp_fusion`` default      3.9 reads TRITON_DEFAULT_FP_FUSION   the compile always passes the
                                            and warns while it is unset          option (__init__.py)
the Pythons PyPI has wheels for             3.9: none for 3.10                   ``Release.pythons`` below
==========================================  ===================================  ==================================

A release not in the table is refused when it is used (building, recording, planning a Triton kernel), with
the tested ones and how to proceed: ``aotpack build --triton X.Y`` builds with a tested release kept in
aotpack's cache (toolchain.py), whatever Triton is installed.
"""

from __future__ import annotations

import importlib.metadata
import sys
from dataclasses import dataclass

from ...errors import ToolNotFound


@dataclass(frozen=True)
class Release:
    minor: tuple[int, int]
    tested: str  # the exact release CI tests (the one torch pins, where one does: tests/releases.py)
    torch: str  # the torch releases that pin it (messages, docs/triton-releases.md)
    pythons: tuple[tuple[int, int], ...]  # the CPython versions PyPI has its wheels for (of those aotpack runs on)


_ALL_PYTHONS = ((3, 10), (3, 11), (3, 12), (3, 13))
RELEASES = (
    Release((3, 6), "3.6.0", "2.10, 2.11", _ALL_PYTHONS),
    Release((3, 7), "3.7.1", "2.12, 2.13", _ALL_PYTHONS),
    Release((3, 8), "3.8.0", "2.14", _ALL_PYTHONS),
    Release((3, 9), "3.9.0", "none yet: the newest on PyPI", ((3, 11), (3, 12), (3, 13))),
)
SUPPORTED = tuple(r.minor for r in RELEASES)


def minor(version: str) -> tuple[int, int]:
    """``3.8.0`` -> (3, 8); anything else is not a Triton release."""
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"{version!r} is not a Triton version (X.Y or X.Y.Z)")
    return int(parts[0]), int(parts[1])


def newest_supported(python: tuple[int, int]) -> tuple[int, int]:
    """The newest tested release with a wheel for this Python."""
    return max(r.minor for r in RELEASES if python in r.pythons)


def tested() -> str:
    """The tested releases, as messages name them."""
    return ", ".join(f"{a}.{b}.x (torch {r.torch})" if r.torch[0].isdigit() else f"{a}.{b}.x"
                     for r in RELEASES for a, b in [r.minor])  # fmt: skip


def not_installed() -> str:
    """What to do where no Triton is installed: the extra that brings one, or a release the build keeps apart."""
    newest = ".".join(map(str, newest_supported(sys.version_info[:2])))
    return ("Triton is not installed: install the release your torch pins (pip install 'aotpack[triton]' where "
            f"nothing pins one), or build with a release kept in aotpack's cache: aotpack build --triton {newest} "
            f'(a kernel project: triton = "{newest}" under [tool.aotpack] in its pyproject.toml)')  # fmt: skip


def installed_version() -> str:
    """The installed Triton's version, refused unless aotpack is tested with its minor release."""
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        raise ToolNotFound(not_installed(), extra="triton") from None
    if not isinstance(version, str):  # a dist-info without its version: an install cut short, or one under way
        raise ToolNotFound("Triton's installed metadata names no version (an install cut short?): reinstall it, "
                           "or build with a release kept in aotpack's cache (aotpack build --triton X.Y)")  # fmt: skip
    try:
        known = minor(version) in SUPPORTED
    except ValueError:
        known = False
    if not known:
        raise ToolNotFound(
            f"Triton {version} is installed; aotpack is tested with Triton {tested()}. Build with one of them "
            "without touching this environment: aotpack build --triton 3.9 (or the release your serving stack "
            "runs), or install one here"
        )
    return version
