"""Triton releases kept in aotpack's cache for `aotpack build --triton` (backends/triton/toolchain.py): what a
request may name, how one is installed (pip from a wheelhouse: a stand-in Triton wheel made here, so no network),
found again without pip, listed and dropped with the cache, and when a build uses one."""

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aotpack import _tools
from aotpack.backends.triton import releases, toolchain
from aotpack.commands import cli
from aotpack.errors import ToolFailed, ToolNotFound, UsageError
from aotpack.pipeline import cache

from .. import shared


def stand_in_wheel(folder: Path, version: str) -> Path:
    return shared.stand_in_wheel(folder, "triton", version)


@pytest.mark.parametrize(("text", "minor", "exact"), [("3.8", (3, 8), None), ("3.6.0", (3, 6), "3.6.0"),
                                                      ("3.9.12", (3, 9), "3.9.12")])  # fmt: skip
def test_a_request_names_a_tested_minor_release_or_an_exact_one(text, minor, exact):
    request = toolchain.Request.parse(text)
    assert (request.minor, request.exact) == (minor, exact)
    assert request.requirement == (f"triton=={exact}" if exact else f"triton~={minor[0]}.{minor[1]}.0")


@pytest.mark.parametrize(("text", "message"), [
    ("3.5", "Triton 3.5 is not a release aotpack is tested with (3.6.x (torch 2.10, 2.11)"),
    ("3.10.0", "Triton 3.10.0 is not a release aotpack is tested with"),
    ("latest", "'latest' is not a Triton release: give X.Y (the newest X.Y.z) or X.Y.Z"),
    ("3.8.*", "is not a Triton release"), ("==3.8.0", "is not a Triton release"), ("3", "is not a Triton release"),
    ("3.8.0; rm -rf /", "is not a Triton release"), ("", "is not a Triton release"),
])  # fmt: skip
def test_anything_else_is_refused_saying_what_to_give(text, message):
    with pytest.raises(ValueError) as info:
        toolchain.Request.parse(text)
    assert message in str(info.value)


def test_a_release_is_installed_from_a_wheelhouse_once_then_found_in_the_cache(tmp_path, monkeypatch):
    house = tmp_path / "wheels"
    stand_in_wheel(house, "3.8.2")
    stand_in_wheel(house, "3.8.5")
    got = toolchain.ensure(toolchain.Request.parse("3.8"), tmp_path / "cache", house)
    assert got.version == "3.8.5" and got.path == tmp_path / "cache" / "toolchains" / "triton-3.8.5"
    assert (got.path / "triton" / "__init__.py").read_text() == "__version__ = '3.8.5'\n"
    assert [p.name for p in (tmp_path / "cache" / "toolchains").iterdir()] == ["triton-3.8.5"]  # no leftovers

    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran for a release the cache has")

    monkeypatch.setattr(_tools, "run", no_pip)
    assert toolchain.ensure(toolchain.Request.parse("3.8"), tmp_path / "cache", house) == got
    monkeypatch.undo()
    older = toolchain.ensure(toolchain.Request.parse("3.8.2"), tmp_path / "cache", house)  # an exact pin
    assert older.version == "3.8.2"
    entries = cache.Cache(tmp_path / "cache").entries()
    assert sorted(e.path.name for e in entries) == ["triton-3.8.2", "triton-3.8.5"]
    assert all(e.bytes > 0 for e in entries)


def test_a_release_the_wheelhouse_lacks_fails_saying_where_it_looked(tmp_path):
    house = tmp_path / "wheels"
    stand_in_wheel(house, "3.8.2")
    with pytest.raises(ToolFailed) as info:
        toolchain.ensure(toolchain.Request.parse("3.7"), tmp_path / "cache", house)
    assert f"pip could not install triton~=3.7.0 from the wheelhouse {house}: name a wheelhouse" in str(info.value)
    assert not list((tmp_path / "cache" / "toolchains").iterdir()), "a failed install leaves nothing behind"


def test_an_unfinished_install_is_not_used(tmp_path):
    folder = tmp_path / "toolchains" / "triton-3.8.0"
    (folder / "triton").mkdir(parents=True)  # killed before its stamp was written
    assert toolchain.kept(tmp_path) == []


@pytest.mark.parametrize(("installed", "asked", "uses_one"), [
    ("3.9.0", "3.9", False), ("3.9.0", "3.9.0", False), ("3.9.0", "3.8", True), ("3.9.0", "3.9.1", True),
    (None, "3.9", True), ("3.5.1", "3.6", True),
])  # fmt: skip
def test_a_build_uses_a_kept_release_only_where_the_installed_one_is_not_the_one_asked_for(
    monkeypatch, tmp_path, installed, asked, uses_one
):
    def version():
        if installed is None:
            raise ToolNotFound("Triton is not installed")
        return installed

    monkeypatch.delenv(toolchain.ACTIVE, raising=False)
    monkeypatch.setattr(releases, "installed_version", version)
    asked_for: list[toolchain.Request] = []

    def ensure(request, cache_dir, house):
        asked_for.append(request)
        return "kept"

    monkeypatch.setattr(toolchain, "ensure", ensure)
    monkeypatch.delenv(toolchain.WHEELHOUSE, raising=False)
    args = argparse.Namespace(triton=asked, recipe=tmp_path / "r.yaml", wheelhouse=None, cache_dir=tmp_path)
    assert (cli._release(args) == "kept") is uses_one
    assert [r.requirement for r in asked_for] == ([toolchain.Request.parse(asked).requirement] if uses_one else [])


def test_the_recipe_s_triton_is_read_as_written_and_checked_where_it_is(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("package: p\nversion: 0.1.0\ntriton: 3.10\nkernels: {}\n")
    assert cli.main(["build", str(recipe), "-o", str(tmp_path / "out")]) == 8
    assert f"{recipe}:3:9: triton: Triton 3.10 is not a release aotpack is tested with" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ended:  # (argparse's usage error, as every option's)
        cli.main(["build", str(recipe), "--triton", "4.0", "-o", str(tmp_path / "out")])
    assert ended.value.code == 2
    assert "argument --triton: Triton 4.0 is not a release aotpack is tested with" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_the_build_s_child_must_find_the_release_it_was_started_for(monkeypatch):
    monkeypatch.setenv(toolchain.ACTIVE, "3.8.0")
    monkeypatch.setattr(releases, "installed_version", lambda: "3.9.0")
    with pytest.raises(UsageError, match=r"the toolchain for Triton 3\.8\.0 found Triton 3\.9\.0 first on the path"):
        toolchain.check_active()
    monkeypatch.setattr(releases, "installed_version", lambda: "3.8.0")
    assert toolchain.check_active() == "3.8.0"


def test_the_child_runs_this_python_with_the_release_first_on_its_path(monkeypatch, tmp_path):
    seen: dict[str, Any] = {}

    def fake_run(command, env, check):
        seen.update(command=command, env=env)
        return SimpleNamespace(returncode=5)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    kept = toolchain.Toolchain("3.8.0", tmp_path / "triton-3.8.0")
    assert toolchain.run_build(kept, ["build", "r.yaml", "--triton", "3.8"]) == 5
    assert seen["command"] == [sys.executable, "-m", "aotpack", "build", "r.yaml", "--triton", "3.8"]
    assert seen["env"]["PYTHONPATH"] == f"{tmp_path / 'triton-3.8.0'}:/elsewhere"
    assert seen["env"][toolchain.ACTIVE] == "3.8.0"
    json.dumps(seen["env"])  # plain strings only


@pytest.mark.parametrize(("setting", "in_recipe", "wanted"), [
    (None, None, None), ("3.8", None, "triton~=3.8.0"), ("3.7.1", None, "triton==3.7.1"),
    (None, "3.7", "triton~=3.7.0"), ("3.8", "3.7", "triton~=3.8.0"),
])  # fmt: skip
def test_a_kernel_project_asks_its_build_front_end_for_its_triton(tmp_path, monkeypatch, setting, in_recipe, wanted):
    """PEP 517: with build isolation the front end installs what get_requires_for_build_wheel names; aotpack
    requires no Triton itself, so the project's setting, else the recipe's triton: (as `aotpack build` takes
    --triton, else the recipe's), else the newest tested release is that requirement."""
    from aotpack import build_meta

    line = f'triton = "{setting}"\n' if setting else ""
    (tmp_path / "pyproject.toml").write_text(f'[tool.aotpack]\nrecipe = "r.yaml"\n{line}')
    release = f'triton: "{in_recipe}"\n' if in_recipe else ""
    (tmp_path / "r.yaml").write_text(f"package: p\nversion: 0.1.0\n{release}kernels: {{}}\n")
    monkeypatch.chdir(tmp_path)
    newest = releases.newest_supported(sys.version_info[:2])
    assert build_meta.get_requires_for_build_wheel() == [wanted or f"triton~={newest[0]}.{newest[1]}.0"]
    with pytest.raises(UsageError, match=r"\(or -C\): triton = '3\.5': Triton 3\.5 is not a release aotpack"):
        build_meta.get_requires_for_build_wheel({"triton": "3.5"})
    with pytest.raises(UsageError, match=r"\(or -C\): triton = '': '' is not a Triton release"):
        build_meta.get_requires_for_build_wheel({"triton": ""})  # (it named the newest release silently)
