"""The Triton releases aotpack is tested with (backends/triton/releases.py): which one a Python gets, and an
untested, missing or unreadable one refused when used, with what to do."""

import importlib.metadata

import pytest

from aotpack.backends.triton import compiler as triton
from aotpack.backends.triton import releases, toolchain
from aotpack.errors import ToolNotFound


def test_every_release_a_current_torch_pins_and_the_newest_are_tested():
    assert releases.SUPPORTED == ((3, 6), (3, 7), (3, 8), (3, 9))
    assert releases.newest_supported((3, 10)) == (3, 8)  # Triton 3.9 publishes no cp310 wheel
    assert releases.newest_supported((3, 11)) == releases.newest_supported((3, 13)) == (3, 9)


@pytest.mark.parametrize("version", ["3.6.0", "3.7.1", "3.8.0", "3.9.0", "3.8.1rc1"])
def test_a_tested_release_is_used(monkeypatch, version):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)
    assert releases.installed_version() == version


@pytest.mark.parametrize("version", ["3.5.1", "3.10.0", "4.0.0", "2.3.1", "nightly", "3", ""])
def test_an_untested_release_is_refused_naming_the_tested_ones(monkeypatch, version):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)
    with pytest.raises(ToolNotFound) as info:
        releases.installed_version()
    message = str(info.value)
    assert f"Triton {version} is installed; aotpack is tested with Triton 3.6.x (torch 2.10, 2.11), 3.7.x" in message
    assert "3.8.x (torch 2.14), 3.9.x" in message and "aotpack build --triton 3.9" in message


def test_no_triton_says_what_to_install(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(ToolNotFound, match=r"Triton is not installed: .*'aotpack\[triton\]'.*--triton 3.9"):
        releases.installed_version()


def test_a_build_with_an_older_triton_says_so(monkeypatch, caplog):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.6.0")
    monkeypatch.setattr("aotpack.backends.triton.compiler.sys.version_info", (3, 12, 1))
    monkeypatch.setattr(triton, "ptxas_candidates", lambda: ())
    monkeypatch.setattr(triton, "ptxas_for", lambda target, candidates, floor: ())
    with caplog.at_level("WARNING", logger="aotpack"):
        triton.TritonCompiler.find(["sm_80"])
    assert "building with Triton 3.6.0, the installed one: the wheel gets that release's code (the newest aotpack " \
           "is tested with on Python 3.12 is 3.9: aotpack build --triton 3.9 builds with it)" in caplog.text  # fmt: skip
    caplog.clear()
    monkeypatch.setenv(toolchain.ACTIVE, "3.6.0")  # asked for (--triton 3.6): nothing to say
    with caplog.at_level("WARNING", logger="aotpack"):
        triton.TritonCompiler.find(["sm_80"])
    assert "building with Triton" not in caplog.text
    monkeypatch.delenv(toolchain.ACTIVE)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.8.0")
    monkeypatch.setattr("aotpack.backends.triton.compiler.sys.version_info", (3, 10, 4))
    with caplog.at_level("WARNING", logger="aotpack"):
        triton.TritonCompiler.find(["sm_80"])
    assert "building with Triton" not in caplog.text
