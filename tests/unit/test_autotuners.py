"""Libraries' own autotuners (subclasses of Triton's Autotuner whose ``cache`` is not a dict): their picks are read
whatever the cache is, and one that cannot be read is said at the program's exit, never raised into it."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from aotpack.runtime import _aotpack_activate, _aotpack_identity, _aotpack_tuners
from aotpack.runtime import _aotpack_agent as record_agent


class Config:
    def __init__(self, block: int, warps: int = 4) -> None:
        self.kwargs, self.num_warps, self.num_stages = {"BLOCK": block}, warps, 3


class ConfigCache:
    """A database-backed cache as FlagGems' LibTuner keeps: indexable by key, not iterable, its picks of this
    process in a dict of its own."""

    def __init__(self, picks: dict[tuple[Any, ...], Config]) -> None:
        self.table, self.dict_cache, self.lock = "t", dict(picks), object()

    def __getitem__(self, key: tuple[Any, ...]) -> Config:
        return self.dict_cache[key]

    def __setitem__(self, key: tuple[Any, ...], config: Config) -> None:
        self.dict_cache[key] = config


class Keyed:
    """A cache that iterates over its keys and is indexed by them (no items())."""

    def __init__(self, picks: dict[tuple[Any, ...], Config]) -> None:
        self._picks = picks

    def __iter__(self) -> Any:
        return iter(self._picks)

    def __getitem__(self, key: tuple[Any, ...]) -> Config:
        return self._picks[key]


class Opaque:
    def __init__(self) -> None:
        self.path, self.connections = "/nowhere.db", dict[str, Any]()


PICKS = {(4096, "torch.float16"): Config(1024), (8192, "torch.float16"): Config(2048, 8)}


def tuner(cache: Any) -> Any:
    return types.SimpleNamespace(cache=cache, configs=list(PICKS.values()), keys=["n"])


@pytest.mark.parametrize("cache", [dict(PICKS), ConfigCache(PICKS), Keyed(PICKS)], ids=["dict", "inner", "keyed"])
def test_an_autotuner_s_picks_are_read_whatever_its_cache(cache):
    assert [(key, config.kwargs["BLOCK"]) for key, config in _aotpack_tuners.tuned(tuner(cache))] == [
        ((4096, "torch.float16"), 1024), ((8192, "torch.float16"), 2048)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("cache", "says"),
    [(Opaque(), r"\(SimpleNamespace.cache, a Opaque\) is no mapping, cannot be iterated and holds no one dict"),
     ({"n=4096": Config(1024)}, r"holds str -> Config, not a key tuple -> a triton.Config"),
     ({(1,): "BLOCK=1024"}, r"holds tuple -> str, not a key tuple")],
)  # fmt: skip
def test_an_autotuner_whose_cache_cannot_be_read_says_why(cache, says):
    with pytest.raises(ValueError, match=says):
        _aotpack_tuners.tuned(tuner(cache))


def _jit_in_module(name: str, cache: Any) -> Any:
    """A @triton.jit function of module ``name`` with an autotuner around it in that module."""
    jit_type = type("JITFunction", (), {"src": "def k(): pass"})
    jit = jit_type()
    jit.fn = types.SimpleNamespace(__module__=name)
    jit.__module__, jit.__name__ = name, "k"
    module = types.ModuleType(name)
    vars(module)["k"] = types.SimpleNamespace(fn=jit, cache=cache, configs=[], keys=["n"])
    sys.modules[name] = module
    return jit


def test_an_unreadable_autotuner_is_said_at_exit_and_the_exit_goes_on(monkeypatch):
    monkeypatch.setattr(record_agent, "describe", lambda jit: {"module": jit.__module__, "name": "k"})
    readable = _jit_in_module("lib_readable", ConfigCache(PICKS))
    unreadable = _jit_in_module("lib_unreadable", Opaque())
    try:
        events: list[dict[str, Any]] = []
        agent = record_agent.Agent(sink=events.append)
        agent._functions = {1: unreadable, 2: readable}
        agent.finish()
    finally:
        del sys.modules["lib_readable"], sys.modules["lib_unreadable"]
    assert [e["event"] for e in events] == ["skipped", "picks"]
    assert events[0]["function"] == "lib_unreadable:k" and events[0]["why"].startswith("autotuner picks: its autotuner")
    assert [p["config"]["BLOCK"] for p in events[1]["picks"]] == [1024, 2048]


KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""


def test_activate_seeds_a_library_autotuner_whose_run_is_its_own(tmp_path):
    """A library's Autotuner subclass with a run of its own (one that never calls Autotuner.run), defined before
    activate() or after it, gets the recorded picks before it times anything; deactivate() gives every run back."""
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.runtime.autotuner import Autotuner

    (tmp_path / "libkernels.py").write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("libkernels", tmp_path / "libkernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]

    class LibTuner(Autotuner):  # type: ignore[misc]
        def run(self, *args, **kwargs):  # what a library's tuner reads: its own cache, no timing here
            return dict(self.cache)

    key = (1000, "torch.float16")
    picks = [{"key": list(key), "kwargs": {"BLOCK": 128}, "num_warps": 4, "num_stages": 3}]
    state = _aotpack_activate._Activation()
    # what seeding reads of a package's launcher: the picks, and which configs have variants
    launcher: Any = types.SimpleNamespace(tuned=picks, holds=lambda config: config.kwargs["BLOCK"] == 128)
    state.launchers[_aotpack_identity.identity_of(module.scale)] = (launcher, None)
    saved = _aotpack_activate._state.current
    try:
        state.jit_run = type(module.scale).run
        _aotpack_activate._state.current = state
        _aotpack_activate._seed_tuners(state, Autotuner)

        class LaterTuner(Autotuner):  # type: ignore[misc]  # defined after activate(): the hook gives it the seeding run
            def run(self, *args, **kwargs):
                return dict(self.cache)

        for cls in (LibTuner, LaterTuner):
            tuner = triton.autotune(configs=configs, key=["n"])(module.scale)
            tuner.__class__ = cls
            assert {k: c.kwargs for k, c in tuner.run().items()} == {key: {"BLOCK": 128}}
            # fallback="error": a key never recorded is timed over the configs built, never compiling the others
            assert [c.kwargs["BLOCK"] for c in tuner.configs] == [128]
        state.fallback = "jit"  # the JIT compiles the others to time them: every config stays
        tuner = triton.autotune(configs=configs, key=["n"])(module.scale)
        tuner.__class__ = LibTuner
        tuner.run()
        assert [c.kwargs["BLOCK"] for c in tuner.configs] == [64, 128]
        _aotpack_activate.deactivate()
        assert "tuner_run" not in LibTuner.run.__qualname__ and "__init_subclass__" not in Autotuner.__dict__
        assert "tuner_run" not in Autotuner.run.__qualname__
    finally:
        _aotpack_activate._state.current = saved


class DatabaseCache:
    """A cache kept in a database, as FlagGems' LibTuner keeps its picks: a key is looked up, stored and tested
    for; nothing can be listed, and no dict of this process's picks is kept."""

    def __init__(self) -> None:
        import sqlite3

        self.db = sqlite3.connect(":memory:")
        self.db.execute("create table picks (key text primary key, block int)")
        self.configs: dict[int, Any] = {}

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return self.db.execute("select 1 from picks where key = ?", (repr(key),)).fetchone() is not None

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        (block,) = self.db.execute("select block from picks where key = ?", (repr(key),)).fetchone()
        return self.configs[block]

    def __setitem__(self, key: tuple[Any, ...], config: Any) -> None:
        self.configs[config.kwargs["BLOCK"]] = config
        self.db.execute("insert into picks values (?, ?)", (repr(key), config.kwargs["BLOCK"]))


def test_the_agent_records_what_a_library_autotuner_picked_from_a_cache_no_one_can_read(tmp_path):
    """A library's Autotuner subclass with its own keys and a database for a cache: its runs show the key and
    the pick (the agent taps the cache while a run runs, then gives it back), for subclasses defined before the
    agent started and after; the exit writes the picks, and no 'skipped' line for the unreadable cache."""
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.runtime import autotuner as autotuner_module

    (tmp_path / "dbkernels.py").write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("dbkernels", tmp_path / "dbkernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128}, num_warps=8)]

    def library_run(self: Any, *args: Any, **kwargs: Any) -> Any:  # its own key; its timing picks the second
        key = (kwargs["n"] // 32 * 32, "torch.float16")
        if key not in self.cache:
            self.cache[key] = self.configs[1]
        self.best_config = self.cache[key]
        return self.best_config

    Before = type("Before", (autotuner_module.Autotuner,), {"run": library_run})
    events: list[dict[str, Any]] = []
    agent = record_agent.Agent(sink=events.append)
    agent.tap(autotuner_module)
    try:
        After = type("After", (autotuner_module.Autotuner,), {"run": library_run})
        for cls, n in ((Before, 1000), (After, 4100), (After, 4101)):
            tuner = triton.autotune(configs=configs, key=["n"])(module.scale)
            tuner.__class__ = cls
            tuner.cache = DatabaseCache()
            assert tuner.run(n=n).kwargs == {"BLOCK": 128}
            assert isinstance(tuner.cache, DatabaseCache)  # given back after the run
        agent.finish()
    finally:
        agent._untap()
    assert vars(Before)["run"] is library_run and vars(After)["run"] is library_run
    assert [e["event"] for e in events] == ["picks"], events
    assert [(p["key"], p["config"]) for p in events[0]["picks"]] == [
        ([992, "torch.float16"], {"BLOCK": 128, "num_warps": 8, "num_stages": 3}),
        ([4096, "torch.float16"], {"BLOCK": 128, "num_warps": 8, "num_stages": 3}),
    ]
