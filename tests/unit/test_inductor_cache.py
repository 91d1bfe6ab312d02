"""torch.compile's caches, recorded and served (runtime/_aotpack_inductor.py, recipe/inductor_cache.py): a set is
read only when its files are what aotpack record wrote, and activate() loads it into torch only where the torch
and the Inductor settings of its cache key are the recording's, warning otherwise."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import types
import typing
import warnings
import zlib
from pathlib import Path

import pytest

from aotpack.runtime import _aotpack_folders
from aotpack.runtime import _aotpack_inductor as inductor

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

RECIPE = "package: graphs_kernels\nversion: 0.1.0\ninductor_cache: {folder}\ntargets: [sm_90]\nkernels: {{}}\n"
META = {"torch": "2.11.0+cu130", "job_id": "aotpack", "settings": {"cpp.cxx": "(None, 'g++')",
        "bundle_triton_into_fx_graph_cache": "True"}}  # fmt: skip


def linked(source, link):
    """A hard link ``link`` to ``source`` (a value, for the cases' lambdas)."""
    os.link(source, link)
    return link


def write_set(folder, data=b"graphs", meta=None):
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()
    (folder / f"{digest}.bin").write_bytes(data)
    (folder / f"{digest}.json").write_text(json.dumps(META if meta is None else meta))
    return digest


def read_recipe(root, folder="inductor-cache"):
    from aotpack.backends import recipes

    return recipes.parse(RECIPE.format(folder=folder), root / "r.yaml")


def test_a_recipe_of_recorded_caches_alone_reads_each_set_by_digest(tmp_path):
    digests = sorted(write_set(tmp_path / "inductor-cache", data) for data in (b"one", b"two"))
    read = read_recipe(tmp_path)
    assert [(s.digest, s.torch, s.size, s.files) for s in read.inductor_cache] == [
        (d, "2.11.0+cu130", 3, (f"{d}.bin", f"{d}.json")) for d in digests
    ]


def _digest_of(t):
    return next(t.glob("inductor-cache/*.bin")).stem


@pytest.mark.parametrize(
    ("make", "folder", "message"),
    [
        (lambda t: (t / "x").mkdir(), "..", "is outside the recipe's folder"),
        (lambda t: None, "inductor-cache", "no folder 'inductor-cache' beside the recipe"),
        (lambda t: (write_set(t / "inductor-cache"), (t / "inductor-cache" / "notes.txt").write_text("")),
         "inductor-cache", "not a file of torch.compile's recorded caches"),
        (lambda t: (write_set(t / "inductor-cache"), (t / "inductor-cache" / f"{_digest_of(t)}.json").unlink()),
         "inductor-cache", r"\.json is missing"),
        (lambda t: (write_set(t / "inductor-cache"), (t / "inductor-cache" / f"{_digest_of(t)}.bin").write_bytes(b"x")),
         "inductor-cache", "its bytes are not the ones recorded"),
        (lambda t: write_set(t / "inductor-cache", meta=["not", "a", "table"]), "inductor-cache",
         "not aotpack record's description"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "job_id": 3}), "inductor-cache", "'job_id' is not"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "torch": "2.11\x1b[2J"}), "inductor-cache",
         r"'torch' is not a release of torch: '2.11\\x1b\[2J'"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "settings": {"cpp.cxx": None}}), "inductor-cache",
         "'settings' is not a table of strings"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "cpp_kernels": -1}), "inductor-cache",
         "'cpp_kernels' is not a count"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "cpp_kernels": True}), "inductor-cache",
         "'cpp_kernels' is not a count"),
        (lambda t: ((t / "elsewhere").mkdir(), (t / "inductor-cache").mkdir(),
                    (t / "inductor-cache" / f"{'a' * 64}.bin").symlink_to(t / "elsewhere")),
         "inductor-cache", "not a file of torch.compile's recorded caches"),
        (lambda t: ((t / "secret").write_bytes(b"host"), (t / "inductor-cache").mkdir(),
                    linked(t / "secret", t / "inductor-cache" / f"{'a' * 64}.cpp")),
         "inductor-cache", "no link or hard link"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}),
         "inductor-cache", "nests deeper than 32 levels"),
    ],
)  # fmt: skip
def test_an_inductor_cache_folder_that_is_not_one_is_a_located_error(tmp_path, make, folder, message):
    from aotpack.errors import RecipeError

    (tmp_path / "in").mkdir()
    make(tmp_path / "in")
    with pytest.raises(RecipeError, match=message) as caught:
        read_recipe(tmp_path / "in", folder)
    assert "r.yaml:3" in str(caught.value)


class FakeTorch(types.ModuleType):
    """torch as _aotpack_inductor sees it: its version, job id, Inductor's settings and the mega-cache API."""

    def __init__(self, version="2.11.0+cu130", cxx=(None, "g++")):
        super().__init__("torch")
        self.__version__ = version
        self.loaded: list[bytes] = []
        cpp = types.SimpleNamespace(cxx=cxx)
        self._inductor = types.SimpleNamespace(
            config=types.SimpleNamespace(cpp=cpp, bundle_triton_into_fx_graph_cache=True)
        )
        self.compiler = types.SimpleNamespace(config=types.SimpleNamespace(job_id=None), load_cache_artifacts=self._load,
                                              save_cache_artifacts=lambda: (b"saved graphs", None))  # fmt: skip

    def _load(self, data):
        self.loaded.append(data)
        return object()


def install_fake_torch(monkeypatch, tmp_path, **kw):
    """A FakeTorch as ``torch`` for this test, Inductor's default cache folder in ``tmp_path`` (none named), and
    the runtime's state fresh."""
    torch = FakeTorch(**kw)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.compiler", torch.compiler)
    monkeypatch.setitem(sys.modules, "torch._inductor.config", torch._inductor.config)
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils",
                        types.SimpleNamespace(default_cache_dir=lambda: str(tmp_path / "torchinductor_me")))  # fmt: skip
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    monkeypatch.setattr(_aotpack_folders, "_state", _aotpack_folders._Folders())
    return torch


@pytest.fixture
def fake_torch(monkeypatch, tmp_path):
    def make(**kw):
        return install_fake_torch(monkeypatch, tmp_path, **kw)

    return make


def test_a_recorded_set_is_loaded_once_per_process_under_the_recorded_job_id(fake_torch, tmp_path):
    torch = fake_torch()
    write_set(tmp_path, b"graphs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inductor.serve(str(tmp_path)) == []
        assert inductor.serve(str(tmp_path)) == []
    assert torch.loaded == [b"graphs"]
    assert torch.compiler.config.job_id == "aotpack"


def test_a_job_id_the_program_set_is_kept(fake_torch, tmp_path):
    torch = fake_torch()
    torch.compiler.config.job_id = "mine"
    write_set(tmp_path)
    inductor.serve(str(tmp_path))
    assert torch.compiler.config.job_id == "mine" and torch.loaded == [b"graphs"]


@pytest.mark.parametrize(
    ("torch_kw", "data", "meta", "why"),
    [
        ({"version": "2.12.0+cu130"}, b"graphs", None, "recorded with torch 2.11.0+cu130, this is torch 2.12.0"),
        ({"cxx": (None, "/opt/bin/g++")}, b"graphs", None, "cpp.cxx was (None, 'g++') when recorded and is"),
        ({}, b"graphs", "{", "unreadable"),
    ],
)  # fmt: skip
def test_a_set_of_another_torch_or_other_settings_is_warned_about_and_not_loaded(fake_torch, tmp_path, monkeypatch,
                                                                                 torch_kw, data, meta, why):  # fmt: skip
    monkeypatch.setenv("CXX", "/opt/bin/g++")  # (the program names its compiler: a recorded one is not taken)
    torch = fake_torch(**torch_kw)
    digest = write_set(tmp_path, data)
    if meta is not None:
        (tmp_path / f"{digest}.json").write_text(meta)
    with pytest.warns(RuntimeWarning, match=re.escape(why)):
        skipped = inductor.serve(str(tmp_path))
    assert len(skipped) == 1 and torch.loaded == [] and torch.compiler.config.job_id is None


def test_a_recorded_compiler_the_environment_does_not_name_here_is_taken_and_given_back(fake_torch, tmp_path,
                                                                                         monkeypatch):  # fmt: skip
    # recorded where CXX named a compiler (an image's /opt/gcc/bin/g++), served where it is unset (no compiler at
    # all): Inductor's key would differ in cpp.cxx alone, and every recorded graph go unfound
    monkeypatch.delenv("CXX", raising=False)
    torch = fake_torch(cxx=(None, "g++"))
    config = torch._inductor.config
    write_set(tmp_path / "a", b"graphs", meta={**META, "settings": {"cpp.cxx": "(None, '/opt/gcc/bin/g++')"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inductor.serve(str(tmp_path / "a")) == []
    assert torch.loaded == [b"graphs"] and config.cpp.cxx == (None, "/opt/gcc/bin/g++")
    # another set that recorded another compiler cannot also be found: said, not loaded, the first's value kept
    write_set(tmp_path / "b", b"other graphs", meta={**META, "settings": {"cpp.cxx": "(None, 'clang++')"}})
    with pytest.warns(RuntimeWarning, match=re.escape("cpp.cxx was (None, 'clang++') when recorded")):
        assert len(inductor.serve(str(tmp_path / "b"))) == 1
    assert torch.loaded == [b"graphs"] and config.cpp.cxx == (None, "/opt/gcc/bin/g++")
    inductor.reset()  # deactivate(): the process's own value back
    assert config.cpp.cxx == (None, "g++")
    inductor.serve(str(tmp_path / "a"))  # activated again: loaded already, its value taken again
    assert torch.loaded == [b"graphs"] and config.cpp.cxx == (None, "/opt/gcc/bin/g++")
    inductor.reset()
    # a recorded value that is no literal is not evaluated: said, not loaded
    write_set(tmp_path / "c", b"third", meta={**META, "settings": {"cpp.cxx": "__import__('os').getcwd()"}})
    with pytest.warns(RuntimeWarning, match="not loaded"):
        inductor.serve(str(tmp_path / "c"))
    assert torch.loaded == [b"graphs"] and config.cpp.cxx == (None, "g++")


def test_a_set_whose_bytes_changed_is_not_loaded(fake_torch, tmp_path):
    torch = fake_torch()
    digest = write_set(tmp_path)
    (tmp_path / f"{digest}.bin").write_bytes(b"other")
    with pytest.warns(RuntimeWarning, match="damaged"):
        inductor.serve(str(tmp_path))
    assert torch.loaded == []


def test_save_writes_the_process_s_set_named_by_its_digest_with_what_serving_checks(fake_torch, tmp_path, monkeypatch):
    torch = fake_torch()
    monkeypatch.setitem(sys.modules, "torch.compiler", torch.compiler)
    monkeypatch.setitem(sys.modules, "torch._inductor.config", torch._inductor.config)
    digest = inductor.save(str(tmp_path / "sets"))
    assert digest == hashlib.sha256(b"saved graphs").hexdigest()
    assert sorted(p.name for p in (tmp_path / "sets").iterdir()) == [f"{digest}.bin", f"{digest}.json"]
    meta = json.loads((tmp_path / "sets" / f"{digest}.json").read_text())
    assert meta == {"torch": "2.11.0+cu130", "job_id": None, "cpp_kernels": 0,
                    "settings": {"cpp.cxx": "(None, 'g++')", "bundle_triton_into_fx_graph_cache": "True"}}  # fmt: skip


def test_save_writes_nothing_where_torch_compile_did_not_run(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch.compiler", raising=False)
    assert inductor.save(str(tmp_path / "sets")) is None and not (tmp_path / "sets").exists()


def test_activate_warns_and_goes_on_where_torch_cannot_load_them(tmp_path, monkeypatch):
    from aotpack.runtime import _aotpack_activate

    monkeypatch.setattr(inductor, "serve", lambda folder, fallback: (_ for _ in ()).throw(ImportError("no torch")))
    with pytest.warns(RuntimeWarning, match="were not loaded"):
        _aotpack_activate._serve_graphs(str(tmp_path), "error")


@pytest.mark.parametrize(
    ("cxx", "fallback", "said"),
    [
        ((None, "no-such-c++-compiler"), "jit", "none found (no-such-c++-compiler; CXX names another)"),
        ((None, "sh"), "jit", "Inductor compiles them with"),
        ((None, "sh"), "error", "fallback='error' refuses them when their graph loads"),
    ],
)  # fmt: skip
def test_a_set_whose_cpp_kernels_the_recording_did_not_keep_says_what_they_need(fake_torch, tmp_path, monkeypatch, cxx,
                                                                               fallback, said):  # fmt: skip
    # a set recorded before aotpack kept the shared objects of Inductor's C++ kernels: the set is loaded, and how
    # its C++ kernels will be had (compiled, or refused) is said
    torch = fake_torch(cxx=cxx)
    monkeypatch.setattr(inductor, "_settings", lambda torch: META["settings"])
    write_set(tmp_path, meta={**META, "cpp_kernels": 2})
    with pytest.warns(RuntimeWarning) as caught:
        assert len(inductor.serve(str(tmp_path), fallback)) == 1
    assert torch.loaded == [b"graphs"]
    (message,) = [str(w.message) for w in caught]
    assert "calls for them 2 times) cannot be served here (the recording kept none of their shared objects)" in message
    assert said in message


SOABI = "cpython-311-x86_64-linux-gnu"
KEY = inductor.cpp_key(["const float*", "float*"], 'extern "C" void kernel(const float* in, float* out) {}')


def write_cpp_set(folder, obj=b"\x7fELF object", soabi=SOABI, cpu=("avx2", "fma"), count=1):
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(obj).hexdigest()
    (folder / f"{name}.cpp").write_bytes(zlib.compress(obj))
    cpp = {"soabi": soabi, "cpu": None if cpu is None else list(cpu), "kernels": {KEY: name}}
    return write_set(folder, meta={**META, "cpp_kernels": count, "cpp": cpp}), name


@pytest.mark.parametrize(
    ("soabi", "recorded_cpu", "this_cpu", "why"),
    [
        (SOABI, ("avx2", "fma"), {"avx2", "fma", "sse2"}, None),
        ("cpython-312-x86_64-linux-gnu", ("avx2",), {"avx2"}, "built for Python's ABI cpython-312-x86_64-linux-gnu"),
        (SOABI, ("avx2", "avx512f", "fma"), {"avx2", "fma"}, "features this CPU lacks: avx512f"),
        (SOABI, None, {"avx2"}, "the recording's CPU's features are not known"),
        (SOABI, ("avx2",), None, "unreadable) CPU's features are not known"),
    ],
)  # fmt: skip
def test_a_recorded_cpp_kernel_is_served_only_under_its_python_and_on_a_cpu_with_its_features(
    fake_torch, tmp_path, monkeypatch, soabi, recorded_cpu, this_cpu, why
):
    # Inductor builds them with -march=native against the recording's Python: elsewhere they are not loaded
    fake_torch(cxx=(None, "sh"))
    monkeypatch.setattr(inductor, "_settings", lambda torch: META["settings"])
    monkeypatch.setattr(inductor, "_soabi", lambda: SOABI)
    monkeypatch.setattr(inductor, "_cpu_flags", lambda: None if this_cpu is None else frozenset(this_cpu))
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    _, name = write_cpp_set(tmp_path, soabi=soabi, cpu=recorded_cpu)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        skipped = inductor.serve(str(tmp_path), "jit")
    if why is None:
        assert skipped == [] and caught == []
        assert inductor._state.cpp_held == {KEY: str(tmp_path / f"{name}.cpp")}
    else:
        assert len(skipped) == 1 and why in skipped[0] and inductor._state.cpp_held == {}


class FakeAsyncCompile:
    def __init__(self):
        self.built = []

    def cpp_pybinding(self, argtypes, source_code):
        self.built.append(source_code)
        return "built by Inductor"


@pytest.fixture
def answering(monkeypatch):
    """Inductor's AsyncCompile as activate() answers it, with a package holding KEY's kernel."""
    module = types.SimpleNamespace(AsyncCompile=type("AsyncCompile", (FakeAsyncCompile,), {}))
    monkeypatch.setitem(sys.modules, "torch._inductor.async_compile", module)
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    inductor._state.cpp_held[KEY] = "held.cpp"
    monkeypatch.setattr(inductor, "_cpp_kernel", lambda key: f"the package's {key[:8]}")

    def make(fallback):
        inductor.guard_cpp(fallback, LookupError)
        return module.AsyncCompile()

    return make


@pytest.mark.parametrize("fallback", ["error", "jit", None])
def test_activate_answers_inductor_with_the_cpp_kernels_the_packages_hold(answering, fallback):
    compiler = answering(fallback)
    assert compiler.cpp_pybinding(["const float*", "float*"], 'extern "C" void kernel(const float* in, float* out) {}') \
        == f"the package's {KEY[:8]}"  # fmt: skip
    assert compiler.built == [] and inductor.compiled() == []


def test_fallback_error_refuses_a_cpp_kernel_no_package_holds_before_inductor_builds_it(answering):
    compiler = answering("error")
    with pytest.raises(
        LookupError, match=r"Inductor would compile Inductor's C\+\+ kernel \w+ in process .*\(no activated"
    ):
        compiler.cpp_pybinding(["float*"], "other")
    assert compiler.built == [] and inductor.compiled() == []


@pytest.mark.parametrize(("fallback", "listed"), [("jit", 1), (None, 0)])
def test_fallback_jit_lets_inductor_build_a_cpp_kernel_no_package_holds_and_lists_it(answering, fallback, listed):
    compiler = answering(fallback)
    assert compiler.cpp_pybinding(["float*"], "other") == "built by Inductor"
    assert compiler.built == ["other"] and len(inductor.compiled()) == listed
    if listed:
        (event,) = inductor.compiled()
        assert event["event"] == "compiled" and event["key"] == inductor.cpp_key(["float*"], "other")


@pytest.mark.parametrize("error", [OSError("read-only cache folder"), AttributeError("no _load_library")])
def test_a_held_cpp_kernel_that_does_not_load_is_compiled_or_refused_saying_why(answering, monkeypatch, error):
    monkeypatch.setattr(inductor, "_cpp_kernel", lambda key: (_ for _ in ()).throw(error))
    source = 'extern "C" void kernel(const float* in, float* out) {}'
    with pytest.raises(LookupError, match=f"the package's copy did not load: {error}"):
        answering("error").cpp_pybinding(["const float*", "float*"], source)
    compiler = answering("jit")
    assert compiler.cpp_pybinding(["const float*", "float*"], source) == "built by Inductor"
    assert [e["key"] for e in inductor.compiled()] == [KEY]


def test_activate_answers_inductor_once_it_is_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._inductor.async_compile", raising=False)
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    finders = []
    monkeypatch.setattr(inductor, "when_imported", lambda callbacks: finders.append(callbacks))
    inductor.guard_cpp("error", LookupError)
    inductor.guard_cpp("jit", LookupError)  # (one wait)
    (callbacks,) = finders
    module = types.SimpleNamespace(AsyncCompile=type("AsyncCompile", (FakeAsyncCompile,), {}))
    callbacks["torch._inductor.async_compile"](module)
    assert module.AsyncCompile.cpp_pybinding._aotpack_answers


class FakeBindings:
    entry_function = "kernel"
    loads: typing.ClassVar[list[tuple[str, str, str, int]]] = []

    @classmethod
    def _load_library(cls, path, key):
        folder = os.stat(os.path.dirname(path))
        cls.loads.append((path, key, oct(folder.st_mode & 0o777), folder.st_uid))
        return types.SimpleNamespace(kernel=f"loaded {Path(path).read_bytes()!r}")


@pytest.fixture
def bindings(monkeypatch, tmp_path):
    FakeBindings.loads = []
    monkeypatch.setitem(sys.modules, "torch._inductor.codecache",
                        types.SimpleNamespace(CppPythonBindingsCodeCache=FakeBindings))  # fmt: skip
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return FakeBindings


def test_a_held_cpp_kernel_is_loaded_once_from_a_private_folder_of_the_bytes_checked(bindings, tmp_path):
    # another user's planted object where Inductor's shared cache would hold it: never read
    planted = tmp_path / "inductor" / "aotpack-cpp"
    planted.mkdir(parents=True)
    _, name = write_cpp_set(tmp_path / "pkg")
    (planted / f"{name}.so").write_bytes(b"another user's library")
    inductor._state.cpp_held[KEY] = str(tmp_path / "pkg" / f"{name}.cpp")
    assert inductor._cpp_kernel(KEY) == "loaded b'\\x7fELF object'"
    assert inductor._cpp_kernel(KEY) == "loaded b'\\x7fELF object'"  # (once per process)
    ((path, key, mode, owner),) = bindings.loads
    assert key == KEY and mode == "0o700" and owner == os.getuid()  # a folder of its own, made by mkdtemp
    assert os.path.basename(path) == f"{name}.so" and os.path.dirname(path).startswith(str(tmp_path / "tmp"))
    assert list((tmp_path / "tmp").iterdir()) == []  # removed once loaded (the library stays mapped)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p.write_bytes(b"not zlib"), "is damaged (Error"),
        (lambda p: p.write_bytes(zlib.compress(b"other object")), "its bytes are not the ones recorded"),
        (lambda p: p.write_bytes(zlib.compress(b"\x7fELF object")[:-3]), "its bytes are not the ones recorded"),
    ],
)  # fmt: skip
def test_a_damaged_cpp_kernel_is_not_loaded(bindings, tmp_path, monkeypatch, damage, why):
    _, name = write_cpp_set(tmp_path / "pkg")
    damage(tmp_path / "pkg" / f"{name}.cpp")
    inductor._state.cpp_held[KEY] = str(tmp_path / "pkg" / f"{name}.cpp")
    with pytest.raises(ValueError, match=re.escape(why)):
        inductor._cpp_kernel(KEY)
    assert bindings.loads == [] and list((tmp_path / "tmp").iterdir()) == []


def test_save_keeps_the_shared_object_of_each_cpp_kernel_the_process_loaded(fake_torch, tmp_path, monkeypatch):
    torch = fake_torch()
    monkeypatch.setitem(sys.modules, "torch.compiler", torch.compiler)
    built = tmp_path / "c123.so"
    built.write_bytes(b"\x7fELF built")
    kernel = types.SimpleNamespace(__self__=types.SimpleNamespace(__file__=str(built)))
    future = types.SimpleNamespace(result=lambda: kernel)  # (compiled in a pool: a future)
    broken = types.SimpleNamespace(result=lambda: (_ for _ in ()).throw(RuntimeError("never loaded")))
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    inductor._state.cpp_seen.update({KEY: future, "b" * 64: broken})
    monkeypatch.setattr(inductor, "_cpu_flags", lambda: frozenset({"fma", "avx2"}))
    digest = inductor.save(str(tmp_path / "sets"))
    name = hashlib.sha256(b"\x7fELF built").hexdigest()
    meta = json.loads((tmp_path / "sets" / f"{digest}.json").read_text())
    assert meta["cpp"] == {"soabi": inductor._soabi(), "cpu": ["avx2", "fma"], "kernels": {KEY: name}}
    assert zlib.decompress((tmp_path / "sets" / f"{name}.cpp").read_bytes()) == b"\x7fELF built"
    assert inductor.cpp_key(["const float*", "float*"], 'extern "C" void kernel(const float* in, float* out) {}') == KEY


def test_record_notes_each_cpp_kernel_inductor_gives_the_program(monkeypatch):
    module = types.SimpleNamespace(AsyncCompile=type("AsyncCompile", (FakeAsyncCompile,), {}))
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    inductor.record_cpp(module)
    inductor.record_cpp(module)  # (once)
    compiler = module.AsyncCompile()
    assert compiler.cpp_pybinding(["float*"], "src") == compiler.cpp_pybinding(["float*"], "src") == "built by Inductor"
    assert compiler.built == ["src", "src"]
    assert inductor._state.cpp_seen == {inductor.cpp_key(["float*"], "src"): "built by Inductor"}


def test_a_set_listing_as_many_cpp_kernels_as_allowed_fits_the_json_bound_serving_and_reading_use():
    # activate() reads MAX_META bytes of a set's .json, and the recipe reader refuses a larger one: the most C++
    # kernels a set lists, on a CPU of many flags, still fits
    flags = [f"feature_flag_{n:04d}" for n in range(300)]
    kernels = {f"{n:064x}": f"{n + 1:064x}" for n in range(inductor.MAX_CPP_KERNELS)}
    meta = {**META, "cpp_kernels": 10**9, "cpp": {"soabi": SOABI, "cpu": flags, "kernels": kernels}}
    assert len(json.dumps(meta, sort_keys=True).encode()) <= inductor.MAX_META


def test_a_recipe_reads_the_cpp_kernels_a_set_lists(tmp_path):
    digest, name = write_cpp_set(tmp_path / "inductor-cache")
    (s,) = read_recipe(tmp_path).inductor_cache
    assert s.cpp_objects == (name,) and s.files == (f"{digest}.bin", f"{digest}.json", f"{name}.cpp")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f, n: (f / f"{n}.cpp").unlink(), r"\.cpp is missing: .*\.json lists it"),
        (lambda f, n: (f / f"{'c' * 64}.cpp").write_bytes(zlib.compress(b"x")), "no set's .json lists it"),
        (lambda f, n: (f / f"{n}.cpp").write_bytes(b"plain"), "not a C\\+\\+ kernel's shared object"),
        (lambda f, n: (f / f"{n}.cpp").write_bytes(zlib.compress(b"other")), "its bytes are not the ones recorded"),
        (lambda f, n: (f / f"{n}.cpp").write_bytes(zlib.compress(bytes(70 << 20))), "inflates past 64 MiB"),
    ],
)  # fmt: skip
def test_a_recipe_refuses_cpp_kernels_that_are_not_what_record_wrote(tmp_path, damage, message):
    from aotpack.errors import AotpackError

    folder = tmp_path / "inductor-cache"
    _, name = write_cpp_set(folder)
    damage(folder, name)
    with pytest.raises(AotpackError, match=message):
        read_recipe(tmp_path)


@pytest.mark.parametrize(
    ("cpp", "message"),
    [
        ([], "'cpp' is not a table naming the Python ABI"),
        ({"soabi": SOABI, "cpu": "avx2", "kernels": {}}, "'cpp.cpu' is not a list"),
        ({"soabi": SOABI, "cpu": None, "kernels": {"k": "v"}}, "expected two sha256 digests"),
        ({"soabi": SOABI, "cpu": None, "kernels": []}, "'cpp.kernels' is not a table"),
    ],
)  # fmt: skip
def test_a_recipe_refuses_a_cpp_table_record_did_not_write(tmp_path, cpp, message):
    from aotpack.errors import AotpackError

    write_set(tmp_path / "inductor-cache", meta={**META, "cpp": cpp})
    with pytest.raises(AotpackError, match=re.escape(message)):
        read_recipe(tmp_path)


def test_save_counts_the_cpp_kernels_the_graphs_call_for(fake_torch, tmp_path, monkeypatch):
    torch = fake_torch()
    code = b"x = 1\ncpp_fused_3 = async_compile.cpp_pybinding(['const double*'], r'kernel')\n"
    torch.compiler.save_cache_artifacts = lambda: (code * 3, None)
    monkeypatch.setitem(sys.modules, "torch.compiler", torch.compiler)
    digest = inductor.save(str(tmp_path))
    assert json.loads((tmp_path / f"{digest}.json").read_text())["cpp_kernels"] == 3


def test_plan_says_a_c_compiler_is_needed_where_the_graphs_call_for_inductor_cpp_kernels(tmp_path):
    from aotpack.plan.variants import plan_summary, plan_variants

    write_set(tmp_path / "inductor-cache", b"one", meta={**META, "cpp_kernels": 2})
    write_set(tmp_path / "inductor-cache", b"two")  # (a set recorded before the count: none said)
    recipe = read_recipe(tmp_path)
    assert sorted(s.cpp_kernels for s in recipe.inductor_cache) == [0, 2]
    (line,) = [x for x in plan_summary(recipe, plan_variants(recipe)) if x.startswith("inductor_cache:")]
    assert line.endswith("their graphs' code calls for C++ kernels of Inductor's (2 calls), which it builds when they "
                         "load: 0 shared objects of them held (served under the recording's Python on a CPU with its "
                         "features), any other needs a C++ compiler where the program is served")  # fmt: skip
    write_cpp_set(tmp_path / "held")
    (line,) = [x for x in plan_summary(read_recipe(tmp_path, "held"), ()) if x.startswith("inductor_cache:")]
    assert "C++ kernels of Inductor's (1 call), which it builds when they load: 1 shared object of them held" in line
    write_set(tmp_path / "other", b"one")
    (line,) = [x for x in plan_summary(read_recipe(tmp_path, "other"), ()) if x.startswith("inductor_cache:")]
    assert line.endswith("loaded by activate()")


CLOSURE = """
import sys, types
from aotpack.runtime import _aotpack_inductor as inductor

pgo = types.ModuleType("pgo")  # Dynamo's profile module as torch 2.13 has it: a closure's functions by hash()
pgo._get_cell_hash_content = lambda cell: cell.cell_contents.__code__ if callable(cell.cell_contents) else None


def deprecated(fn):
    def wrapped_func(*args):
        return fn(*args)

    return wrapped_func


@deprecated
def forward(x):
    return x


before = hash(tuple(pgo._get_cell_hash_content(c) for c in forward.__closure__))
inductor._stable_cells(pgo)
print(before, hash(tuple(pgo._get_cell_hash_content(c) for c in forward.__closure__)))
"""


def test_dynamo_s_profile_keys_a_decorated_frame_the_same_in_every_process():
    """torch keys a decorated frame's profile by hash() of its closure's code, another in each process; the key
    stable_code_ids gives it is the same in each (processes with other hash salts here)."""
    keys = []
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", CLOSURE], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)})  # fmt: skip
        keys.append(done.stdout.split())
    (torch_1, ours_1), (torch_2, ours_2) = keys
    assert torch_1 != torch_2 and ours_1 == ours_2


def test_stable_code_ids_waits_for_dynamo_s_profile_and_leaves_a_torch_without_closure_keys_alone(monkeypatch):
    monkeypatch.setattr(inductor, "_state", inductor._Graphs())
    monkeypatch.delitem(sys.modules, "torch._dynamo.pgo", raising=False)
    waiting: list[dict[str, typing.Any]] = []
    monkeypatch.setattr(inductor, "when_imported", waiting.append)
    inductor.stable_code_ids()
    inductor.stable_code_ids()  # (one wait)
    assert [list(w) for w in waiting] == [["torch._dynamo.pgo"]]
    older = types.ModuleType("pgo")  # torch 2.11: CodeId is the file's hash, line and name
    waiting[0]["torch._dynamo.pgo"](older)
    assert vars(older).keys() == {"__name__", "__doc__", "__package__", "__loader__", "__spec__"}
