"""aotpack new reads its templates as installed (pip compiles bytecode beside them: __pycache__), and writes a
new folder whole or not at all, never through a link."""

import contextlib
import errno
import os
import sys
from importlib import resources
from pathlib import Path

import pytest

from aotpack import _temp
from aotpack.backends import recipes
from aotpack.commands import cli, new

from ..shared import put_in_the_way
from . import test_cache
from .test_cache import as_nobody

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

open_tmp = test_cache.open_tmp  # a fixture: a folder the user nobody can pass through


def test_templates_skip_the_bytecode_an_installer_writes(tmp_path):
    (tmp_path / "kernels" / "__pycache__").mkdir(parents=True)
    (tmp_path / "kernels" / "axpy.py").write_text("x = $name\n")
    (tmp_path / "kernels" / "__pycache__" / "axpy.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00\xff")
    (tmp_path / "stray.pyc").write_bytes(b"\xff\xfe")
    (tmp_path / "recipe.yaml").write_text("package: $name\n")
    assert new._files(tmp_path) == [("kernels/axpy.py", "x = $name\n"), ("recipe.yaml", "package: $name\n")]


def _scaffold(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(["new", *argv])
    return code, capsys.readouterr().err


def test_a_scaffold_is_written_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["new", "kit"]) == 0
    written = sorted(str(p.relative_to(tmp_path / "kit")) for p in (tmp_path / "kit").rglob("*") if p.is_file())
    assert written == sorted(name for name, _ in new._files(resources.files("aotpack") / "templates" / "new"))
    assert "package: kit" in (tmp_path / "kit" / "recipe.yaml").read_text()
    (tmp_path / "empty").mkdir()
    assert cli.main(["new", "kit", "--dir", str(tmp_path / "empty")]) == 0 and (tmp_path / "empty" / "kernels").is_dir()


@pytest.mark.parametrize("kind", ["file", "fifo", "dangling", "link-outside", "link-to-empty", "not-empty",
                                  "under-a-file", "dev-null"])  # fmt: skip
def test_a_destination_that_is_not_a_new_folder_is_refused(tmp_path, kind, capsys):
    """Nothing is written, and nothing through a link: what the destination or a link points at is unchanged."""
    dest = tmp_path / "dest"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sentinel").write_text("kept")
    os.utime(outside / "sentinel", (1, 1))
    message = {
        "file": f"{dest} is a file, not a folder; give a new folder with --dir",
        "fifo": f"{dest} is a FIFO, not a folder; give a new folder with --dir",
        "dev-null": "/dev/null is a device, not a folder; give a new folder with --dir",
        "dangling": f"{dest} is a link; aotpack new writes nothing through one: give a new folder with --dir",
        "link-outside": f"{dest} is a link; aotpack new writes nothing through one: give a new folder with --dir",
        "link-to-empty": f"{dest} is a link; aotpack new writes nothing through one: give a new folder with --dir",
        "not-empty": f"{dest} exists and is not empty; choose another folder with --dir",
        "under-a-file": f"cannot use {dest}/sub (Not a directory); give a new folder with --dir",
    }[kind]
    target = {"dev-null": Path("/dev/null"), "under-a-file": dest / "sub"}.get(kind, dest)
    if kind == "link-to-empty":
        (tmp_path / "empty").mkdir()
    links = {"dangling": tmp_path / "nothing", "link-outside": outside, "link-to-empty": tmp_path / "empty"}
    put_in_the_way(dest, {"under-a-file": "file", "link-outside": "link", "link-to-empty": "link"}.get(kind, kind),
                   links.get(kind))  # fmt: skip
    assert _scaffold(["kit", "--dir", str(target)], capsys) == (11, f"aotpack: error: {message}\n")
    assert sorted(p.name for p in outside.iterdir()) == ["sentinel"] and (outside / "sentinel").stat().st_mtime == 1
    assert not (tmp_path / "nothing").exists() and not any((tmp_path / "empty").glob("*"))
    assert kind not in ("file", "under-a-file") or dest.read_text() == "mine"


@pytest.mark.parametrize("name", ["foo\n", "foo\nbar", "foo\r", "foo\t", "fo\x00o", "f\u00f6o", "\u0661"])
def test_a_name_that_would_not_make_a_recipe_is_refused(tmp_path, name, capsys):
    code, err = _scaffold([name, "--dir", str(tmp_path / "d")], capsys)
    assert (
        code == 11 and err.startswith(f"aotpack: error: {name!r} is not a valid package name") and err.count("\n") == 1
    )
    assert not (tmp_path / "d").exists()


def test_an_unwritable_parent_is_said_and_nothing_is_left(open_tmp):
    (open_tmp / "ro").mkdir()
    done = as_nobody(["new", "kit", "--dir", str(open_tmp / "ro" / "kit")])
    assert (done.returncode, done.stderr) == (11, f"aotpack: error: cannot write {open_tmp}/ro/kit (Permission denied); "
                                              "nothing was written: give a folder you can write with --dir\n")  # fmt: skip
    assert not list((open_tmp / "ro").iterdir())


@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_scaffold_leaves_no_file_half_written_and_none_at_all(tmp_path, monkeypatch, capsys, existing):
    """The disk fills while the third file is written: the files written before are removed, and so are the
    folders made for them; an empty folder given with --dir stays, empty."""
    real = _temp.atomic_file
    opened: list[Path] = []

    @contextlib.contextmanager
    def filling(path, *args, **kwargs):
        opened.append(path)
        with real(path, *args, **kwargs) as f:
            f.write(b"half a file")
            if len(opened) == 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            yield f

    monkeypatch.setattr(new, "atomic_file", filling)
    dest = tmp_path / "dest"
    if existing:
        dest.mkdir()
    code, err = _scaffold(["kit", "--dir", str(dest)], capsys)
    assert (code, err) == (11, f"aotpack: error: cannot write {opened[-1]} (No space left on device); nothing was "
                              "written: give a folder you can write with --dir\n")  # fmt: skip
    assert (list(dest.iterdir()) == []) if existing else not dest.exists()
    assert list(tmp_path.iterdir()) == ([dest] if existing else [])


def test_the_scaffold_s_build_requires_name_what_its_kernels_need(tmp_path):
    """Its CUDA kernel needs nvcc: requires names aotpack's cuda extra (one aotpack defines), which an isolated
    build installs; no Triton there, since the backend asks for the recipe's release (test_toolchain); and its
    sdist packs every file the wheel's build reads, with no kernel imported (test_build_meta_files)."""
    from aotpack.backends import recipes

    new.scaffold("mykernels", tmp_path / "p")
    requires = tomllib.loads((tmp_path / "p" / "pyproject.toml").read_text())["build-system"]["requires"]
    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    found = recipes.sources(tmp_path / "p" / "recipe.yaml")
    assert {k.backend for k in found.kernels} == {"triton", "cuda"}
    assert requires == ["aotpack[cuda]"] and "cuda" in extras


@pytest.mark.parametrize("name", ["triton", "torch", "aotpack", "pip", "setuptools", "wheel", "pytest", "yaml"])
def test_a_name_that_would_replace_a_distribution_is_refused_unless_a_fork_says_so(tmp_path, name, capsys):
    code, err = _scaffold([name, "--dir", str(tmp_path / "d")], capsys)
    assert (
        code == 11 and err.startswith(f"aotpack: error: {name!r} is ") and "installing the wheel would replace" in err
    )
    assert not (tmp_path / "d").exists()
    owner = err.split("'replaces: ", 1)[1].split("'", 1)[0]
    assert _scaffold([name, "--dir", str(tmp_path / "d"), "--replaces", owner], capsys)[0] == 0
    assert recipes.load(tmp_path / "d" / "recipe.yaml").package == name, "its recipe says so"
    assert f'replaces: "{owner}"' in (tmp_path / "d" / "recipe.yaml").read_text()
