"""What the tests share: the recipes under tests/fixtures, as text, and a PATH without compilers."""

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOOD = (FIXTURES / "kit.yaml").read_text()  # kernel add.py: write it beside (the kernel_dir fixture)
SMALL = (FIXTURES / "small.yaml").read_text()  # kernel kernels/add.py: a project lays it out there
# the same recipe naming the example kernel by its absolute path: it builds from any folder
SMALL_ANYWHERE = SMALL.replace("kernels/add.py", f"{ROOT / 'examples'}/add.py")


def stand_in_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel named ``name`` at ``version`` (a module and its metadata, with these requirements),
    as pip installs real ones: a stand-in for Triton (no download) or for torch's Triton pin."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    module, info = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {f"{module}/__init__.py": f"__version__ = {version!r}\n", f"{info}/METADATA": metadata,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}  # fmt: skip

    def line(path: str, data: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data.encode())}"

    files[f"{info}/RECORD"] = "".join(f"{line(p, d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name_in_zip, data in files.items():
            z.writestr(name_in_zip, data)
    return path


def put_in_the_way(path: Path, kind: str, target: Path | None = None) -> None:
    """What a test puts where aotpack expects a folder or file of its own: ``file`` (holding "mine"), ``fifo``,
    ``dangling`` (a link to ``target``, missing), ``link`` (to ``target``), ``loop`` (a link to itself),
    ``not-empty`` (a folder holding mine.txt); other kinds put nothing there."""
    import os

    if kind == "file":
        path.write_text("mine")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("dangling", "link"):
        assert target is not None
        path.symlink_to(target)
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "not-empty":
        path.mkdir()
        (path / "mine.txt").write_text("mine")


COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "tcc", "zig", "nvcc", "ptxas")


def without_c_compiler(folder: Path) -> str:
    """A PATH of every program the current one reaches, C and CUDA compilers left out (by name, versioned names
    and target-prefixed ones included): a replay must need none (Triton builds its launchers with one, Inductor
    its C++ kernels)."""
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for program in Path(directory).glob("*") if Path(directory).is_dir() else ():
            base = program.name.rsplit("-", 1)[-1] if program.name.startswith(("x86_64-", "aarch64-")) else program.name
            if base.split("-")[0] in COMPILERS or (folder / program.name).exists():
                continue
            (folder / program.name).symlink_to(program)
    assert not any(shutil.which(c, path=str(folder)) for c in COMPILERS)
    return str(folder)
