"""``aotpack inspect`` of a path that is no wheel, or of a wheel aotpack did not build: one WheelError (exit 6)
naming the path and, past a bound, the bound (limits.py); promptly, and without reading more than the bound."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import warnings
import zipfile
from pathlib import Path

import pytest

from aotpack import limits, manifest
from aotpack.commands import cli, inspect
from aotpack.errors import WheelError

WHEEL = "x-1.0-cp39-abi3-linux_x86_64.whl"


@pytest.fixture(autouse=True)
def promptly():
    """A read that blocks (a FIFO opened for reading) fails the test instead of hanging it."""

    def late(signum, frame):
        raise TimeoutError("aotpack inspect did not return within 20 s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _inspect(path: Path | str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["inspect", str(path)]) == 6
    err = capsys.readouterr().err
    assert err.startswith("aotpack: error: ") and err.count("\n") == 1, err
    return err[len("aotpack: error: ") : -1]


def _wheel(folder: Path, data: bytes, method: int = zipfile.ZIP_DEFLATED) -> Path:
    wheel = folder / WHEEL
    with zipfile.ZipFile(wheel, "w", method) as zf:
        zf.writestr("x/__init__.py", b"")
        zf.writestr("x/manifest.json", data)
    return wheel


def _patch_central(wheel: Path, offset: int, fmt: str, value: int) -> None:
    """Rewrite a field of manifest.json's central directory record (the one zipfile trusts)."""
    data = bytearray(wheel.read_bytes())
    at = data.rindex(b"PK\x01\x02")  # the last record: manifest.json's
    struct.pack_into(fmt, data, at + offset, value)
    wheel.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom", "folder", "dangling", "missing", "empty"])
def test_a_path_that_is_not_a_wheel_returns_at_once_naming_it(tmp_path, kind, capsys):
    path = {"/dev/zero": Path("/dev/zero"), "/dev/urandom": Path("/dev/urandom")}.get(kind, tmp_path / WHEEL)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nothing")
    elif kind == "empty":
        path.write_bytes(b"")
    why = {"fifo": "a FIFO, not a regular file", "/dev/zero": "a device, not a regular file",
           "/dev/urandom": "a device, not a regular file", "folder": "a folder, not a regular file",
           "dangling": "No such file or directory", "missing": "No such file or directory",
           "empty": "it is not a whole zip file (File is not a zip file); rebuild the wheel"}[kind]  # fmt: skip
    hint = "" if kind == "empty" else "; give the path of a wheel"
    assert _inspect(path, capsys) == f"cannot read {path}: {why}{hint}"


def test_a_wheel_past_its_bound_is_not_opened(tmp_path, capsys):
    wheel = tmp_path / WHEEL
    with wheel.open("wb") as f:  # sparse: no disk used
        f.truncate(limits.MAX_WHEEL_BYTES + 1)
    assert _inspect(wheel, capsys) == (
        f"{wheel} has {limits.MAX_WHEEL_BYTES + 1} bytes, more than a wheel aotpack reads ({limits.MAX_WHEEL_BYTES}, "
        "limits.MAX_WHEEL_BYTES)"
    )


def test_a_manifest_past_its_bound_is_not_unpacked(tmp_path, capsys):
    """An honest header past the bound is refused before reading; a header that lies (a zip bomb saying it holds
    100 bytes) is read only as far as it says, and its CRC then fails."""
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("x/manifest.json", "w") as member:
        for _ in range(limits.MAX_MANIFEST_BYTES // (1 << 20) + 1):
            member.write(b" " * (1 << 20))
    assert wheel.stat().st_size < 1 << 20, "a small zip bomb"
    assert _inspect(wheel, capsys) == (
        f"{wheel}: its x/manifest.json unpacks to more than {limits.MAX_MANIFEST_BYTES} bytes "
        "(limits.MAX_MANIFEST_BYTES): aotpack did not write it; rebuild the wheel"
    )
    _patch_central(wheel, 24, "<I", 100)  # the uncompressed size
    assert _inspect(wheel, capsys) == (
        f"cannot read {wheel}: it is not a whole zip file (Bad CRC-32 for file 'x/manifest.json'); rebuild the wheel"
    )


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ((8, "<H", 0x1), "its manifest.json is encrypted, which a wheel never is; rebuild it"),
        ((10, "<H", 99), "its manifest.json is packed in a way Python cannot unpack (That compression method is not "
         "supported); rebuild the wheel"),
        ((16, "<I", 0xDEADBEEF), "it is not a whole zip file (Bad CRC-32 for file 'x/manifest.json'); rebuild the wheel"),
    ],
)  # fmt: skip
def test_a_damaged_member_is_a_wheel_error(tmp_path, damage, why, capsys):
    wheel = _wheel(tmp_path, b'{"package": "x"}')
    _patch_central(wheel, *damage)
    shown = _inspect(wheel, capsys)
    assert shown in (f"{wheel}: {why}", f"cannot read {wheel}: {why}")


def test_random_damage_is_always_a_wheel_error(tmp_path, written_manifest):
    """Every byte of a real manifest's zip flipped in turn (a sample): read, or a WheelError; nothing else."""
    wheel = _wheel(tmp_path, json.dumps(written_manifest).encode())
    good = wheel.read_bytes()
    rng = random.Random(7)
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        wheel.write_bytes(bytes(data))
        try:
            inspect.describe(manifest.read_wheel(wheel), WHEEL)
        except WheelError:
            pass


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 32 levels (limits.MAX_MANIFEST_DEPTH)"),
        (b"[" * 33 + b"]" * 33, "nests deeper than 32 levels (limits.MAX_MANIFEST_DEPTH)"),
        (b'{"a": ' * 40 + b"1" + b"}" * 40, "nests deeper than 32 levels (limits.MAX_MANIFEST_DEPTH)"),
        (b'{"n": 1' + b"0" * 5000 + b"}", "holds a number of 5001 digits, more than 20 (limits.MAX_DIGITS)"),
        (b'{"n": -' + b"9" * 21 + b"}", "holds a number of 21 digits, more than 20 (limits.MAX_DIGITS)"),
        (b"\xff\xfe{", "is not valid JSON"),
        (b"null", "is not an object"),
    ],
)
def test_a_manifest_aotpack_did_not_write_is_refused_saying_why(tmp_path, data, why, capsys):
    wheel = _wheel(tmp_path, data)
    assert _inspect(wheel, capsys).startswith(f"{wheel}: its manifest.json {why}")


def test_a_manifest_at_its_bounds_is_read(tmp_path):
    nested = {"schema": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], "n": -(10**19)}
    assert manifest.read_wheel(_wheel(tmp_path, json.dumps(nested).encode())) == nested


SHAPES = [[], {}, 1, "x", None, [[]], {"a": {}}, [1, "x"], {"": None}, 1.5, True, [{"a": []}], -(10**19)]


def _reshaped(base: object, rng: random.Random) -> object:
    """``base`` with one value somewhere replaced by another shape."""
    if isinstance(base, dict) and base and rng.random() < 0.8:
        key = rng.choice(sorted(base))
        return {**base, key: _reshaped(base[key], rng)}
    if isinstance(base, list) and base and rng.random() < 0.8:
        at = rng.randrange(len(base))
        return [*base[:at], _reshaped(base[at], rng), *base[at + 1 :]]
    return rng.choice(SHAPES)


@pytest.fixture
def written_manifest(kernel_dir):
    from aotpack.codegen import python as codegen_py

    from .test_codegen import fake_build

    return codegen_py.manifest(fake_build(kernel_dir, prune="sm_80"), "0.1.0")


def test_describe_says_one_line_for_any_shape(written_manifest):
    """A manifest of any shape (a value anywhere replaced by another kind) renders, or is one WheelError."""
    rng = random.Random(11)
    for _ in range(2000):
        try:
            inspect.describe(_reshaped(written_manifest, rng), WHEEL)  # type: ignore[arg-type]
        except WheelError as exc:
            assert "\n" not in str(exc).split(" (", 1)[0]


def test_a_manifest_aotpack_writes_has_the_types_it_says(written_manifest):
    assert manifest.type_problem(written_manifest) is None
    assert "specializations" in written_manifest["kernels"]["add"] and inspect.describe(written_manifest, WHEEL)


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("package",), None, "package: null, not text"),
        (("version",), {"a": 1}, "version: an object, not text"),
        (("aotpack",), 3, "aotpack: a whole number, not text"),
        (("toolchain", "triton"), ["3.6.0"], "toolchain.triton: a list, not text"),
        (("kernels", "add", "variants"), {}, "kernels.add.variants: an object, not a list"),
        (("kernels", "add", "variants", 0, "target"), True, "kernels.add.variants[0].target: true or false, not text"),
        (("kernels", "add", "bucket"), "linear", "kernels.add.bucket: text, not 'exact' or 'pow2'"),
        (("kernels", "add", "mutates"), "x", "kernels.add.mutates: text, not a list or null"),
        (("kernels",), [], "kernels: a list, not an object"),
    ],
)
def test_a_field_of_another_type_is_a_wheel_error_naming_it(written_manifest, path, value, why):
    """Not ``None`` or ``{'a': 1}`` printed as a version: the field and what it holds, once, at every depth."""
    changed = json.loads(json.dumps(written_manifest))
    holder = changed
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = value
    with pytest.raises(WheelError) as info:
        inspect.describe(changed, WHEEL)
    assert str(info.value) == f"{WHEEL}: its manifest's {why}: aotpack did not write it; rebuild the wheel"


EVIL = ["\x1b[2J\x1b[31m", "\x1b]0;title\x07", "\u202eevil", "a\nb\rc", "\x9b31m", "\u2028", "\x00"]


def test_inspect_escapes_every_text_it_prints_from_the_wheel(written_manifest, tmp_path, capsys):
    """A manifest's terminal controls, escape sequences, bidirectional overrides and line breaks are shown
    escaped, in every field and key the human output prints (--json escapes them itself)."""
    changed = json.loads(json.dumps(written_manifest))
    kernel = changed["kernels"].pop("add")
    evil = "".join(EVIL)
    kernel["source"] += evil
    kernel["variants"][0]["target"] += evil
    kernel["pruned"] = [{"id": "p" + evil, "reason": "r" + evil}]
    changed["kernels"]["add" + evil] = kernel
    changed.update(package="pkg" + evil, version="1" + evil, aotpack="0" + evil)
    changed["toolchain"]["triton" + evil] = "3.6" + evil
    changed["sources"]["add.py" + evil] = "f" * 64
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("x/manifest.json", json.dumps(changed))
    assert cli.main(["inspect", str(wheel)]) == 0
    out = capsys.readouterr().out
    assert all(c.isprintable() for line in out.splitlines() for c in line), repr(out)
    assert out.count("\\x1b[2J\\x1b[31m") >= 10 and "\\u202eevil" in out and "a\\nb\\rc" in out


def test_a_wheel_holding_a_name_twice_is_refused(tmp_path, written_manifest, capsys):
    """pip and zipfile use the last of two members of one name: inspect, reading the first, would lie."""
    wheel = tmp_path / WHEEL
    with warnings.catch_warnings(), zipfile.ZipFile(wheel, "w") as zf:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        zf.writestr("x/manifest.json", json.dumps(written_manifest))
        zf.writestr("x/manifest.json", json.dumps({**written_manifest, "package": "other"}))
    assert _inspect(wheel, capsys) == (
        f"{wheel} holds 'x/manifest.json' more than once: a wheel holds each name once; rebuild it"
    )
    with warnings.catch_warnings(), zipfile.ZipFile(wheel, "w") as zf:
        warnings.simplefilter("ignore")
        zf.writestr("x/manifest.json", json.dumps(written_manifest))
        zf.writestr("x/_k.so", b"1")
        zf.writestr("x/_k.so", b"2")
    assert "holds 'x/_k.so' more than once" in _inspect(wheel, capsys)


def test_torch_compile_s_recorded_caches_are_counted_typed_and_escaped(written_manifest):
    """A wheel that ships torch.compile's caches says how many sets, of which torch, and how large; a set's field
    of another type is a wheel error naming it; the torch it names is shown escaped."""
    changed = json.loads(json.dumps(written_manifest))
    changed["inductor_cache"] = [{"digest": "a" * 64, "torch": "2.11.0+cu130", "size": 1_500_000},
                                 {"digest": "b" * 64, "torch": "2.11.0\x1b[2J", "size": 500_000}]  # fmt: skip
    text = inspect.describe(changed, WHEEL)
    assert "torch.compile's caches: 2 sets of torch 2.11.0+cu130, 2.11.0\\x1b[2J (2.00 MB)" in text
    assert "\x1b" not in text
    changed["inductor_cache"][0].update(cpp_kernels=2, cpp_objects=1)  # Inductor's C++ kernels it calls for, held
    assert ("(2.00 MB); their graphs call for C++ kernels of Inductor's (2 calls), 1 shared object of them held (for "
            "the recording's CPU and Python; any other needs a C++ compiler where served)") in inspect.describe(
        changed, WHEEL
    )  # fmt: skip
    changed["inductor_cache"][0]["cpp_objects"] = [1]
    with pytest.raises(WheelError, match=r"inductor_cache\[0\]\.cpp_objects: .*not a whole number"):
        inspect.describe(changed, WHEEL)
    changed["inductor_cache"][0]["cpp_objects"] = 1
    changed["inductor_cache"][0]["size"] = "1.5 MB"
    with pytest.raises(WheelError, match=r"inductor_cache\[0\]\.size: text, not a whole number"):
        inspect.describe(changed, WHEEL)
