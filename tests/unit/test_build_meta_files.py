"""The PEP 517 hooks read and pack only the project's own files: a recipe, a kernel file, a table or a README named
by path (or by a link) outside the project is refused the same way by build_wheel and build_sdist, before anything
is read or written; links inside the project are followed."""

from __future__ import annotations

import os
import re
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from aotpack import build_meta
from aotpack.errors import ToolNotFound, UsageError
from aotpack.pipeline.build import BuildResult

from ..shared import ROOT, SMALL

PYPROJECT = '[project]\nname = "small_kernels"\nversion = "0.2.0"\n\n[tool.aotpack]\nrecipe = "{recipe}"\n'


def stub_result(out_dir: Path) -> BuildResult:
    """What the pipeline returns, for a stand-in that compiles nothing: an empty wheel file, two variants."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "small-stub.whl").write_bytes(b"")
    return BuildResult(wheel=out_dir / "small-stub.whl", variants=2, pruned=())


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project inside ``tmp_path/project``, a folder beside it (``elsewhere``) with a sentinel, and no compile:
    build_wheel stops where it would start compiling."""
    root, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (root / "kernels").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "kernels" / "add.py").write_text((ROOT / "examples" / "add.py").read_text())
    (root / "recipe.yaml").write_text(SMALL)
    (root / "pyproject.toml").write_text(PYPROJECT.format(recipe="recipe.yaml"))
    (elsewhere / "SECRET").write_text("not the project's\n")
    (elsewhere / "recipe.yaml").write_text(SMALL.replace("kernels/add.py", f"{root}/kernels/add.py"))
    built: list[Path] = []

    def stub(rec, options, progress=None):
        built.append(rec.path)
        return stub_result(options.out_dir)

    monkeypatch.setattr("aotpack.pipeline.build.run", stub)
    monkeypatch.chdir(root)
    return SimpleNamespace(root=root, elsewhere=elsewhere, built=built, out=tmp_path / "out")


def _refused(p, message: str) -> None:
    for hook in (build_meta.build_wheel, build_meta.build_sdist):
        with pytest.raises(UsageError, match=message):
            hook(str(p.out))
    assert not p.out.exists() and not p.built
    assert (p.elsewhere / "SECRET").read_text() == "not the project's\n"


def test_the_project_as_it_is_builds_and_packs_its_files(project):
    assert build_meta.build_wheel(str(project.out)) == "small-stub.whl"
    name = build_meta.build_sdist(str(project.out))
    with tarfile.open(project.out / name) as tar:
        members = sorted(tar.getnames())
    assert members == ["small_kernels-0.2.0/PKG-INFO", "small_kernels-0.2.0/kernels/add.py",
                       "small_kernels-0.2.0/pyproject.toml", "small_kernels-0.2.0/recipe.yaml"]  # fmt: skip


@pytest.mark.parametrize("recipe", ["../elsewhere/recipe.yaml", "{elsewhere}/recipe.yaml", "link.yaml"])
def test_a_recipe_outside_the_project_is_refused(project, recipe):
    os.symlink(project.elsewhere / "recipe.yaml", project.root / "link.yaml")
    (project.root / "pyproject.toml").write_text(PYPROJECT.format(recipe=recipe.format(elsewhere=project.elsewhere)))
    _refused(project, r"^pyproject.toml: \[tool.aotpack\] recipe = .* lies outside the project \(.*project\)")


@pytest.mark.parametrize("name", ["README.md", "LICENSE", "pyproject.toml"])
def test_a_packed_file_linking_outside_is_refused(project, name):
    text = (project.root / name).read_text() if name == "pyproject.toml" else ""
    (project.elsewhere / name).write_text(text or "secret\n")
    (project.root / name).unlink(missing_ok=True)
    os.symlink(project.elsewhere / name, project.root / name)
    with pytest.raises(UsageError, match=rf"^the project's {name} \(a link to .*elsewhere/{name}\) lies outside"):
        build_meta.build_sdist(str(project.out))
    assert not project.out.exists()


def test_a_link_inside_the_project_is_followed_and_packed_under_its_name(project):
    (project.root / "docs").mkdir()
    (project.root / "docs" / "README.md").write_text("# small\n")
    os.symlink("docs/README.md", project.root / "README.md")
    name = build_meta.build_sdist(str(project.out))
    with tarfile.open(project.out / name) as tar:
        readme = tar.extractfile("small_kernels-0.2.0/README.md")
        assert readme is not None and readme.read() == b"# small\n"


def test_a_kernel_file_outside_the_project_is_refused(project):
    (project.elsewhere / "add.py").write_text((ROOT / "examples" / "add.py").read_text())
    (project.root / "kernels" / "add.py").unlink()
    os.symlink(project.elsewhere / "add.py", project.root / "kernels" / "add.py")
    _refused(project, r"recipe.yaml: kernel add: .*elsewhere/add.py.* lies outside the project")


def test_a_helper_beside_the_kernel_linking_outside_is_refused(project):
    os.symlink(project.elsewhere / "SECRET", project.root / "kernels" / "helper.py")
    _refused(project, r"kernel add: .*kernels/helper.py \(a link to .*elsewhere/SECRET\) lies outside")


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_packed_file_that_is_not_a_file_is_refused(project, kind):
    """A FIFO is never opened (reading it would wait for a writer), a folder is not packed silently."""
    if kind == "fifo":
        os.mkfifo(project.root / "README.md")
    else:
        (project.root / "README.md").mkdir()
    with pytest.raises(UsageError, match=r"^the project's README.md is not a file; make it one, or remove it$"):
        build_meta.build_sdist(str(project.out))
    assert not project.out.exists()


def test_a_recipe_setting_no_file_system_can_hold_is_refused(project):
    with pytest.raises(UsageError, match=r"^pyproject.toml: \[tool.aotpack\] recipe = 'a\\x00b': cannot use the path"):
        build_meta.build_wheel(str(project.out), {"recipe": "a\x00b"})
    assert not project.out.exists()


def test_the_sdist_imports_no_kernel_and_needs_no_triton(project, monkeypatch):
    """An isolated front end installs nothing for the sdist: Triton is missing there, and so may be whatever the
    kernels import. The sdist is packed all the same, with the helper beside the kernel, the tuning hook and a
    CUDA kernel's include folder; the wheel's build still reads the recipe whole (and imports the kernel)."""
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    kernel = project.root / "kernels" / "add.py"
    kernel.write_text("import triton\n" + kernel.read_text())
    (project.root / "kernels" / "helper.py").write_text("raise SystemExit('imported')\n")
    (project.root / "include").mkdir()
    (project.root / "include" / "common.cuh").write_text("#define K 1\n")
    (project.root / "kernels" / "relu.cu").write_text('#include "common.cuh"\n__global__ void relu() {}\n')
    (project.root / "tuning").mkdir()
    (project.root / "tuning" / "inputs.py").write_text("raise SystemExit('imported')\n")
    (project.root / "recipe.yaml").write_text(SMALL.replace("license: MIT", RELU.lstrip("\n") + "license: MIT"))
    name = build_meta.build_sdist(str(project.out))
    with tarfile.open(project.out / name) as tar:
        members = sorted(m.removeprefix("small_kernels-0.2.0/") for m in tar.getnames())
    assert members == ["PKG-INFO", "include/common.cuh", "kernels/add.py", "kernels/helper.py", "kernels/relu.cu",
                       "pyproject.toml", "recipe.yaml", "tuning/inputs.py"]  # fmt: skip
    with pytest.raises(ToolNotFound, match=r"recipe.yaml:6:13: kernels.add.triton: importing kernels/add.py:add_kernel "
                       r"failed: .*; Triton is not installed: .* under \[tool.aotpack\]"):  # fmt: skip
        build_meta.build_wheel(str(project.out))


RELU = """
  relu:
    cuda: kernels/relu.cu
    entry: relu
    include_dirs: [include]
    args:
      n: i32
    grid: [1]
    block: [32]
    key: [n]
    tune: {inputs: "tuning/inputs.py:make", keys: [[1024]]}
"""


@pytest.mark.parametrize("setting", [None, "toml", "config"])
def test_the_wheel_build_shows_its_progress_on_stderr_unless_quiet(project, monkeypatch, capfd, setting):
    """build_wheel hands the pipeline the CLI's progress, writing to stderr (where a front end shows a backend's
    output); quiet, in [tool.aotpack] or as a config setting, leaves it out."""
    from aotpack.backends import Pruned

    def compiling(rec, options, progress=None):
        kernel = SimpleNamespace(name="add", backend="triton")
        planned = [SimpleNamespace(kernel=kernel, id=f"add/{i}/sm_80") for i in range(2)]
        progress.planned(planned)
        for v in planned:
            progress(v, Pruned(variant_id=v.id, reason="too big"), False)
        return stub_result(options.out_dir)

    monkeypatch.setattr("aotpack.pipeline.build.run", compiling)
    if setting == "toml":
        (project.root / "pyproject.toml").write_text(PYPROJECT.format(recipe="recipe.yaml") + "quiet = true\n")
    assert build_meta.build_wheel(str(project.out), {"quiet": "true"} if setting == "config" else None)
    out, err = capfd.readouterr()
    assert out == ""
    if setting is None:
        shown = [re.sub(r"\d+s", "Ns", line) for line in err.splitlines()]  # (seconds of the real clock)
        assert shown == ["pruned add/0/sm_80: too big", "[1/2] Ns, eta Ns, 0 cached, 1 pruned  add/0/sm_80",
                         "pruned add/1/sm_80: too big", "[2/2] Ns, eta Ns, 0 cached, 2 pruned  add/1/sm_80",
                         f"built {project.out / 'small-stub.whl'} (0.00 MB, 2 variants, Ns)"]  # fmt: skip
    else:
        assert err == ""


@pytest.mark.parametrize("quiet", [False, True])
def test_a_build_with_a_kept_triton_release_is_quiet_when_asked(project, monkeypatch, quiet):
    """Built by `aotpack build` run with the release kept in the cache: that child shows the progress, and is
    given -q with quiet."""
    from aotpack.backends.triton import toolchain

    argv: list[list[str]] = []

    def run_build(kept, args):
        argv.append(args)
        (Path(args[args.index("-o") + 1]) / "small-0.1-py3-none-any.whl").write_bytes(b"")
        return 0

    monkeypatch.delenv(toolchain.ACTIVE, raising=False)
    monkeypatch.setattr(toolchain, "needed", lambda *args: toolchain.Toolchain("3.8.0", project.root / "triton"))
    monkeypatch.setattr(toolchain, "run_build", run_build)
    project.out.mkdir()
    settings = {"triton": "3.8", **({"quiet": "true"} if quiet else {})}
    assert build_meta.build_wheel(str(project.out), settings) == "small-0.1-py3-none-any.whl"
    assert [a[:2] for a in argv] == [["build", "recipe.yaml"]] and ("-q" in argv[0]) == quiet


@pytest.mark.parametrize("hook", [build_meta.build_wheel, build_meta.build_sdist])
def test_an_output_folder_that_is_a_file_is_refused_before_any_work(project, hook):
    """A front end passes the folder a wheel or sdist goes to; one that is a file is said before anything is
    compiled or packed (it was said only when the finished wheel was copied there)."""
    project.out.write_text("a file\n")
    with pytest.raises(UsageError, match=r"folder .*out: it is a file, not a folder"):
        hook(str(project.out))
    assert project.out.read_text() == "a file\n" and not project.built
