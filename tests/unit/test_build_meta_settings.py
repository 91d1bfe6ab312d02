"""The PEP 517 backend's settings: a hostile pyproject.toml or -C setting is aotpack's own error, naming
what to write instead, and no wheel or sdist is written."""

from __future__ import annotations

import re
import sys

import pytest

from aotpack import build_meta
from aotpack.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


def _refused(tmp_path, monkeypatch, pyproject: bytes, message: str, config=None) -> None:
    (tmp_path / "pyproject.toml").write_bytes(pyproject)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    for hook in (build_meta.build_wheel, build_meta.build_sdist):
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            hook(str(out), config)
    assert not out.exists()


RECIPE = b'[tool.aotpack]\nrecipe = "r.yaml"\n'


def test_a_pyproject_that_is_not_utf8_is_located(tmp_path, monkeypatch):
    body = RECIPE + b"# caf\xe9\n"
    _refused(tmp_path, monkeypatch, body, "pyproject.toml:3:6: the project file is not UTF-8 text (byte 0xe9)")


def test_a_missing_pyproject(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^project file pyproject.toml not found$"):
        build_meta.build_wheel(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_deeply_nested_pyproject(tmp_path, monkeypatch):
    body = RECIPE + b"deep = " + b"[" * 5000 + b"]" * 5000 + b"\n"
    message = "pyproject.toml: nested too deeply to read; write its arrays and tables flatter"
    _refused(tmp_path, monkeypatch, body, message)


def test_tool_that_is_not_a_table(tmp_path, monkeypatch):
    message = "pyproject.toml: tool must be a table ([tool.aotpack], not tool = ...)"
    _refused(tmp_path, monkeypatch, b'tool = "x"\n', message)


JOBS = "expected a number of parallel compiles: a whole number from 1 to 1024 in ASCII digits; got "


@pytest.mark.parametrize("jobs", ["0", "-1", str(10**18), "1025", "1.5", "true", '"4 "'])
def test_jobs_out_of_range_in_pyproject(tmp_path, monkeypatch, jobs):
    shown = repr(tomllib.loads(f"jobs = {jobs}")["jobs"])
    message = f"pyproject.toml: [tool.aotpack] jobs: {JOBS}{shown}"
    _refused(tmp_path, monkeypatch, RECIPE + f"jobs = {jobs}\n".encode(), message)


@pytest.mark.parametrize("jobs", ["0", "1025", str(10**18), "-1", "\u00b2", "1.5", "9" * 1001])
def test_jobs_refused_as_config_setting(tmp_path, monkeypatch, jobs):
    _refused(tmp_path, monkeypatch, RECIPE, f"pyproject.toml: config setting jobs: {JOBS}{jobs!r}", {"jobs": jobs})


@pytest.mark.parametrize(("setting", "given"), [('strict = "yes"', "'yes'"), ("strict = 1", "1"), ("cache = 0", "0")])
def test_a_switch_that_is_not_true_or_false(tmp_path, monkeypatch, setting, given):
    key = setting.split()[0]
    message = f"pyproject.toml: [tool.aotpack] {key}: expected a boolean: true or false (or 1 or 0, in any case); got "
    _refused(tmp_path, monkeypatch, RECIPE + setting.encode() + b"\n", message + given)


def test_switches_as_toml_or_text(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_bytes(RECIPE + b'strict = true\ncache = "0"\n')
    (tmp_path / "r.yaml").write_text("")  # the recipe named
    monkeypatch.chdir(tmp_path)
    assert [build_meta._settings({})[k] for k in ("strict", "cache")] == [True, False]
    assert build_meta._settings({"strict": "FALSE", "line-info": "1"}) | {"recipe": "r.yaml"} == {
        "recipe": "r.yaml", "strict": False, "cache": False, "line-info": True,
    }  # fmt: skip


def test_jobs_in_range_is_kept(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_bytes(RECIPE + b"jobs = 1024\n")
    (tmp_path / "r.yaml").write_text("")  # the recipe named
    monkeypatch.chdir(tmp_path)
    assert build_meta._settings({})["jobs"] == 1024
    assert build_meta._settings({"jobs": "1"})["jobs"] == 1


def test_cuda_below_12_in_pyproject(tmp_path, monkeypatch):
    message = (
        "pyproject.toml: [tool.aotpack] cuda = '11.8': CUDA 11.8 is older than aotpack builds for; give 12.0 or newer"
    )
    _refused(tmp_path, monkeypatch, RECIPE + b'cuda = "11.8"\n', message)


def test_cuda_below_12_as_config_setting(tmp_path, monkeypatch):
    message = (
        "pyproject.toml: config setting cuda = '11.8': CUDA 11.8 is older than aotpack builds for; give 12.0 or newer"
    )
    _refused(tmp_path, monkeypatch, RECIPE, message, {"cuda": "11.8"})


def test_cuda_that_is_not_a_release(tmp_path, monkeypatch):
    message = (
        "pyproject.toml: config setting cuda = 'twelve': 'twelve' is not a CUDA version (such as 12.2): "
        "the oldest CUDA driver the wheel must load on"
    )
    _refused(tmp_path, monkeypatch, RECIPE, message, {"cuda": "twelve"})


def test_cuda_from_12_is_kept(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_bytes(RECIPE + b'cuda = "12.0"\n')
    (tmp_path / "r.yaml").write_text("")  # the recipe named
    monkeypatch.chdir(tmp_path)
    assert build_meta._settings({})["cuda"] == "12.0"
    assert build_meta._settings({"cuda": "12.8"})["cuda"] == "12.8"


@pytest.mark.parametrize("given", ["4", "4.5", "true", "[1]"])
def test_a_recipe_that_is_not_text_is_refused_not_taken_as_a_path(tmp_path, monkeypatch, given):
    """Only a release (cuda, triton) may be written as a TOML number; the recipe is a file's name."""
    shown = repr(tomllib.loads(f"x = {given}")["x"])
    message = f"pyproject.toml: [tool.aotpack] recipe = {shown}: expected a string"
    _refused(tmp_path, monkeypatch, f"[tool.aotpack]\nrecipe = {given}\n".encode(), message)


@pytest.mark.parametrize(("pyproject", "config", "origin"), [
    (RECIPE, None, "[tool.aotpack] recipe = 'r.yaml'"),
    (RECIPE, {"recipe": "4"}, "config setting recipe = '4'"),
])  # fmt: skip
def test_a_recipe_setting_naming_no_file_says_where_it_comes_from(tmp_path, monkeypatch, pyproject, config, origin):
    message = f"pyproject.toml: {origin}: no such file beside pyproject.toml: name the recipe file, relative to it"
    _refused(tmp_path, monkeypatch, pyproject, message, config)


@pytest.mark.parametrize("value", ["linux_arm64", "win_amd64", "", "linux_x86_64 ", "LINUX_AARCH64"])
def test_a_platform_aotpack_does_not_build_for(tmp_path, monkeypatch, value):
    tail = "not a platform aotpack builds for; name one of linux_x86_64, linux_aarch64"
    _refused(tmp_path, monkeypatch, RECIPE + f'platform = "{value}"\n'.encode(),
             f"pyproject.toml: [tool.aotpack] platform = {value!r}: {tail}")  # fmt: skip
    _refused(tmp_path, monkeypatch, RECIPE, f"pyproject.toml: config setting platform = {value!r}: {tail}",
             {"platform": value})  # fmt: skip
