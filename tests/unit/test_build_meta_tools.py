"""A missing toolchain, said where its user fixes it: inside a kernel project's PEP 517 build, nvcc is named by
the ``[build-system] requires`` that installs it (nothing installed by hand reaches an isolated build); an aotpack
error that ends a hook's process is one line, not a traceback; without Triton, a recipe's kernel says how to build
with one (``--triton``, the ``triton`` extra), and ``aotpack plan`` takes --triton and the recipe's triton: as
``aotpack build`` does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack import build_meta
from aotpack.backends.cuda import compiler
from aotpack.backends.triton import releases, toolchain
from aotpack.commands import cli
from aotpack.errors import ToolNotFound

from ..shared import ROOT, SMALL

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


def find_no_nvcc(rec, options, progress=None):
    """The build as far as its CUDA compiler's lookup, the real one, where no nvcc is anywhere it looks: not
    $CUDA_HOME, not PATH, not the nvidia-cuda-nvcc package (the kernels were imported before, with the path whole)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CUDA_HOME", raising=False)
        patch.setenv("PATH", "/nonexistent")
        patch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "nvidia").exists()])
        compiler.find_nvcc()


def _built_without_nvcc(tmp_path, monkeypatch, requires):
    """The PEP 517 build of a small project whose [build-system] requires is ``requires``, where no nvcc is found."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "add.py").write_text((ROOT / "examples" / "add.py").read_text())
    (tmp_path / "recipe.yaml").write_text(SMALL)
    (tmp_path / "pyproject.toml").write_text(f'[build-system]\nrequires = {requires}\n\n[tool.aotpack]\n'
                                             'recipe = "recipe.yaml"\n')  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("aotpack.pipeline.build.run", find_no_nvcc)
    with pytest.raises(ToolNotFound) as info:
        build_meta.build_wheel(str(tmp_path / "out"))
    return info


@pytest.mark.parametrize(("requires", "fixed"), [
    ('["aotpack"]', '["aotpack[cuda]"]'),
    ('["aotpack[dask]>=0.3", "ninja"]', '["aotpack[cuda,dask]>=0.3", "ninja"]'),
    ('["setuptools"]', '["setuptools", "aotpack[cuda]"]'),
])  # fmt: skip
def test_a_missing_nvcc_in_a_pep517_build_names_the_requires_that_installs_it(tmp_path, monkeypatch, requires, fixed):
    info = _built_without_nvcc(tmp_path, monkeypatch, requires)
    assert str(info.value).startswith(
        f"pyproject.toml: [build-system] requires = {requires}: the build needs aotpack's cuda extra; write "
        f"requires = {fixed} (an isolated build holds only what requires names). The build said: nvcc not found"
    )
    assert info.value.extra == "cuda"


def test_an_aotpack_error_ending_a_hook_s_process_is_one_line_and_any_other_keeps_its_traceback(tmp_path):
    def run(error: str) -> subprocess.CompletedProcess[str]:
        code = f"import aotpack.build_meta, aotpack.errors\nraise {error}"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path)

    ours = run("aotpack.errors.ToolNotFound('nvcc not found', extra='cuda')")
    assert (ours.returncode, ours.stderr) == (1, "aotpack: error: nvcc not found\n")
    other = run("ValueError('a bug')")
    assert other.returncode == 1 and other.stderr.startswith("Traceback") and "ValueError: a bug" in other.stderr


def test_without_triton_a_recipe_s_kernel_names_the_release_to_build_with_and_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    monkeypatch.delenv(toolchain.ACTIVE, raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(SMALL.replace("kernels/add.py", str(tmp_path / "fresh_add.py")))  # imported anew
    (tmp_path / "fresh_add.py").write_text((ROOT / "examples" / "add.py").read_text())
    newest = ".".join(map(str, releases.newest_supported(sys.version_info[:2])))
    for verb in ("plan", "build"):
        assert cli.main([verb, str(recipe), *(["-o", str(tmp_path / "out")] if verb == "build" else [])]) == 3
        err = capsys.readouterr().err
        assert err.startswith(f"aotpack: error: {recipe}:6:13: kernels.add.triton: importing ")
        assert "failed: ModuleNotFoundError: " in err
        assert f"pip install 'aotpack[triton]' where nothing pins one), or build with a release kept in aotpack's " \
               f"cache: aotpack build --triton {newest} (a kernel project: triton = \"{newest}\" under " \
               "[tool.aotpack]" in err  # fmt: skip


@pytest.mark.parametrize(("argv", "in_recipe", "asked"), [
    (["--triton", "3.8"], None, "triton~=3.8.0"), (["--triton", "3.7.1"], "3.8", "triton==3.7.1"),
    ([], "3.8", "triton~=3.8.0"),
])  # fmt: skip
def test_plan_takes_triton_and_the_recipe_s_as_build_does(tmp_path, monkeypatch, capsys, argv, in_recipe, asked):
    recipe = tmp_path / "r.yaml"
    release = f'triton: "{in_recipe}"\n' if in_recipe else ""
    recipe.write_text(f"package: p\nversion: 0.1.0\n{release}kernels: {{}}\n")
    monkeypatch.delenv(toolchain.ACTIVE, raising=False)
    seen: list[object] = []

    def needed(request, cache_dir, wheelhouse, fetch):
        assert fetch == ("--triton" in argv)  # the recipe's triton: alone fetches nothing: a kept one is used
        seen.append((request.requirement, cache_dir, wheelhouse))
        return toolchain.Toolchain("3.8.0", tmp_path / "triton-3.8.0")

    def run_build(kept, args):
        seen.append((kept.version, args))
        return 6

    monkeypatch.setattr(toolchain, "needed", needed)
    monkeypatch.setattr(toolchain, "run_build", run_build)
    house = ["--wheelhouse", str(tmp_path), "--cache-dir", str(tmp_path / "c")]
    assert cli.main(["plan", str(recipe), *argv, *house]) == 6  # the child's status
    assert seen == [(asked, tmp_path / "c", tmp_path), ("3.8.0", ["plan", str(recipe), *argv, *house])]
    assert "planning with Triton 3.8.0 kept in aotpack's cache" in capsys.readouterr().err


def test_plan_fetches_no_triton_the_recipe_alone_names(tmp_path, capsys):
    """A listing does not install 640 MB: a release the recipe names that is neither installed nor kept is said, and
    the plan is made with the installed one; nothing is written into the cache."""
    from aotpack.backends.triton import releases

    installed = releases.minor(releases.installed_version())
    other = next(".".join(map(str, r)) for r in sorted(releases.SUPPORTED) if r != installed)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f'package: p\nversion: 0.1.0\ntriton: "{other}"\ntargets: [sm_90a]\nkernels: {{}}\n')
    code = cli.main(["plan", str(recipe), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert (
        f"the recipe names Triton {other}, which is neither installed nor kept in aotpack's cache: planning "
        f"with the installed one (--triton {other} fetches it)" in err
    ), err
    assert not (tmp_path / "c").exists()
    assert code in (0, 8), err  # (a recipe of no kernels: planned, or refused as having none; never fetched)


def test_plan_refuses_a_triton_it_is_not_tested_with(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("package: p\nversion: 0.1.0\nkernels: {}\n")
    with pytest.raises(SystemExit) as ended:  # (argparse's usage error, as every option's)
        cli.main(["plan", str(recipe), "--triton", "4.0"])
    assert ended.value.code == 2
    assert "argument --triton: Triton 4.0 is not a release aotpack is tested with" in capsys.readouterr().err


def test_the_nvcc_advice_installs_the_extra_whose_pin_keeps_the_floor_it_states():
    """`pip install nvidia-cuda-nvcc` takes the newest nvcc, whose wheels need the newest driver; the extra pins
    the release the message names."""
    with pytest.raises(ToolNotFound) as info:
        find_no_nvcc(None, None)
    said = re.search(r"run pip install 'aotpack\[cuda\]' \(nvcc (\d+\.\d+) from PyPI, pinned there: its wheels need "
                     r"a CUDA (\d+\.\d+) driver", str(info.value))  # fmt: skip
    assert said is not None and said[1] == said[2]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"nvidia-cuda-nvcc=={said[1]}.*" in extras["cuda"]


@pytest.mark.parametrize("requires", ['["aotpack[cuda]"]', '["aotpack[dask,cuda]>=0.3", "ninja"]'])
def test_a_missing_nvcc_where_requires_names_the_extra_says_to_install_it_here(tmp_path, monkeypatch, requires):
    """A build without isolation (pip --no-build-isolation) in an environment without the extra: the project is
    right, so the advice is to install the extra here (issue 60: it said to write requires as it already was)."""
    info = _built_without_nvcc(tmp_path, monkeypatch, requires)
    said = str(info.value)
    assert said.startswith(
        "the build needs aotpack's cuda extra, which pyproject.toml's [build-system] requires "
        "names, and this environment lacks it: a build without isolation (pip --no-build-isolation) "
        "uses what is installed here; run pip install 'aotpack[cuda]' here, or build isolated."
    )
    assert "write requires" not in said and info.value.extra == "cuda"


def test_build_with_another_triton_looks_for_nvcc_before_fetching_it(tmp_path, monkeypatch, capsys):
    """A recipe with a CUDA kernel and --triton X.Y of another release: no nvcc fails the build at once, before
    Triton's release (hundreds of MB) is fetched for a build that would then fail on it (issue 60)."""
    from aotpack.commands import new

    new.scaffold("kit", tmp_path / "kit")
    fetched: list[object] = []
    monkeypatch.setattr(toolchain, "needed", lambda *a, **k: fetched.append(a))

    def no_nvcc(explicit=None):
        raise ToolNotFound("nvcc not found (looked at $CUDA_HOME/bin, PATH and the nvidia-cuda-nvcc package)")

    monkeypatch.setattr(cli, "find_nvcc", no_nvcc)
    assert cli.main(["build", str(tmp_path / "kit" / "recipe.yaml"), "--triton", "3.7", "-o", str(tmp_path)]) == 3
    assert "nvcc not found" in capsys.readouterr().err and fetched == []
