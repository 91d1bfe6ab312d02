"""torch.compile's caches, recorded and served (runtime/_aotpack_inductor.py, recipe/inductor_cache.py): a set is
read only when its files are what aotpack record wrote, and activate() loads it into torch only where the torch
and the Inductor settings of its cache key are the recording's, warning otherwise."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import types
import warnings

import pytest

from aotpack.runtime import _aotpack_inductor as inductor

pytestmark = pytest.mark.unit

RECIPE = "package: graphs_kernels\nversion: 0.1.0\ninductor_cache: {folder}\ntargets: [sm_90]\nkernels: {{}}\n"
META = {"torch": "2.11.0+cu130", "job_id": "aotpack", "settings": {"cpp.cxx": "(None, 'g++')",
        "bundle_triton_into_fx_graph_cache": "True"}}  # fmt: skip


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
        (lambda t: write_set(t / "inductor-cache", meta={**META, "settings": {"cpp.cxx": None}}), "inductor-cache",
         "'settings' is not a table of strings"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "cpp_kernels": -1}), "inductor-cache",
         "'cpp_kernels' is not a count"),
        (lambda t: write_set(t / "inductor-cache", meta={**META, "cpp_kernels": True}), "inductor-cache",
         "'cpp_kernels' is not a count"),
        (lambda t: ((t / "elsewhere").mkdir(), (t / "inductor-cache").mkdir(),
                    (t / "inductor-cache" / f"{'a' * 64}.bin").symlink_to(t / "elsewhere")),
         "inductor-cache", "not a file of torch.compile's recorded caches"),
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


@pytest.fixture
def fake_torch(monkeypatch):
    def make(**kw):
        torch = FakeTorch(**kw)
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "torch._inductor.config", torch._inductor.config)
        monkeypatch.setattr(inductor, "_loaded", set())
        return torch

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
def test_a_set_of_another_torch_or_other_settings_is_warned_about_and_not_loaded(fake_torch, tmp_path, torch_kw, data,
                                                                                 meta, why):  # fmt: skip
    torch = fake_torch(**torch_kw)
    digest = write_set(tmp_path, data)
    if meta is not None:
        (tmp_path / f"{digest}.json").write_text(meta)
    with pytest.warns(RuntimeWarning, match=re.escape(why)):
        skipped = inductor.serve(str(tmp_path))
    assert len(skipped) == 1 and torch.loaded == [] and torch.compiler.config.job_id is None


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
    from aotpack.runtime import aot_kernels

    monkeypatch.setattr(inductor, "serve", lambda folder, fallback: (_ for _ in ()).throw(ImportError("no torch")))
    with pytest.warns(RuntimeWarning, match="were not loaded"):
        aot_kernels._serve_graphs(str(tmp_path), "error")


@pytest.mark.parametrize(
    ("cxx", "fallback", "said"),
    [
        ((None, "no-such-c++-compiler"), None, "none found (no-such-c++-compiler; CXX names another)"),
        ((None, "sh"), "error", "fallback='error' refuses Triton's compilations, not Inductor's C++ ones"),
        ((None, "sh"), "jit", None),
    ],
)  # fmt: skip
def test_a_set_whose_graphs_hold_inductor_cpp_kernels_says_what_they_need(fake_torch, tmp_path, monkeypatch, cxx,
                                                                          fallback, said):  # fmt: skip
    # Inductor builds its C++ kernels for the CPU with a C++ compiler when a graph loads (a torch.compile(
    # dynamic=True) Llama's graphs convert a CPU scalar): no package stands in, so the set is loaded and it is said
    torch = fake_torch(cxx=cxx)
    monkeypatch.setattr(inductor, "_settings", lambda torch: META["settings"])
    write_set(tmp_path, meta={**META, "cpp_kernels": 2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert inductor.serve(str(tmp_path), fallback) == []
    assert torch.loaded == [b"graphs"]
    messages = [str(w.message) for w in caught]
    if said is None:
        assert messages == []
    else:
        assert len(messages) == 1 and "its graphs hold 2 C++ kernels of Inductor's for the CPU" in messages[0]
        assert said in messages[0]


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
    assert line.endswith("their graphs call for 2 C++ kernels of Inductor's, which it builds when they load: a C++ "
                         "compiler where the program is served")  # fmt: skip
    write_set(tmp_path / "other", b"one")
    (line,) = [x for x in plan_summary(read_recipe(tmp_path, "other"), ()) if x.startswith("inductor_cache:")]
    assert line.endswith("loaded by activate()")
