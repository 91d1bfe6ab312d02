"""The hostile corpus of the commands besides ``plan``: ``cache``, ``inspect``, ``new``, ``record``, the PEP 517 hooks'
file handling and the environment variables aotpack reads. Each case runs one command line in its own folder, with
sentinel files outside every target (the runner's ``outside/``, the folders cache links point at) checked after
it, and says what it may change (``may_write``). Expectations come from the kind of bad value, not from running
aotpack:

- a value of the wrong kind, out of range, empty, non-ASCII digits, control characters -> an aotpack error naming
  the option or variable (``locate="value"``);
- a path that is missing where one must exist, a file where a folder must be (or the reverse), a FIFO, a device,
  a dangling link, a place this user cannot write -> an aotpack error naming the path (``locate="file"``);
- a link inside a folder aotpack maintains -> the link goes, never what it points at (``valid``, sentinels
  checked);
- a recorded program that fails in any way -> aotpack's RecordError with the program's status, the recipe as it
  was, what was captured in ``<out>.partial.yaml``.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, cast

import yaml

from aotpack.pipeline.cache import MARKER, MARKER_TEXT

from .generator import (
    BASES,
    MANY,
    SHADOWED,
    Case,
    Expect,
    Special,
    _json_set,
    _json_walk,
    base_files,
    recipe_surface,
)

# ---------------------------------------------------------------- values of each kind

# sizes (cache bounds): valid spellings, then bad ones by kind
SIZES_VALID = {"zero": "0", "bytes": "1048576", "mega": "500M", "giga": "10G"}
SIZES_OPEN = {"lower-unit": "10g", "unit-b": "10GB", "fraction": "1.5G"}  # spellings the rule may take or not
SIZES_BAD = {
    "negative": "-1", "nan": "nan", "inf": "inf", "unknown-unit": "10Q", "inner-space": "10 G", "empty": "",
    "non-ascii-digits": "\u00b2", "arabic-digits": "\u0663", "huge-digits": "9" * 5000, "hex": "0x10",
    "overflow": "1e400", "control": "10G\x07", "words": "lots", "huge-value": "99999999999T",
}  # fmt: skip
COUNTS_BAD = {
    "zero": "0", "negative": "-1", "words": "many", "float": "1.5", "empty": "", "non-ascii-digits": "\u00b2",
    "huge-digits": "9" * 5000, "huge": str(10**18), "control": "2\x07",
}  # fmt: skip

VICTIM = "victim"  # outside/victim: what links inside a cache point at; it must survive every cache command


def outside_victims(outside: Path) -> None:
    """Folders and files outside every case that a case's links point at (the runner snapshots them)."""
    victim = outside / VICTIM
    for rel in ("sub/entry.pickle", "x.pickle", "build.json", "a.whl", ".aotpack-toolchain.json", "ab/key.pickle"):
        (victim / rel).parent.mkdir(parents=True, exist_ok=True)
        (victim / rel).write_text('{"version": "3.6.0", "bytes": 10}' if rel.endswith(".json") else "keep me\n")
    (outside / "victim-file").write_text("keep me\n")


def _case(surface: str, key: str, mutation: str, argv: tuple[str, ...], files: Mapping[str, bytes | Special],
          expect: Expect = "invalid", **kw: Any) -> Case:  # fmt: skip
    return Case(id=f"{surface}/{key}/{mutation}", surface=surface, base=surface, key=key, mutation=mutation,
                make_files=lambda: dict(files), expect=expect, command="cli", argv=argv, target="",
                **{"locate": "file", "budget": 1.0, **kw})  # fmt: skip


# ---------------------------------------------------------------- aotpack cache

CACHE = "cache"
CACHE_FILES: dict[str, bytes | Special] = {
    f"{CACHE}/variants/ab/ab12.pickle": b"not a pickle, still an entry\n",
    f"{CACHE}/variants/cd/cd34.pickle": b"x" * 4096,
    f"{CACHE}/wheels/k1/small-0.1-cp39-abi3-manylinux_2_28_x86_64.whl": b"PK" + b"\0" * 1000,
    f"{CACHE}/wheels/k1/build.json": b'{"wheel": "small-0.1-cp39-abi3-manylinux_2_28_x86_64.whl"}',
    f"{CACHE}/toolchains/triton-3.6.0/.aotpack-toolchain.json": b'{"version": "3.6.0", "bytes": 2048}',
    f"{CACHE}/toolchains/triton-3.6.0/triton/__init__.py": b"x" * 2048,
    f"{CACHE}/size.json": b'{"bytes": 9000, "counted": 0}',
    f"{CACHE}/{MARKER}": MARKER_TEXT.encode(),
}
KEY = "ab" * 32  # a sha256, as the cache names entries
# folders aotpack did not make, given as the cache: trimming or clearing one must change nothing in it
FOREIGN: dict[str, dict[str, bytes | Special]] = {
    "wheelhouse": {f"{CACHE}/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl": b"PK keep me",
                   f"{CACHE}/wheels/mine-1.0-py3-none-any.whl": b"PK keep me",
                   f"{CACHE}/variants/ab/{KEY}.pickle": b"keep me", f"{CACHE}/link": Special("symlink", "wheels")},
    "another-tool-s-tag": {f"{CACHE}/{MARKER}": b"Signature: 8a477f597d28d172789f06886806bc55\n# cargo\n",
                           f"{CACHE}/variants/ab/{KEY}.pickle": b"keep me"},
    "old-layout-and-a-stranger": {f"{CACHE}/variants/ab/{KEY}.pickle": b"old", f"{CACHE}/notes.txt": b"keep me"},
    "old-layout-bad-key": {f"{CACHE}/variants/ab/ab12.pickle": b"keep me"},
    "old-layout-link": {f"{CACHE}/variants/ab/{KEY}.pickle": b"old", f"{CACHE}/wheels": Special("symlink", "@outside/victim")},
    "home-like": {f"{CACHE}/.bashrc": b"keep me", f"{CACHE}/Documents/thesis.tex": b"keep me"},
}  # fmt: skip
# a cache an aotpack before the marker made: its own layout only, adopted (marked, then trimmed)
OLD_CACHE = {f"{CACHE}/variants/ab/{KEY}.pickle": b"old", f"{CACHE}/wheels/{KEY}/build.json": b'{"wheel": "w.whl"}',
             f"{CACHE}/wheels/{KEY}/w.whl": b"PK", f"{CACHE}/size.json": b"{}"}  # fmt: skip
# every place inside the cache a link can sit, and where it points (outside, so a deletion there is seen)
CACHE_LINKS = {
    "variants": "@outside/victim", "variants/ab": "@outside/victim/ab", "variants/ab/ab12.pickle":
    "@outside/victim/x.pickle", "wheels": "@outside/victim", "wheels/k1": "@outside/victim",
    "wheels/k1/build.json": "@outside/victim/build.json", "toolchains": "@outside/victim",
    "toolchains/triton-3.6.0": "@outside/victim", "toolchains/triton-3.6.0/.aotpack-toolchain.json":
    "@outside/victim/.aotpack-toolchain.json", "size.json": "@outside/victim-file",
}  # fmt: skip


def _with_link(rel: str, target: str) -> dict[str, bytes | Special]:
    files = {k: v for k, v in CACHE_FILES.items() if not (k == f"{CACHE}/{rel}" or k.startswith(f"{CACHE}/{rel}/"))}
    files[f"{CACHE}/{rel}"] = Special("symlink", target=target)
    return files


def cache_surface() -> Iterator[Case]:
    cmds = {"list": (), "trim": ("--trim", "0"), "clear": ("--clear",)}
    for name, extra in cmds.items():
        argv = ("cache", "--cache-dir", "cache", *extra)
        yield _case("cache", f"command.{name}", "base", argv, CACHE_FILES, "valid", reason="the base cache",
                    may_write=(CACHE,))  # fmt: skip
        for rel, target in CACHE_LINKS.items():
            yield _case("cache", f"link.{rel}", f"{name}:symlink-outside", argv, _with_link(rel, target), "valid",
                        reason="a link inside the cache: the link may go, never what it points at",
                        may_write=(CACHE,))  # fmt: skip
            yield _case("cache", f"link.{rel}", f"{name}:symlink-dangling", argv,
                        _with_link(rel, "@outside/no-such"), "valid", reason="a dangling link inside the cache",
                        may_write=(CACHE,))  # fmt: skip
        yield _case("cache", "root", f"{name}:root-symlink", ("cache", "--cache-dir", "link", *extra),
                    {**CACHE_FILES, "link": Special("symlink", target="cache")}, "valid",
                    reason="the cache folder itself may be a link the user made", may_write=(CACHE, "link"))  # fmt: skip
        for mutation, files, where in (
            ("a-file", {"cache": b"a file\n"}, "cache"), ("dev-null", {}, "/dev/null"),
            ("fifo", {"cache": Special("fifo")}, "cache"), ("dangling", {"cache": Special("symlink", "@outside/nope")},
            "cache"), ("under-a-file", {"f": b"x"}, "f/cache"), ("empty-path", {}, ""),
        ):  # fmt: skip
            yield _case("cache", "cache-dir", f"{name}:{mutation}", ("cache", "--cache-dir", where, *extra), files,
                        names=("--cache-dir",))  # fmt: skip
        for mutation, foreign in FOREIGN.items():
            yield _case("cache", "foreign", f"{name}:{mutation}", argv, foreign, "valid" if name == "list" else "invalid",
                        reason="a folder aotpack did not make: listed, never trimmed or cleared",
                        names=("--cache-dir",))  # fmt: skip
        yield _case("cache", "foreign", f"{name}:old-layout", argv, OLD_CACHE, "valid", may_write=(CACHE,),
                    reason="a cache an older aotpack made, of its layout only: adopted")  # fmt: skip
        yield _case("cache", "cache-dir", f"{name}:missing", ("cache", "--cache-dir", "nothing-here", *extra), {},
                    "valid", reason="no cache yet: an empty one", may_write=("nothing-here",))  # fmt: skip
        yield _case("cache", "cache-dir", f"{name}:unwritable", argv, {**CACHE_FILES, CACHE: Special("readonly")},
                    "valid" if name == "list" else "invalid", reason="listing reads only", needs="non-root",
                    locate="file")  # fmt: skip
        for env_name, value in (("XDG_CACHE_HOME", "{case}/xdg"), ("XDG_CACHE_HOME", "relative"),
                                ("XDG_CACHE_HOME", "/dev/null"), ("HOME", "{case}/nohome")):  # fmt: skip
            files = {"xdg": b"a file where a folder must be\n"} if value.endswith("xdg") else {}
            expect: Expect = "either" if value in ("relative", "{case}/nohome") else "invalid"
            yield _case("cache", f"env.{env_name}", f"{name}:{value.split('/')[-1]}", ("cache", *extra),
                        files, expect, reason="a relative cache folder, or none yet",
                        env=(("XDG_CACHE_HOME", ""), (env_name, value)) if env_name == "HOME" else ((env_name, value),),
                        may_write=("relative", "nohome"))  # fmt: skip
    for kind, values, expect in (("valid", SIZES_VALID, "valid"), ("open", SIZES_OPEN, "either"),
                                 ("bad", SIZES_BAD, "invalid")):  # fmt: skip
        for mutation, value in values.items():
            yield _case("cache", "trim", f"{kind}:{mutation}", ("cache", "--cache-dir", "cache", "--trim", value),
                        CACHE_FILES, expect, reason=f"a size written {mutation}", locate="value", names=("--trim",),
                        may_write=(CACHE,))  # fmt: skip
            for cmd, extra in (("list", ()), ("trim", ("--trim", "1G"))):
                yield _case("cache", "env.AOTPACK_CACHE_SIZE", f"{cmd}:{kind}:{mutation}",
                            ("cache", "--cache-dir", "cache", *extra), CACHE_FILES, expect,
                            reason=f"a size written {mutation}", locate="value", names=("AOTPACK_CACHE_SIZE",),
                            env=(("AOTPACK_CACHE_SIZE", value or " "),), may_write=(CACHE,))  # fmt: skip
    yield _case("cache", "options", "clear-and-trim", ("cache", "--clear", "--trim", "1G"), {}, locate="any")
    yield _case("cache", "inject", "trim:full-disk", ("cache", "--cache-dir", "cache", "--trim", "0"), CACHE_FILES,
                "either", reason="size.json cannot be written: counted again next time", inject="full-disk",
                may_write=(CACHE,))  # fmt: skip


# ---------------------------------------------------------------- aotpack inspect

MANIFEST: dict[str, Any] = {  # what `inspect` renders, as aotpack writes it
    "package": "small_kernels", "version": "0.2.0", "aotpack": "0.9.0", "min_driver_cuda": {"sm_90a": "12.2"},
    "toolchain": {"triton": "3.9.0"}, "sources": {"recipe.yaml": "ab" * 32},
    "kernels": {"add": {"source": "kernels/add.py:add_kernel", "types": {"T": ["fp32"]}, "key": [["n", "i32"]],
                        "bucket": "pow2", "variants": [{"target": "sm_90a"}], "pruned": [{"id": "v", "reason": "r"}],
                        "dispatch": [], "specializations": [{"name": "DDDD", "assumes": {"x": "D"}}]}},
}  # fmt: skip
WHEEL = "small_kernels-0.2.0-cp39-abi3-manylinux_2_28_x86_64.whl"


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _manifest(doc: Any = None, raw: bytes | None = None) -> bytes:
    return _zip({"small_kernels/manifest.json": raw if raw is not None else json.dumps(doc).encode(),
                 "small_kernels/__init__.py": b""})  # fmt: skip


def _patched(data: bytes, find: bytes, new: bytes, count: int = 1) -> bytes:
    return data.replace(find, new, count)


def inspect_surface() -> Iterator[Case]:
    good = _manifest(MANIFEST)
    for flag in ((), ("--json",)):
        name = "json" if flag else "table"

        def case(key: str, mutation: str, files: dict[str, bytes | Special], expect: Expect = "invalid",
                 target: str = WHEEL, name: str = name, flag: tuple[str, ...] = flag, **kw: Any) -> Case:  # fmt: skip
            return _case("inspect", key, f"{name}:{mutation}", ("inspect", target, *flag), files, expect, **kw)

        yield case("wheel", "base", {WHEEL: good}, "valid", reason="a manifest as aotpack writes it")
        for mutation, data in (("missing", None), ("directory", Special("dir")), ("fifo", Special("fifo")),
                               ("dangling", Special("symlink", "@outside/nope")), ("empty", b""),
                               ("random", bytes(range(256)) * 64), ("unreadable", Special("unreadable", data=good)),
                               ("sparse-huge", Special("sparse", size=8 << 30))):  # fmt: skip
            files = {} if data is None else {WHEEL: data}
            yield case("wheel", f"file:{mutation}", files, needs="non-root" if mutation == "unreadable" else "")
        for device in ("/dev/zero", "/dev/urandom", "/dev/null"):
            yield case("wheel", f"device:{device[5:]}", {}, target=device)
            yield case("wheel", f"link-to-device:{device[5:]}", {WHEEL: Special("symlink", device)})
        yield case("wheel", "link-outside", {WHEEL: Special("symlink", "@outside/victim-file")})
        yield case("member", "no-manifest", {WHEEL: _zip({"small_kernels/__init__.py": b""})})
        yield case("member", "not-json", {WHEEL: _manifest(raw=b"{nope")})
        yield case("member", "non-utf8", {WHEEL: _manifest(raw=b'{"package": "caf\xe9"}')})
        yield case("member", "not-an-object", {WHEEL: _manifest([1, 2])})
        yield case("member", "deep", {WHEEL: _manifest(raw=b"[" * 100_000 + b"]" * 100_000)})
        yield case("member", "huge-int", {WHEEL: _manifest(raw=b'{"version": ' + b"9" * 5000 + b"}")})
        yield case("member", "zip-bomb", {WHEEL: _manifest(raw=b"{" + b" " * (300 << 20) + b"}")})
        yield case("member", "stored-huge", {WHEEL: _zip({"small_kernels/manifest.json": b" " * (80 << 20)},
                                                         zipfile.ZIP_STORED)}, budget=3.0)  # fmt: skip
        enc = bytearray(good)  # the general-purpose flag's bit 0 (encrypted), in both headers of the first member
        enc[6] |= 1
        central = enc.find(b"PK\x01\x02")
        enc[central + 8] |= 1
        yield case("member", "encrypted", {WHEEL: bytes(enc)})
        unknown = bytearray(good)  # compression method 99 (AE-x): not one zipfile reads
        unknown[8:10] = (99).to_bytes(2, "little")
        unknown[central + 10 : central + 12] = (99).to_bytes(2, "little")
        yield case("member", "unknown-compression", {WHEEL: bytes(unknown)})
        crc = bytearray(good)  # the CRC in both headers, wrong
        crc[14] ^= 0xFF
        crc[central + 16] ^= 0xFF
        yield case("member", "bad-crc", {WHEEL: bytes(crc)})
        yield case("member", "truncated", {WHEEL: good[: len(good) // 2]})
        for path, value in _json_walk(MANIFEST):
            dotted = ".".join(str(p) for p in path)
            for tag, new in (("type:int", 7), ("type:str", "zz"), ("type:list", ["zz"]), ("type:null", None),
                             ("type:map", {"zz": 1}), ("huge:string", "z" * 100_000)):  # fmt: skip
                if json.dumps(new) != json.dumps(value):
                    retyped = not flag and new is not None and type(new) is not type(value)
                    yield case(f"manifest.{dotted}", tag, {WHEEL: _manifest(_json_set(MANIFEST, path, new))},
                               "invalid" if retyped else "either", names=(dotted.split(".")[-1],),
                               reason="a field of another type is refused naming it (--json shows what is there)")  # fmt: skip
        for field in ("package", "version", "aotpack"):  # controls and escape sequences: shown escaped, never run
            yield case(f"manifest.{field}", "escapes", {WHEEL: _manifest({**MANIFEST, field: "x\x1b[2J\x1b]0;t\x07\u202e"})},
                       "valid", reason="terminal controls in a manifest are printed escaped")  # fmt: skip
        twice = io.BytesIO()
        with warnings.catch_warnings(), zipfile.ZipFile(twice, "w") as zf:  # pip and zipfile take the last of two
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
            zf.writestr("small_kernels/manifest.json", json.dumps(MANIFEST))
            zf.writestr("small_kernels/manifest.json", json.dumps({**MANIFEST, "package": "other"}))
        yield case("member", "duplicate-manifest", {WHEEL: twice.getvalue()})


# ---------------------------------------------------------------- aotpack new

NAMES_BAD = {
    "empty": "", "newline": "foo\n", "tab": "foo\tbar", "escape": "foo\x1b[2J", "upper-dash": "Foo-Bar",
    "digit-first": "1abc", "keyword": "import", "dunder-init": "__init__", "long": "a" * 200, "non-ascii": "caf\u00e9",
    "space": "foo bar", "dotdot": "../x", "slash": "x/y", "dot": "a.b", "line-separator": "foo\u2028",
}  # fmt: skip


def new_surface() -> Iterator[Case]:
    yield _case("new", "name", "valid", ("new", "my_kernels"), {}, "valid", reason="a plain name",
                may_write=("my_kernels",))  # fmt: skip
    for mutation, name in NAMES_BAD.items():
        yield _case("new", "name", mutation, ("new", name), {}, locate="any")
    for name in SHADOWED:
        yield _case("new", "name", f"shadows-{name}", ("new", name), {}, locate="any")
    yield _case("new", "name", "fork-replaces", ("new", "triton", "--replaces", "triton"), {}, "valid",
                reason="a deliberate fork says what it replaces", may_write=("triton",))  # fmt: skip
    yield _case("new", "name", "fork-replaces-other", ("new", "triton", "--replaces", "torch"), {}, locate="any")
    for mutation, files, dest in (
        ("existing-file", {"d": b"mine\n"}, "d"), ("non-empty", {"d/mine.txt": b"mine\n"}, "d"),
        ("dangling", {"d": Special("symlink", "@outside/nope")}, "d"),
        ("link-outside", {"d": Special("symlink", "@outside/victim")}, "d"),
        ("link-empty-outside", {"d": Special("symlink", "@outside/empty")}, "d"),
        ("fifo", {"d": Special("fifo")}, "d"), ("under-a-file", {"f": b"x"}, "f/d"), ("empty-path", {}, ""),
        ("dev-null", {}, "/dev/null"), ("dev-full", {}, "/dev/full"),
    ):  # fmt: skip
        yield _case("new", "dir", mutation, ("new", "my_kernels", "--dir", dest), files, names=("--dir",))
    yield _case("new", "dir", "empty-folder", ("new", "my_kernels", "--dir", "d"), {"d": Special("dir")}, "valid",
                reason="an empty folder is a place to start", may_write=("d",))  # fmt: skip
    yield _case("new", "dir", "unwritable", ("new", "my_kernels", "--dir", "ro/d"), {"ro": Special("readonly")},
                needs="non-root")  # fmt: skip
    yield _case("new", "dir", "proc", ("new", "my_kernels", "--dir", "/proc/d"), {})
    yield _case("new", "inject", "full-disk", ("new", "my_kernels"), {}, inject="full-disk",
                may_write=("my_kernels",))  # fmt: skip


# ---------------------------------------------------------------- aotpack record

PROGRAMS: dict[str, tuple[str, Expect]] = {  # what a recorded program does, and whether it must be merged
    "exits-0": ("import sys\nsys.exit(0)\n", "valid"),
    "exits-3": ("import sys\nsys.exit(3)\n", "invalid"),
    "exits-5": ("import os\nos._exit(5)\n", "invalid"),
    "raises": ("raise RuntimeError('the program failed')\n", "invalid"),
    "segfaults": ("import ctypes\nctypes.string_at(0)\n", "invalid"),
    "kills-itself": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "invalid"),
    "terminates-itself": ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", "invalid"),
    "aborts": ("import os\nos.abort()\n", "invalid"),
}

EVENT = {  # one compilation of add_kernel, as the record agent reports it (a report's "compilations")
    "event": "compile", "number": 0, "arch": 90, "num_warps": 4, "num_stages": 3, "options": {},
    "function": {"module": "add", "qualname": "add_kernel", "name": "add_kernel", "identity": "f" * 16,
                 "source": "add.py", "params": [["x_ptr", False], ["y_ptr", False], ["out_ptr", False],
                                                ["n_elements", False], ["BLOCK", True]]},
    "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32", "BLOCK": "constexpr"},
    "constants": [[[4], 2048]], "attrs": [[[i], [["tt.divisibility", 16]]] for i in range(4)],
}  # fmt: skip


# written-out source names a hostile report gives with a text: only its text's hash (activate()'s name) is taken
PLANTED = {"absolute": "/tmp/aotpack-planted.py", "parent": "../../planted.py", "nested": "sub/planted.py",
           "hidden": ".planted.py", "not-its-hash": "0123456789abcdef.py", "control": "pl\x1b[2Janted.py",
           "empty": ""}  # fmt: skip


def _planted(name: str) -> dict[str, Any]:
    function: dict[str, Any] = {**cast(dict[str, Any], EVENT["function"]), "source": name}
    return {**EVENT, "function": function, "sources": {name: "import os\n"}}


def report(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"format": "aotpack-report/1", "package": "recorded_kernels", "class_misses": [],
                       "compilations": events}).encode()  # fmt: skip


def _package_of(case: Case) -> Any:
    """The package a case's recipe names (a report of another one is refused)."""
    text = case.files().get("recipe.yaml")
    try:
        data = yaml.safe_load(text) if isinstance(text, bytes) else None
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    return data.get("package") if isinstance(data, dict) else None


def _merge_budget(case: Case) -> float:
    """A merge reads and writes the recipe twice through ruamel.yaml's pure-Python round trip, linear in its items:
    measured 0.55 ms an item (a list of 20,000: 12 s; of 5,000: 4 s) on a 2-core host, twice what plan takes."""
    many = case.mutation.startswith("many")
    return 2 * case.budget + (MANY * 0.001 if many else 0.0)


def _with_report(case: Case) -> dict[str, bytes | Special]:
    return {**case.files(), "rep.json": report([EVENT])}


def record_surface() -> Iterator[Case]:
    recorded, _ = base_files(BASES["recorded"])
    kernel = {k: v for k, v in recorded.items() if k != "recipe.yaml"}
    prog = {"prog.py": b"print('ran')\n"}

    def case(key: str, mutation: str, argv: tuple[str, ...], files: dict[str, bytes | Special],
             expect: Expect = "invalid", **kw: Any) -> Case:  # fmt: skip
        return _case("record", key, mutation, ("record", *argv), files, expect, **{"budget": 1.0, **kw})

    for name, (text, expect) in PROGRAMS.items():
        files = {**recorded, "prog.py": text.encode()}
        reason = "a program that ends well, compiling nothing: nothing is written"
        # the existing recipe stays as it was whatever the program does; a failure keeps what it captured
        yield case("program", name, ("-o", "recipe.yaml", "--", "python", "prog.py"), files, expect, reason=reason,
                   locate="any", program="prog.py", may_write=("recipe.partial.yaml",))  # fmt: skip
    for mutation, argv in (("no-program", ("-o", "recipe.yaml")), ("missing-script", ("-o", "r.yaml", "--",
                           "python", "nope.py")), ("not-on-path", ("-o", "r.yaml", "--", "no-such-program-zz")),
                           ("not-executable", ("-o", "r.yaml", "--", "./prog.py")), ("a-folder", ("-o", "r.yaml",
                           "--", "./kernels"))):  # fmt: skip
        yield case("program", mutation, argv, {**recorded, **prog}, locate="any",
                   expect="either" if mutation == "no-program" else "invalid",
                   reason="no program: the reports alone, or a usage error", may_write=("r.partial.yaml",))  # fmt: skip
    outs: list[tuple[str, dict[str, bytes | Special], str]] = [
        ("a-folder", {"o": Special("dir")}, "o"), ("empty-path", {}, ""), ("dangling", {"o.yaml": Special(
        "symlink", "@outside/nope.yaml")}, "o.yaml"), ("link-outside", {"o.yaml": Special("symlink",
        "@outside/victim-file")}, "o.yaml"), ("fifo", {"o.yaml": Special("fifo")}, "o.yaml"), ("dev-null", {},
        "/dev/null"), ("dev-full", {}, "/dev/full"), ("under-a-file", {"f": b"x"}, "f/o.yaml"),
        ("binary", {"o.yaml": bytes(range(256))}, "o.yaml"),
    ]  # fmt: skip
    for mutation, changed, out in outs:
        argv = ("-o", out, "--report", "rep.json")
        yield case("out", mutation, argv, {**kernel, **changed, "rep.json": report([EVENT])}, names=("-o",))
    yield case("out", "unwritable", ("-o", "ro/o.yaml", "--report", "rep.json"),
               {**kernel, "ro": Special("readonly"), "rep.json": report([EVENT])}, needs="non-root",
               names=("-o",))  # fmt: skip
    yield case("out", "proc", ("-o", "/proc/o.yaml", "--report", "rep.json"), {**kernel, "rep.json": report([EVENT])})
    yield case("out", "full-disk", ("-o", "recipe.yaml", "--report", "rep.json"),
               {**recorded, "rep.json": report([EVENT])}, inject="full-disk")  # fmt: skip
    # the merge: the report's compilation merged into every recipe the recipe corpus makes of the recorded base
    # (twice the time plan may take: the loader reads it, then ruamel.yaml's round trip)
    for c in recipe_surface():
        if c.base != "recorded":
            continue
        other = c.key == "package" and c.expect != "invalid" and _package_of(c) != "recorded_kernels"  # (refused)
        expect, locate = ("invalid", "any") if other else (c.expect, c.locate)
        yield Case(id=f"record/merge/{c.id}", surface="record", base="recorded", key=c.key,
                   mutation=c.mutation, make_files=partial(_with_report, c), expect=expect,
                   reason="a report of another package than the recipe's is refused" if other else c.reason,
                   command="cli", argv=("record", "-o", "recipe.yaml", "--report", "rep.json"), target="",
                   line=c.line, locate=locate, budget=_merge_budget(c), may_write=("recipe.yaml",)
                   if expect != "invalid" else ())  # fmt: skip
    for mutation, rep in (
        ("not-json", b"{nope"), ("a-list", b"[1]"), ("non-utf8", b'{"format": "caf\xe9"}'),
        ("wrong-format", report([EVENT]).replace(b"aotpack-report/1", b"other/9")),
        ("events-not-list", report([]).replace(b'"compilations": []', b'"compilations": 7')),
        ("event-missing-keys", report([{"event": "compile"}])), ("event-wrong-types", report([{**EVENT, "arch": "x",
        "num_warps": [1], "constants": 5}])), ("huge", b'{"a": "' + b"z" * (80 << 20) + b'"}'),
        ("deep", b"[" * 100_000 + b"]" * 100_000),
        *((f"source-{kind}", report([_planted(name)])) for kind, name in PLANTED.items()),
        ("other-package", report([EVENT]).replace(b'"recorded_kernels"', b'"someone_elses"')),
    ):  # fmt: skip
        yield case("report", mutation, ("-o", "r.yaml", "--report", "rep.json"), {**kernel, "rep.json": rep},
                   "either" if mutation.startswith("event-") else "invalid", locate="any",
                   reason="a compilation it cannot read is skipped and said, or refused",
                   may_write=("r.yaml",) if mutation.startswith("event-") else ())  # fmt: skip
    reports: list[tuple[str, dict[str, bytes | Special]]] = [
        ("missing", {}), ("folder-empty", {"rep.json": Special("dir")}), ("fifo", {"rep.json": Special("fifo")}),
        ("dev-zero", {"rep.json": Special("symlink", "/dev/zero")})]  # fmt: skip
    for mutation, files in reports:
        yield case("report", f"file:{mutation}", ("-o", "r.yaml", "--report", "rep.json"), {**kernel, **files},
                   "either" if mutation == "folder-empty" else "invalid", reason="an empty folder of reports")  # fmt: skip
    for mutation, package in NAMES_BAD.items():
        yield case("package", mutation, ("-o", "r.yaml", "--package", package, "--report", "rep.json"),
                   {**kernel, "rep.json": report([EVENT])}, locate="value", names=("--package",))  # fmt: skip
    for mutation, widen in (("no-equals", "BLOCK"), ("empty", "BLOCK="), ("non-ascii", "BLOCK=\u00b2"),
                            ("huge-range", "BLOCK=1..99999999999"), ("pow2-zero", "BLOCK=0..8:pow2"),
                            ("huge-digits", "BLOCK=" + "9" * 5000), ("bad-name", "1x=2"), ("control", "BLOCK=1\x07"),
                            ("many", "BLOCK=" + ",".join(map(str, range(5000))))):  # fmt: skip
        yield case("widen", mutation, ("-o", "r.yaml", "--widen", widen, "--report", "rep.json"),
                   {**kernel, "rep.json": report([EVENT])}, "either" if mutation == "non-ascii" else "invalid",
                   locate="value", names=("--widen",), reason="'²' is text a constexpr may take", may_write=("r.yaml",))  # fmt: skip


# ---------------------------------------------------------------- the PEP 517 hooks' files

PYPROJECT = b'[project]\nname = "recorded_kernels"\nversion = "0.1.0"\n\n[tool.aotpack]\nrecipe = "recipe.yaml"\n'


def project_surface() -> Iterator[Case]:
    files, _ = base_files(BASES["recorded"])
    base = {**files, "pyproject.toml": PYPROJECT}

    def case(key: str, mutation: str, changed: dict[str, bytes | Special], expect: Expect = "invalid",
             **kw: Any) -> Case:  # fmt: skip
        kept = {k: v for k, v in base.items() if not any(k.startswith(f"{c}/") for c in changed)}  # a folder replaced
        return Case(id=f"project/{key}/{mutation}", surface="project", base="recorded", key=key, mutation=mutation,
                    make_files=lambda: {**kept, **changed}, expect=expect, command="pep517", target="pyproject.toml",
                    locate="file", budget=2.0, names=(key,), **kw)  # fmt: skip

    yield case("(all)", "base", {}, "valid", reason="the base project")
    for name in ("README.md", "LICENSE", "pyproject.toml"):
        target = "@outside/victim-file" if name != "pyproject.toml" else "@outside/pyproject.toml"
        yield case(name, "symlink-outside", {name: Special("symlink", target)})
        if name != "pyproject.toml":
            yield case(name, "symlink-inside", {name: Special("symlink", "kernels/add.py")}, "valid",
                       reason="a link inside the project")  # fmt: skip
            yield case(name, "symlink-dev-zero", {name: Special("symlink", "/dev/zero")})
            yield case(name, "fifo", {name: Special("fifo")})
            yield case(name, "directory", {name: Special("dir")})
            yield case(name, "unreadable", {name: Special("unreadable", data=b"x")}, needs="non-root")
    for mutation, recipe in (("parent", "../../outside/recipe.yaml"), ("absolute", "/etc/hostname"),
                             ("link-outside", "link.yaml")):  # fmt: skip
        text = PYPROJECT.replace(b"recipe.yaml", recipe.encode())
        yield case("recipe", mutation, {"pyproject.toml": text, "link.yaml": Special("symlink",
                   "@outside/recipe.yaml")})  # fmt: skip
    yield case("kernel", "symlink-outside", {"kernels/add.py": Special("symlink", "@outside/kernels/add.py")})
    yield case("kernel", "helper-symlink-outside", {"kernels/helper.py": Special("symlink", "@outside/victim-file")})
    yield case("kernel", "folder-symlink-outside", {"kernels": Special("symlink", "@outside/kernels")})
    yield from _project_table(case)


FULL_PROJECT = (  # every [project] key a kernel wheel takes (recipe/project.py)
    'description = "Recorded kernels"\nreadme = "README.md"\nlicense = "MIT"\nlicense-files = ["LICENSE"]\n'
    'requires-python = ">=3.10"\nauthors = [{name = "Ada", email = "ada@example.org"}]\nkeywords = ["gpu"]\n'
    'classifiers = ["Programming Language :: Python :: 3"]\ndependencies = ["numpy>=1.20"]\n'
    'optional-dependencies = {torch = ["torch>=2.4"]}\nurls = {Homepage = "https://example.org"}\n'
)


def _project_table(case: Callable[..., Case]) -> Iterator[Case]:
    """``[project]`` (PEP 621) of the project: each key given a value of another kind, a file outside the project
    or one that is not a regular file, or a fact that disagrees with the recipe."""

    def table(
        lines: str, version: str = 'version = "0.1.0"\n', name: str = "recorded_kernels"
    ) -> dict[str, bytes | Special]:
        text = f'[project]\nname = "{name}"\n{version}{lines}\n[tool.aotpack]\nrecipe = "recipe.yaml"\n'
        return {"pyproject.toml": text.encode(), "README.md": b"# Recorded\n", "LICENSE": b"MIT License\n"}

    yield case("project", "full", table(FULL_PROJECT), "valid", reason="every key a kernel wheel takes")
    yield case("project.version", "dynamic", table("", 'dynamic = ["version"]\n'), "valid",
               reason="the recipe's version")  # fmt: skip
    yield case("project.name", "another", table("", name="other_kernels"))
    yield case("project.authors", "header-injection", table('authors = [{name = "Ada\\nRequires-Dist: evil"}]\n'))
    yield case("project.urls", "control", table('urls = {Home = "https://example.org/\\u0007"}\n'))
    for key, mutation, lines, version in (
        ("project.version", "another", "", 'version = "9.9"\n'),
        ("project.version", "words", "", 'version = "latest"\n'),
        ("project.dynamic", "name", 'dynamic = ["name"]\n', ""),
        ("project.dynamic", "readme", 'dynamic = ["readme"]\n', 'version = "0.1.0"\n'),
        ("project.scripts", "given", 'scripts = {k = "k:main"}\n', 'version = "0.1.0"\n'),
        ("project.entry-points", "given", 'entry-points = {g = {k = "k:main"}}\n', 'version = "0.1.0"\n'),
        ("project.unknown", "key", "unknown = 1\n", 'version = "0.1.0"\n'),
        ("project.classifiers", "type:int", "classifiers = 1\n", 'version = "0.1.0"\n'),
        ("project.urls", "type:str", 'urls = "https://example.org"\n', 'version = "0.1.0"\n'),
        ("project.authors", "type:str", 'authors = "Ada"\n', 'version = "0.1.0"\n'),
        ("project.dependencies", "invalid", 'dependencies = ["numpy>>1"]\n', 'version = "0.1.0"\n'),
        ("project.license", "table", 'license = {text = "MIT"}\n', 'version = "0.1.0"\n'),
        ("project.license", "not-spdx", 'license = "MIT OR"\n', 'version = "0.1.0"\n'),
        ("project.requires-python", "invalid", 'requires-python = ">=three"\n', 'version = "0.1.0"\n'),
        ("project.description", "control", 'description = "a\\u0007b"\n', 'version = "0.1.0"\n'),
        ("project.readme", "outside", 'readme = "../outside/victim-file"\n', 'version = "0.1.0"\n'),
        ("project.readme", "absolute", 'readme = "/etc/hostname"\n', 'version = "0.1.0"\n'),
        ("project.readme", "missing", 'readme = "NOPE.md"\n', 'version = "0.1.0"\n'),
        ("project.readme", "unknown-type", 'readme = "LICENSE"\n', 'version = "0.1.0"\n'),
        ("project.license-files", "parent", 'license-files = ["../*"]\n', 'version = "0.1.0"\n'),
        ("project.license-files", "absolute", 'license-files = ["/etc/*"]\n', 'version = "0.1.0"\n'),
        ("project.license-files", "empty-pattern", 'license-files = [""]\n', 'version = "0.1.0"\n'),
    ):
        yield case(key, mutation, table(lines, version))
    for mutation, special in (("symlink-outside", Special("symlink", "@outside/victim-file")),
                              ("symlink-dev-zero", Special("symlink", "/dev/zero")), ("fifo", Special("fifo")),
                              ("directory", Special("dir")), ("non-utf8", b"caf\xe9\n"),
                              ("sparse-huge", Special("sparse", size=64 << 20))):  # fmt: skip
        files = {**table('readme = "NOTES.md"\n'), "NOTES.md": special}
        yield case("project.readme", f"file:{mutation}", files)
        files = {**table('license-files = ["COPYING*"]\n'), "COPYING": special}
        if mutation != "non-utf8":  # (a license file is bytes: shipped as it is)
            yield case("project.license-files", f"file:{mutation}", files)


# ---------------------------------------------------------------- environment variables aotpack reads

ENV_BAD = {"empty": "", "control": "x\x07", "non-utf8": "caf\udce9", "huge": "z" * 100_000, "dev-null": "/dev/null",
           "relative": "rel", "newline": "a\nb"}  # fmt: skip


def env_surface() -> Iterator[Case]:
    files, _ = base_files(BASES["triton"])
    for var in ("SOURCE_DATE_EPOCH",):
        for mutation, value in {**ENV_BAD, **COUNTS_BAD, "valid": "1700000000"}.items():
            if value == "" or mutation in ("dev-null", "relative"):
                continue
            expect: Expect = "valid" if mutation in ("valid", "zero") else "invalid"  # 0: the earliest a zip holds
            yield Case(id=f"env/{var}/{mutation}", surface="env", base="recorded", key=f"env.{var}",
                       mutation=mutation, make_files=lambda: {**base_files(BASES["recorded"])[0], "pyproject.toml":
                       PYPROJECT}, expect=expect, command="pep517", target="pyproject.toml", locate="value",
                       names=(var,), env=((var, value),), budget=2.0,
                       reason="a time a zip can hold (0: clamped to 1980)" if expect == "valid" else "")  # fmt: skip
    for var in ("AOTPACK_CACHE_SIZE", "XDG_CACHE_HOME", "HOME", "TMPDIR", "CUDA_HOME", "AOTPACK_WHEELHOUSE",
                "AOTPACK_TRITON", "AOTPACK_REPORT"):  # fmt: skip
        for mutation, value in ENV_BAD.items():
            open_ = var in ("TMPDIR", "AOTPACK_TRITON")  # read by any Python (tempfile), or by the build's child
            yield Case(id=f"env/{var}/plan:{mutation}", surface="env", base="triton", key=f"env.{var}",
                       mutation=mutation, make_files=lambda: files, expect="either" if open_ else "valid",
                       reason="plan reads no cache, toolkit or report: the variable does not matter", command="plan",
                       names=(var,), env=((var, value or " "),), budget=1.0)  # fmt: skip


# ---------------------------------------------------------------- standard output that cannot be written


def stdout_surface() -> Iterator[Case]:
    """Every command that prints, with standard output on a full device (/dev/full): aotpack's own error and exit
    code, never a traceback, never an exit 0 with its output lost."""
    recorded, _ = base_files(BASES["recorded"])
    commands = {
        "help": (("--help",), {}), "version": (("--version",), {}), "plan-help": (("plan", "--help"), {}),
        "cache": (("cache", "--cache-dir", CACHE), CACHE_FILES), "new": (("new", "my_kernels"), {}),
        "record-report": (("record", "-o", "recipe.yaml", "--report", "rep.json"),
                          {**recorded, "rep.json": report([EVENT])}),
    }  # fmt: skip
    for key, (argv, files) in commands.items():
        yield _case("stdout", key, "stdout-full", argv, files, inject="stdout-full", locate="any",
                    may_write=("my_kernels", "recipe.yaml", "kernels"))  # fmt: skip


# ---------------------------------------------------------------- the recorded caches a recipe names


_SET_DATA = b"torch's pickled artifacts"
_SET = hashlib.sha256(_SET_DATA).hexdigest()
_SET_META = b'{"torch": "2.11.0+cu130", "job_id": "aotpack", "settings": {"cpp.cxx": "(None, \'g++\')"}}'
_KEY = "A" * 52  # a Triton cache key as its folder is named
_ENTRY_META = b'{"triton_version": "3.6.0", "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}'
CACHES_RECIPE = (b"package: recorded_kernels\nversion: 0.1.0\ntriton_cache: triton-cache\n"
                 b"inductor_cache: inductor-cache\ntargets: [sm_90]\nkernels: {}\n")  # fmt: skip


def caches_surface() -> Iterator[Case]:
    """A recording's folders (``triton_cache:``, line 3; ``inductor_cache:``, line 4) as a recipe names them:
    anything but what aotpack record writes there is a located error, read in bounded time, nothing outside read."""
    base: dict[str, bytes | Special] = {
        "recipe.yaml": CACHES_RECIPE, f"inductor-cache/{_SET}.bin": _SET_DATA, f"inductor-cache/{_SET}.json": _SET_META,
        f"triton-cache/{_KEY}/k.json": _ENTRY_META, f"triton-cache/{_KEY}/k.cubin": b"\x7fELF",
    }  # fmt: skip

    def case(key: str, mutation: str, changed: dict[str, bytes | Special | None], expect: Expect = "invalid",
             **kw: Any) -> Case:  # fmt: skip
        kept = {k: v for k, v in base.items() if k not in changed and not any(k.startswith(f"{c}/") for c in changed)}
        files = {**kept, **{k: v for k, v in changed.items() if v is not None}}
        line = 3 if key.startswith("triton") else 4
        return Case(id=f"caches/{key}/{mutation}", surface="caches", base="recorded", key=key, mutation=mutation,
                    make_files=lambda: files, expect=expect, line=line, budget=2.0, **kw)  # fmt: skip

    yield case("(all)", "base", {}, "valid", reason="a recording's two folders")
    i, t = "inductor-cache", "triton-cache"
    for key, folder in (("inductor_cache", i), ("triton_cache", t)):
        text = CACHES_RECIPE.decode()
        for mutation, value in (("parent", ".."), ("absolute", "/etc"), ("missing", "nowhere"),
                                ("a-file", "recipe.yaml"), ("nul", '"a\\0b"'), ("huge", "x" * 5000)):  # fmt: skip
            yield case(key, mutation, {"recipe.yaml": text.replace(f"{key}: {folder}", f"{key}: {value}").encode()})
        yield case(key, "symlink-outside", {folder: Special("symlink", "@outside/pointed")})
        yield case(key, "fifo", {folder: Special("fifo")})
        yield case(key, "unreadable", {folder: Special("unreadable")}, needs="non-root")
    bin_, meta = f"{i}/{_SET}.bin", f"{i}/{_SET}.json"
    sets: dict[str, dict[str, bytes | Special | None]] = {
        "bin-changed": {bin_: b"other bytes"}, "bin-missing": {bin_: None}, "json-missing": {meta: None},
        "json-not-json": {meta: b"{"}, "json-list": {meta: b"[]"}, "json-huge": {meta: b" " * 70_000 + b"{}"},
        "json-torch-int": {meta: b'{"torch": 2}'}, "json-job-list": {meta: b'{"torch": "2", "job_id": []}'},
        "json-settings-null": {meta: b'{"torch": "2", "settings": {"cpp.cxx": null}}'},
        "json-deep": {meta: b"[" * 100_000 + b"]" * 100_000}, "json-non-utf8": {meta: b'{"torch": "\xff"}'},
        "foreign-file": {f"{i}/notes.txt": b"x"}, "subfolder": {f"{i}/{'b' * 64}.bin": Special("dir")},
        "bin-fifo": {bin_: Special("fifo")}, "bin-symlink-outside": {bin_: Special("symlink", "@outside/victim-file")},
        "bin-dev-zero": {bin_: Special("symlink", "/dev/zero")},
        "bin-sparse-huge": {bin_: Special("sparse", size=2 << 30)},
        "bin-unreadable": {bin_: Special("unreadable", data=_SET_DATA)},
        "upper-case-digest": {f"{i}/{_SET.upper()}.bin": _SET_DATA, f"{i}/{_SET.upper()}.json": _SET_META, bin_: None,
                              meta: None},
        "many-files": {f"{i}/{n:064x}.json": b"{}" for n in range(600)},
    }  # fmt: skip
    for mutation, changed in sets.items():
        yield case("inductor_cache.set", mutation, changed, needs="non-root" if "unreadable" in mutation else "")
    entry = f"{t}/{_KEY}"
    entries: dict[str, dict[str, bytes | Special | None]] = {
        "entry-not-a-key": {f"{t}/notakey/k.json": _ENTRY_META}, "entry-empty": {entry: Special("dir")},
        "entry-a-file": {entry: b"x"}, "entry-symlink-outside": {entry: Special("symlink", "@outside/pointed")},
        "metadata-not-json": {f"{entry}/k.json": b"{"}, "metadata-list": {f"{entry}/k.json": b"[]"},
        "metadata-huge": {f"{entry}/k.json": b" " * (2 << 20) + b"{}"},
        "file-fifo": {f"{entry}/k.cubin": Special("fifo")},
        "file-symlink-outside": {f"{entry}/k.cubin": Special("symlink", "@outside/victim-file")},
        "file-bad-name": {f"{entry}/a b": b"x"}, "two-kernels": {f"{entry}/j.json": _ENTRY_META},
        "file-sparse-huge": {f"{entry}/k.cubin": Special("sparse", size=3 << 30)},
    }  # fmt: skip
    for mutation, changed in entries.items():
        yield case("triton_cache.entry", mutation, changed)


SURFACES = {"cache": cache_surface, "inspect": inspect_surface, "new": new_surface, "record": record_surface,
            "project": project_surface, "env": env_surface, "stdout": stdout_surface,
            "caches": caches_surface}  # fmt: skip
