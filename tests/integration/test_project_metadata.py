"""A kernel project's ``[project]`` (PEP 621) in its wheel: ``aotpack build`` of the recipe beside the pyproject.toml,
``pip wheel .`` and the wheel built from ``python -m build``'s sdist are one wheel, byte for byte, whose METADATA
carries the table's fields (validated by packaging) and whose .dist-info/licenses holds its license files."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from packaging.metadata import Metadata

from aotpack.commands import cli

from ..unit.test_project import project


def test_project_metadata_reaches_the_wheel_the_same_through_every_front_end(tmp_path):
    root = project(tmp_path)
    assert cli.main(["build", str(root / "recipe.yaml"), "-o", str(tmp_path / "cli"), "-q"]) == 0
    (expected,) = (tmp_path / "cli").glob("small_kernels-0.2.0-cp39-abi3-manylinux*.whl")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "pip"), str(root)], check=True)  # fmt: skip
    assert (tmp_path / "pip" / expected.name).read_bytes() == expected.read_bytes()
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-C", "cache=false", "-o", str(tmp_path / "build"),
                    str(root)], check=True, capture_output=True)  # fmt: skip
    assert (tmp_path / "build" / expected.name).read_bytes() == expected.read_bytes()
    with zipfile.ZipFile(expected) as whl:
        read = Metadata.from_email(whl.read("small_kernels-0.2.0.dist-info/METADATA"), validate=True)
        licenses = {n.rsplit("/licenses/", 1)[1] for n in whl.namelist() if "/licenses/" in n and not n.endswith("/")}
        assert whl.read("small_kernels-0.2.0.dist-info/licenses/LICENSE") == b"MIT License\n"
    assert (read.summary, read.license_expression, str(read.requires_python)) == (
        "Small kernels",
        "MIT",
        ">=3.10,>=3.9",
    )
    assert str((read.requires_dist or [])[0]) == "numpy>=1.20" and read.provides_extra == ["torch"]
    assert read.description_content_type == "text/markdown" and (read.description or "").startswith("# Small kernels")
    assert licenses == {"AOTPACK-RUNTIME-LICENSE", "LICENSE"} == set(read.license_files or [])
