"""aotpack new reads its templates as installed: pip compiles bytecode beside them (__pycache__)."""

from aotpack import new


def test_templates_skip_the_bytecode_an_installer_writes(tmp_path):
    (tmp_path / "kernels" / "__pycache__").mkdir(parents=True)
    (tmp_path / "kernels" / "axpy.py").write_text("x = $name\n")
    (tmp_path / "kernels" / "__pycache__" / "axpy.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00\xff")
    (tmp_path / "stray.pyc").write_bytes(b"\xff\xfe")
    (tmp_path / "recipe.yaml").write_text("package: $name\n")
    assert new._files(tmp_path) == [("kernels/axpy.py", "x = $name\n"), ("recipe.yaml", "package: $name\n")]
