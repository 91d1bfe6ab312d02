"""aotpack new: the scaffold builds, and its own tests pass against the wheel it builds."""

import subprocess
import sys

import pytest

from aotpack import cli

from .helpers import install_wheel

pytestmark = pytest.mark.integration


def test_new_package_builds_and_passes_its_tests(tmp_path, capsys):
    assert cli.main(["new", "fresh_kit", "--dir", str(tmp_path / "fresh")]) == 0
    assert "wrote 6 files" in capsys.readouterr().out
    assert cli.main(["build", str(tmp_path / "fresh" / "recipe.yaml"), "-o", str(tmp_path / "dist"), "-q"]) == 0
    (wheel,) = (tmp_path / "dist").glob("fresh_kit-0.1.0-cp39-abi3-*.whl")
    site = install_wheel(wheel, tmp_path / "site")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "fresh", env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_new_refuses_bad_names_and_full_folders(tmp_path, capsys):
    assert cli.main(["new", "Bad-Name", "--dir", str(tmp_path / "x")]) == 2
    assert "'Bad-Name' is not a valid package name" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert cli.main(["new", "kit", "--dir", str(tmp_path / "full")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
