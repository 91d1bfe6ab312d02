"""``[project]`` (PEP 621) of the pyproject.toml beside a recipe: read by pyproject-metadata, checked against what
the recipe states, and written into METADATA in a fixed order that packaging validates."""

from __future__ import annotations

import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.metadata import Metadata

from aotpack import build_meta
from aotpack.backends import recipes
from aotpack.errors import RecipeError
from aotpack.pipeline import wheel

from ..shared import ROOT, SMALL

FULL = """
[build-system]
requires = ["aotpack"]
build-backend = "aotpack.build_meta"

[project]
name = "small-kernels"
dynamic = ["version"]
description = "Small kernels"
readme = "docs/README.md"
license = "mit"
license-files = ["LICENSE"]
requires-python = ">=3.10"
authors = [{name = "Ada", email = "ada@example.org"}, {name = "Bob"}]
keywords = ["gpu", "triton"]
classifiers = ["Programming Language :: Python :: 3"]
dependencies = ["numpy>=1.20"]
optional-dependencies = {torch = ["torch>=2.4; python_version >= '3.10'"]}
urls = {Homepage = "https://example.org"}

[tool.aotpack]
recipe = "recipe.yaml"
"""


def project(tmp_path: Path, pyproject: str = FULL, recipe: str = SMALL) -> Path:
    root = tmp_path / "project"
    (root / "kernels").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "kernels" / "add.py").write_text((ROOT / "examples" / "add.py").read_text())
    (root / "recipe.yaml").write_text(recipe)
    (root / "pyproject.toml").write_text(pyproject)
    (root / "docs" / "README.md").write_text("# Small kernels\n\nAn add.\n")
    (root / "LICENSE").write_text("MIT License\n")
    return root


def test_project_metadata_completes_the_recipe_s_and_reaches_metadata_valid(tmp_path):
    root = project(tmp_path)
    rec = recipes.load(root / "recipe.yaml")
    assert (rec.summary, rec.license) == ("Small kernels", "MIT")  # "mit": the recipe's, normalized
    assert rec.project is not None and recipes.sources(root / "recipe.yaml").project == rec.project
    assert rec.project.readme == ("text/markdown", "# Small kernels\n\nAn add.\n")
    assert rec.project.license_files == (("LICENSE", b"MIT License\n"),)
    assert {p.name for p in rec.project.files} == {"pyproject.toml", "README.md", "LICENSE"}
    spec = wheel.WheelSpec(distribution=rec.package, version=rec.version, tag="cp39-abi3-linux_x86_64",
                           summary=rec.summary, generator="t", files=(), license=rec.license,
                           license_files=rec.project.license_files, **wheel.project_fields(rec.project))  # fmt: skip
    text = wheel.core_metadata(spec)
    read = Metadata.from_email(text, validate=True)
    assert str(read.requires_python) == ">=3.10,>=3.9"  # never below the abi3 wheel's
    assert read.author == "Bob" and read.author_email == "Ada <ada@example.org>" and read.keywords == ["gpu", "triton"]
    assert [str(r) for r in read.requires_dist or []] == [
        "numpy>=1.20",
        'torch>=2.4; python_version >= "3.10" and extra == "torch"',
    ]
    assert read.provides_extra == ["torch"] and read.project_urls == {"Homepage": "https://example.org"}
    assert read.description == "# Small kernels\n\nAn add.\n" and read.description_content_type == "text/markdown"
    assert wheel.core_metadata(spec) == text  # a fixed order: the same bytes every time


def _with(change: str, old: str = 'dynamic = ["version"]') -> str:
    assert old in FULL
    return FULL.replace(old, change)


@pytest.mark.parametrize(
    ("pyproject", "recipe", "message"),
    [
        (_with('name = "other"', 'name = "small-kernels"'), SMALL, r"name = 'other', the recipe's package"),
        (_with('version = "9.9"'), SMALL, r"version = '9.9', the recipe's: '0.2.0'"),
        (FULL, SMALL.replace("version: 0.2.0", "version: 0.2.0\nsummary: Other"), "description and the recipe's "
         "summary differ"),
        (FULL, SMALL.replace("license: MIT", "license: BSD-3-Clause"), "license = 'mit', the recipe's: 'BSD-3-Clause'"),
        (_with('dynamic = ["version", "readme"]'), SMALL, "only version may be dynamic"),
        (_with('dynamic = ["version"]\nscripts = {k = "k:main"}'), SMALL, "scripts: a kernel wheel has none"),
        (_with('readme = "../outside.md"', 'readme = "docs/README.md"'), SMALL, "lies outside the project"),
        (_with('readme = "/etc/hostname"', 'readme = "docs/README.md"'), SMALL, "lies outside the project"),
        (_with('license = {text = "MIT"}', 'license = "mit"'), SMALL, "|".join(("SPDX", "license"))),
        (_with('dynamic = ["version"]\nunknown = 1'), SMALL, "unknown|Extra keys"),
        (_with('version = "x.y"'), SMALL, "version"),
        (_with('authors = [{name = "Ada\\nRequires-Dist: evil"}]', 'authors = [{name = "Ada", email = "ada@example.org"}, {name = "Bob"}]'),
         SMALL, r"author .* holds the control character '\\n'"),  # no METADATA line of its own
        (_with('license = "MIT OR"', 'license = "mit"'), SMALL, "is not an SPDX license expression"),
        (_with('dynamic = "version"', 'dynamic = ["version"]'), SMALL,
         r"dynamic = 'version': a list of field names \(dynamic = \[\"version\"\]\)"),
        (_with('requires-python = "<3.9"', 'requires-python = ">=3.10"'), SMALL,
         r"requires-python = '<3.9' admits no Python the kernel wheel takes \(>=3.9, its cp39-abi3 tag\)"),
        (_with('requires-python = "==2.7.*"', 'requires-python = ">=3.10"'), SMALL, "admits no Python"),
        (_with('readme = "docs/RE\\u0000ADME.md"', 'readme = "docs/README.md"'), SMALL,
         r"'docs/RE\\x00ADME.md' holds the control character '\\x00'; name a file without it"),
        (_with('license-files = ["LIC\\u001bENSE"]', 'license-files = ["LICENSE"]'), SMALL,
         "holds the control character"),
    ],
)  # fmt: skip
def test_a_project_that_disagrees_with_its_recipe_or_says_what_a_kernel_wheel_cannot_is_refused(
    tmp_path, pyproject, recipe, message
):
    root = project(tmp_path, pyproject, recipe)
    (tmp_path / "outside.md").write_text("not the project's\n")
    for read in (recipes.load, recipes.sources):
        with pytest.raises(RecipeError, match=message):
            read(root / "recipe.yaml")


def test_a_readme_that_is_not_utf8_is_named_with_the_byte(tmp_path):
    root = project(tmp_path)
    (root / "docs" / "README.md").write_bytes(b"# Caf\xe9\n")
    with pytest.raises(RecipeError, match=r"readme: docs/README.md is not UTF-8 text \(byte 5: b'\\xe9'\); save it"):
        recipes.load(root / "recipe.yaml")


def test_a_pyproject_that_names_another_recipe_or_has_no_project_table_adds_nothing(tmp_path):
    root = project(tmp_path, FULL.replace('recipe = "recipe.yaml"', 'recipe = "other.yaml"'))
    assert recipes.load(root / "recipe.yaml").project is None
    root = project(tmp_path / "b", FULL.split("[project]")[0] + '[tool.aotpack]\nrecipe = "recipe.yaml"\n')
    rec = recipes.load(root / "recipe.yaml")
    assert rec.project is None and rec.summary == "Ahead-of-time compiled GPU kernels: small_kernels"


def test_the_sdist_carries_the_project_s_readme_and_license_and_its_pkg_info_the_fields(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.chdir(root)
    name = build_meta.build_sdist(str(tmp_path / "out"))
    with tarfile.open(tmp_path / "out" / name) as tar:
        members = sorted(m.removeprefix("small_kernels-0.2.0/") for m in tar.getnames())
        info = Metadata.from_email(tar.extractfile("small_kernels-0.2.0/PKG-INFO").read(), validate=True)  # type: ignore[union-attr]
    assert members == ["LICENSE", "PKG-INFO", "docs/README.md", "kernels/add.py", "pyproject.toml", "recipe.yaml"]
    assert info.summary == "Small kernels" and info.license_files == ["LICENSE"] and info.requires_dist


def test_the_backend_refuses_a_project_table_whose_recipe_is_not_beside_it(tmp_path, monkeypatch):
    root = project(tmp_path, FULL.replace('recipe = "recipe.yaml"', 'recipe = "sub/recipe.yaml"'))
    (root / "sub").mkdir()
    (root / "sub" / "recipe.yaml").write_text(SMALL.replace("kernels/add.py", "../kernels/add.py"))
    monkeypatch.chdir(root)
    monkeypatch.setattr("aotpack.pipeline.build.run", lambda *a, **k: SimpleNamespace(wheel=Path("x.whl")))
    for hook in (build_meta.build_wheel, build_meta.build_sdist):
        with pytest.raises(Exception, match=r"move the recipe next to pyproject\.toml"):
            hook(str(tmp_path / "out"))
