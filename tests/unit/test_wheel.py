import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from aotpack.errors import WheelError
from aotpack.pipeline import repair, wheel


def spec(**changes):
    fields: dict[str, Any] = dict(
        distribution="kit", version="1.0", tag="cp39-abi3-linux_x86_64", summary="s", requires_python=">=3.9",
        generator="aotpack test", files=(("kit/_native.abi3.so", b"\x7fELF"), ("kit/__init__.py", b"x = 1\n")),
    )  # fmt: skip
    fields.update(changes)
    return wheel.WheelSpec(**fields)


def test_wheel_is_reproducible_and_well_formed(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    first = wheel.write_wheel(spec(), tmp_path / "a").read_bytes()
    second = wheel.write_wheel(spec(), tmp_path / "b").read_bytes()
    assert first == second
    with zipfile.ZipFile(tmp_path / "a" / "kit-1.0-cp39-abi3-linux_x86_64.whl") as zf:
        names = zf.namelist()
        assert names == [*sorted(names[:-1]), "kit-1.0.dist-info/RECORD"]
        infos = {i.filename: i for i in zf.infolist()}
        assert infos["kit/_native.abi3.so"].external_attr >> 16 == 0o100755
        assert infos["kit/__init__.py"].date_time == (2023, 11, 14, 22, 13, 20)
        record = zf.read("kit-1.0.dist-info/RECORD").decode().splitlines()
        for line in record[:-1]:
            name, digest, size = line.split(",")
            data = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert "Requires-Dist" not in zf.read("kit-1.0.dist-info/METADATA").decode()
        assert "Tag: cp39-abi3-linux_x86_64" in zf.read("kit-1.0.dist-info/WHEEL").decode()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000100")  # zip times have 2 s steps
    assert wheel.write_wheel(spec(), tmp_path / "c").read_bytes() != first
    assert not list((tmp_path / "a").glob(".tmp-*")), "no temporary file is left behind"


def test_license_expression_and_files_go_into_the_metadata(tmp_path):
    made = wheel.write_wheel(spec(license="MIT", license_files=(("NOTICE", b"notice\n"),)), tmp_path)
    with zipfile.ZipFile(made) as zf:
        metadata = zf.read("kit-1.0.dist-info/METADATA").decode()
        assert metadata.startswith("Metadata-Version: 2.4\n")
        assert "License-Expression: MIT\nLicense-File: NOTICE\n" in metadata
        assert zf.read("kit-1.0.dist-info/licenses/NOTICE") == b"notice\n"
        assert "kit-1.0.dist-info/licenses/NOTICE,sha256=" in zf.read("kit-1.0.dist-info/RECORD").decode()
    with pytest.raises(ValueError, match="control character"):
        wheel.write_wheel(spec(license="MIT\nRequires-Dist: evil"), tmp_path / "bad")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("k-1-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", True),
        ("k-1-cp39-abi3-manylinux_2_28_x86_64.whl", True),
        ("k-1-cp39-abi3-manylinux_2_34_x86_64.whl", False),
        ("k-1-cp39-abi3-linux_x86_64.whl", False),
    ],
)
def test_tag_policy(tmp_path, monkeypatch, name, ok):
    monkeypatch.setattr(
        "aotpack.pipeline.repair._tools.run", lambda *a, **k: "is consistent with manylinux_2_17_x86_64"
    )
    path = tmp_path / name
    if ok:
        repair.check_tag(path)
    else:
        with pytest.raises(WheelError, match="manylinux_2_28 or lower"):
            repair.check_tag(path)


@pytest.mark.parametrize(
    ("name", "tags", "platforms"),
    [
        ("k-0.1.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "cp39-abi3-manylinux2014_x86_64."
         "manylinux_2_17_x86_64", ["manylinux2014_x86_64", "manylinux_2_17_x86_64"]),
        ("my_kernels-1.0-1-cp39-abi3-manylinux_2_34_x86_64.whl", "cp39-abi3-manylinux_2_34_x86_64",
         ["manylinux_2_34_x86_64"]),  # a build tag: one field more, split by the wheel spec, not by counting
        ("x-1.0-py2.py3-none-any.whl", "py2.py3-none-any", ["any"]),
        ("not-a-wheel.zip", "", None),
    ],
)  # fmt: skip
def test_a_wheel_file_name_s_tags_are_read_as_the_wheel_spec_writes_them(name, tags, platforms):
    from packaging.utils import InvalidWheelFilename

    from aotpack.commands.inspect import _tags
    from aotpack.pipeline.repair import platform_tags

    assert _tags(name) == tags
    if platforms is None:
        with pytest.raises(InvalidWheelFilename):
            platform_tags(Path(name))
    else:
        assert platform_tags(Path(name)) == platforms


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"version": "1.0.x"}, "version"),
        ({"requires_python": ">=three"}, "requires-python|requires_python"),
        ({"license": "MIT OR"}, "license"),
    ],
)
def test_metadata_that_core_metadata_readers_reject_is_never_written(change, why):
    """What the recipe checks already, checked again by the library pip reads METADATA with."""
    from packaging.metadata import Metadata

    read = Metadata.from_email(wheel.core_metadata(spec()), validate=True)
    assert (read.name, str(read.version)) == (spec().distribution, spec().version)
    with pytest.raises(ValueError, match=f"METADATA does not validate: .*({why})"):
        wheel.core_metadata(spec(**change))


@pytest.mark.parametrize("recorded", [True, False])
def test_a_wheel_auditwheel_would_graft_host_libraries_into_is_refused(tmp_path, monkeypatch, recorded):
    """A recorded module linking a library of the build host (not the driver): auditwheel copies it into
    <name>.libs/, and the wheel would carry a host library. The build refuses it, naming the library."""

    def auditwheel(cmd, **kwargs):
        out = Path(cmd[cmd.index("-w") + 1])
        with zipfile.ZipFile(out / "pkg-1.0-cp39-abi3-manylinux_2_34_x86_64.whl", "w") as archive:
            archive.writestr("pkg/__init__.py", "")
            archive.writestr("pkg.libs/libssl-1a2b3c4d.so.3", b"\x7fELF")
        return ""

    monkeypatch.setattr("aotpack.pipeline.repair._tools.run", auditwheel)
    with pytest.raises(WheelError, match=r"copy libraries of this host into the wheel \(libssl-1a2b3c4d\.so\.3\)"):
        repair.repair(tmp_path / "pkg-1.0-cp39-abi3-linux_x86_64.whl", tmp_path / "out", recorded_modules=recorded)
    assert not list((tmp_path / "out").glob("*.whl"))
