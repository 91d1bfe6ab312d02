"""Triton cache entries a package holds (what ``aotpack record`` copied out of Triton's cache: Inductor's kernels,
keyed by Triton's cache key): the guard serves a lookup the program's cache misses from them, put into the
program's cache with the group rewritten to the paths there; a key no package holds stays refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytestmark = pytest.mark.unit

KEY = "A" * 52


@pytest.fixture
def guard(tmp_path, monkeypatch):
    from triton import knobs

    from aotpack.runtime import _aotpack_guard

    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path / "cache"))
    for name in ("TRITON_CACHE_MANAGER", "AOTPACK_FALLBACK", "AOTPACK_CACHE_MANAGER", "AOTPACK_CACHE_ENTRIES"):
        monkeypatch.delenv(name, raising=False)
    entry = tmp_path / "package" / "_triton_cache" / KEY
    entry.mkdir(parents=True)
    (entry / "k.json").write_text('{"name": "k"}')
    (entry / "k.cubin").write_bytes(b"\x7fELF cubin")
    _aotpack_guard.install("error", [str(entry.parent)])
    yield _aotpack_guard
    _aotpack_guard.reset()


def test_a_packaged_entry_lands_in_the_program_s_cache_with_its_group_rewritten(guard, tmp_path):
    group = guard.Guard(KEY).get_group("k.json")
    where = tmp_path / "cache" / KEY
    assert group == {"k.cubin": str(where / "k.cubin"), "k.json": str(where / "k.json")}
    assert (where / "k.cubin").read_bytes() == b"\x7fELF cubin"
    assert json.loads((where / "__grp__k.json").read_text()) == {"child_paths": group}
    assert guard.Guard(KEY).get_group("k.json") == group  # the program's cache holds it now


def test_a_key_no_package_holds_is_refused_and_reset_gives_the_environment_back(guard):
    assert os.environ["AOTPACK_CACHE_ENTRIES"].endswith("_triton_cache")
    with pytest.raises(guard.CompilationRefused, match="Triton would compile other"):
        guard.Guard("B" * 52).get_group("other.json")
    with pytest.raises(guard.CompilationRefused):  # the key holds another kernel's name: not served
        guard.Guard(KEY).get_group("other.json")
    guard.install("jit")  # installed again: what the earlier install changed is given back first
    assert os.environ["AOTPACK_FALLBACK"] == "jit" and "AOTPACK_CACHE_ENTRIES" not in os.environ
    guard.reset()  # and the environment is as it was before either
    assert "AOTPACK_FALLBACK" not in os.environ and "TRITON_CACHE_MANAGER" not in os.environ


# ---------------------------------------------------------------- recorded: the agent's listener, read back


@pytest.fixture(autouse=True)
def program_cache(tmp_path, monkeypatch):
    """The program's Triton cache folder: the only one the agent copies an entry's files from."""
    from triton import knobs

    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path / "program-cache"))


def entry_of(tmp_path, name="k", key=KEY, cache="program-cache"):
    """A kernel's entry as Triton's cache holds it, and the metadata the listener is given with it."""
    folder = tmp_path / cache / key
    folder.mkdir(parents=True)
    (folder / f"{name}.json").write_text("{}")
    (folder / f"{name}.cubin").write_bytes(b"cubin")
    (folder / f"__grp__{name}.json").write_text("{}")  # (not a file of the group)
    group = {f"{name}.json": str(folder / f"{name}.json"), f"{name}.cubin": str(folder / f"{name}.cubin")}
    return {"name": name, "target": {"backend": "cuda", "arch": 90, "warp_size": 32}, "triton_version": "3.6.0"}, group


def test_the_agent_copies_an_entry_at_once_and_reads_back_as_cached_and_chains_the_previous_listener(tmp_path):
    from aotpack.record.events import read_events
    from aotpack.runtime import _aotpack_agent as record_agent

    agent, heard = record_agent.Agent(str(tmp_path / "events")), []
    agent._previous_listener = lambda **given: heard.append(given["cache_hit"])
    metadata, group = entry_of(tmp_path)
    for hit in (True, False):  # a cache hit counts (a warm cache must not hide a kernel); copied once
        agent.on_compiled(src=object(), metadata=metadata, metadata_group=group, times=None, cache_hit=hit)
    assert heard == [True, False]
    copied = tmp_path / "events" / "triton-cache" / KEY
    assert sorted(p.name for p in copied.iterdir()) == ["k.cubin", "k.json"]
    assert (copied / "k.cubin").read_bytes() == b"cubin"
    events = read_events(tmp_path / "events")
    assert [(c.name, c.key, c.files, c.triton, c.target) for c in events.cached.values()] == [
        ("k", KEY, ("k.cubin", "k.json"), "3.6.0", "cuda:90")
    ]
    assert events.entries == tmp_path / "events" / "triton-cache"


def test_an_entry_the_agent_cannot_copy_is_said_never_raised(tmp_path):
    from aotpack.record.events import read_events
    from aotpack.runtime import _aotpack_agent as record_agent

    agent = record_agent.Agent(str(tmp_path / "events"))
    metadata, group = entry_of(tmp_path)
    group["k.cubin"] = str(tmp_path / "elsewhere" / "k.cubin")  # two folders: not one entry
    agent.on_compiled(src=object(), metadata=metadata, metadata_group=group, times=None, cache_hit=False)
    events = read_events(tmp_path / "events")
    assert not events.cached
    assert "not in one cache folder" in events.skipped["triton.compile of k"]


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"key": "../x", "files": ["k.json"]}, "not a Triton cache key"),
        ({"key": KEY, "files": ["../k.json"]}, "not an entry's"),
        ({"key": KEY, "files": ["k.cubin"]}, "not an entry's"),  # its kernel's metadata is not among them
    ],
)
def test_a_cached_event_that_is_not_an_entry_s_is_skipped(event, why):
    from aotpack.record.events import Events

    events = Events()
    events.add({"event": "cached", "name": "k", "triton": "3.6.0", "target": "cuda:90", **event}, "7")
    assert not events.cached and why in next(iter(events.skipped.values()))


# ---------------------------------------------------------------- the recipe's triton_cache:

METADATA = '{"triton_version": "3.6.0", "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}'
RECIPE = "package: served\nversion: '1'\ntriton_cache: {folder}\nkernels: {{}}\n"


def linked(source, link):
    """A hard link ``link`` to ``source`` (a value, for the cases' lambdas)."""
    os.link(source, link)
    return link


def read_recipe(tmp_path, folder="triton-cache"):
    from aotpack.backends import recipes

    return recipes.parse(RECIPE.format(folder=folder), tmp_path / "r.yaml")


def test_a_recipe_of_cache_entries_alone_reads_them_sorted_by_key(tmp_path):
    for key, name in (("B" * 52, "b"), (KEY, "a")):
        (tmp_path / "triton-cache" / key).mkdir(parents=True)
        (tmp_path / "triton-cache" / key / f"{name}.json").write_text(METADATA)
        (tmp_path / "triton-cache" / key / f"{name}.cubin").write_bytes(b"c")
    read = read_recipe(tmp_path)
    assert [(e.name, e.key, e.files, e.triton, e.target) for e in read.triton_cache] == [
        ("a", KEY, ("a.cubin", "a.json"), "3.6.0", "cuda:90"), ("b", "B" * 52, ("b.cubin", "b.json"), "3.6.0", "cuda:90")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "folder", "message"),
    [
        (lambda t: (t / "x").mkdir(), "..", "is outside the recipe's folder"),
        (lambda t: None, "triton-cache", "no folder 'triton-cache' beside the recipe"),
        (lambda t: (t / "triton-cache" / "notakey").mkdir(parents=True), "triton-cache", "not a Triton cache entry"),
        (lambda t: (t / "triton-cache" / KEY).mkdir(parents=True), "triton-cache", "holds one kernel's files"),
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(""),
                    (t / "triton-cache" / KEY / "a b").write_text("")), "triton-cache", "not a plain file"),
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(
            "[]")), "triton-cache", "not Triton's metadata of a kernel"),
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(
            "[" * 100_000 + "]" * 100_000)), "triton-cache", "not Triton's metadata of a kernel"),  # (past json's reach)
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(
            METADATA[:-1] + ', "x": ' + "[" * 40 + "]" * 40 + "}")), "triton-cache", "nests deeper than 32 levels"),
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(
            METADATA), (t / "secret").write_text("host file"), linked(t / "secret", t / "triton-cache" / KEY / "k.bin")),
         "triton-cache", "a hard link"),
        (lambda t: ((t / "triton-cache" / KEY).mkdir(parents=True), (t / "triton-cache" / KEY / "k.json").write_text(
            METADATA), (t / "triton-cache" / KEY / "extra.so").write_bytes(b"\x7fELF")), "triton-cache",
         "extra.so: not a file of kernel k's entry"),
        *[(lambda t, bad=bad: ((t / "triton-cache" / KEY).mkdir(parents=True),
                               (t / "triton-cache" / KEY / "k.json").write_text(METADATA.replace(*bad))),
           "triton-cache", says) for bad, says in [
            (('"3.6.0"', '"3.6.0\\u001b[2J"'), r"'triton_version' is not a release of Triton: '3.6.0\\x1b\[2J'"),
            (('"3.6.0"', "9"), "'triton_version' is not a release of Triton: '9'"),
            (('"cuda"', '"cu da"'), "'target.backend' is not a backend's name: 'cu da'"),
            (('"arch": 90', '"arch": {"a": 1}'), r"'target.arch' is not an architecture \(such as 90 or gfx942\)"),
            (('"arch": 90', '"arch": -1'), "'target.arch' is not an architecture"),
            (('"arch": 90', '"arch": true'), "'target.arch' is not an architecture"),
            (('"arch": 90', '"arch": "gfx\\n942"'), "'target.arch' is not an architecture"),
        ]],
    ],
)  # fmt: skip
def test_a_triton_cache_folder_that_is_not_one_is_a_located_error(tmp_path, make, folder, message):
    from aotpack.errors import RecipeError

    (tmp_path / "in").mkdir()
    make(tmp_path / "in")
    with pytest.raises(RecipeError, match=message) as caught:
        read_recipe(tmp_path / "in", folder)
    assert "r.yaml:3" in str(caught.value)


def test_the_jit_s_own_compilation_is_not_copied_and_the_next_one_in_the_thread_is(tmp_path):
    from types import SimpleNamespace

    from aotpack.runtime import _aotpack_agent as record_agent

    events: list[dict] = []
    agent = record_agent.Agent(str(tmp_path / "events"), sink=events.append)
    jit = object()  # the JITFunction: the hook's fn.jit_function, and the ASTSource's fn
    agent.on_compile(key="k", repr="", fn=SimpleNamespace(module="m", name="f", jit_function=jit), compile={},
                     is_manual_warmup=False, already_compiled=False)  # fmt: skip
    metadata, group = entry_of(tmp_path)
    seen = []
    for _ in range(2):  # the JIT's triton.compile, then another caller's of the same function
        agent.on_compiled(src=SimpleNamespace(fn=jit), metadata=metadata, metadata_group=group, times=None,
                          cache_hit=False)  # fmt: skip
        seen.append([e["event"] for e in events if e["event"] != "skipped"])
    assert seen == [[], ["cached"]]


# ---------------------------------------------------------------- modules Triton builds with a C compiler

MODULE = "__triton_launcher.cpython-311-x86_64-linux-gnu.so"


def test_a_module_the_program_s_cache_lacks_comes_from_the_package(guard, tmp_path):
    entry = tmp_path / "package" / "_triton_cache" / ("M" * 52)
    entry.mkdir()
    (entry / MODULE).write_bytes(b"\x7fELF launcher")
    path = guard.Guard("M" * 52).get_file(MODULE)
    assert path == str(tmp_path / "cache" / ("M" * 52) / MODULE)
    assert Path(path).read_bytes() == b"\x7fELF launcher"
    assert guard.Guard("N" * 52).get_file(MODULE) is None  # not held: Triton builds it (with a C compiler)


def test_the_agent_copies_each_module_triton_builds_or_finds_and_the_recipe_reads_it(tmp_path):
    from types import SimpleNamespace

    from aotpack.record.events import read_events
    from aotpack.runtime import _aotpack_agent as record_agent

    built = tmp_path / "program-cache" / ("M" * 52)
    built.mkdir(parents=True)

    class Manager:  # Triton's, as triton.runtime.build asks for it
        def __init__(self, key):
            self.key = key

        def get_file(self, filename):
            return str(built / filename) if (built / filename).exists() else None

        def put(self, data, filename, binary=True):
            (built / filename).write_bytes(data)
            return str(built / filename)

    build = SimpleNamespace(get_cache_manager=Manager)
    agent = record_agent.Agent(str(tmp_path / "events"))
    agent.watch_builds(build)
    manager = build.get_cache_manager("M" * 52)
    assert manager.get_file(MODULE) is None  # a miss: Triton builds it, then puts it
    manager.put(b"\x7fELF launcher", MODULE)
    events = read_events(tmp_path / "events")
    assert [(c.name, c.files, c.target) for c in events.cached.values()] == [(MODULE, (MODULE,), "host")]
    copied = tmp_path / "events" / "triton-cache"
    assert (copied / ("M" * 52) / MODULE).read_bytes() == b"\x7fELF launcher"
    (tmp_path / "r").mkdir()
    (copied).rename(tmp_path / "r" / "triton-cache")
    read = read_recipe(tmp_path / "r")
    assert [(e.name, e.triton, e.target) for e in read.triton_cache] == [(MODULE, "", "host")]


# ---------------------------------------------------------------- what a key was made of: why a recorded kernel missed

COMPILE = """
def compile(src, backend, options, env_vars, hash, lookup):
    return lookup()
"""


def folder_of(hash: str) -> str:
    """The cache folder Triton's cache manager gives the sha256 hex digest ``hash`` of a key."""
    return pytest.importorskip("triton.runtime.cache").get_cache_manager.__globals__["_base32"](hash)


def compiling(function_key: str, hash: str, lookup, ptxas="12.9", block=64):
    """``lookup`` called from inside a stand-in for ``triton.compile`` (its module's name, its locals: the
    source, backend, options and environment a cache key is made of, and the key's ``hash``)."""
    from types import SimpleNamespace

    scope: dict = {"__name__": "triton.compiler.compiler"}
    exec(COMPILE, scope)
    src = SimpleNamespace(fn=SimpleNamespace(cache_key=function_key), attrs={(0,): [["tt.divisibility", 16]]},
                          signature={"x": "*fp32"}, constants={"BLOCK": block})  # fmt: skip
    backend = SimpleNamespace(hash=lambda: f"{ptxas}-90", target=SimpleNamespace(backend="cuda", arch=90))
    return scope["compile"](src, backend, SimpleNamespace(hash=lambda: "o"), {}, hash, lookup)


def test_a_recorded_entry_keeps_its_key_s_parts_and_a_later_miss_names_the_part_that_changed(guard, tmp_path,
                                                                                                monkeypatch):  # fmt: skip
    events = tmp_path / "events"
    events.mkdir()
    monkeypatch.setenv("AOTPACK_RECORD_DIR", str(events))
    recorded_hash, changed_hash = "a1" * 32, "c3" * 32
    recorded = folder_of(recorded_hash)
    _, group = entry_of(tmp_path, key=recorded, cache="cache")  # (what the program's manager put there)
    compiling("function-as-recorded", recorded_hash, lambda: guard.Recorder(recorded).put_group("k.json", group))
    parts = json.loads((events / "triton-cache" / recorded / "__aotpack_key__.json").read_text())
    assert parts["function"] and parts["target"] == "cuda:90" and {"attrs", "backend", "options"} <= set(parts)
    (event,) = [json.loads(line) for f in events.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert "__aotpack_key__.json" in event["files"]
    # the package holds it (its parts beside it); the program compiles the same kernel whose function changed
    held = tmp_path / "package" / "_triton_cache" / recorded
    held.mkdir()
    for f in (events / "triton-cache" / recorded).iterdir():
        (held / f.name).write_bytes(f.read_bytes())
    with pytest.raises(
        guard.CompilationRefused,
        match=r"under 2 other keys; the nearest differs in its key.s function \(the kernel.s source",
    ):
        compiling("function-changed", changed_hash, lambda: guard.Guard(folder_of(changed_hash)).get_group("k.json"))
    served = guard.Guard(recorded).get_group("k.json")  # the recorded key is served, its parts left behind
    assert served and not (tmp_path / "cache" / recorded / "__aotpack_key__.json").exists()


def test_a_kernel_recorded_under_another_ptxas_of_the_program_is_served_and_nothing_else_is(guard, tmp_path,
                                                                                             monkeypatch):  # fmt: skip
    """torch.compile: the compile workers use torch's ptxas and the process starting them Triton's, and which one
    compiles a kernel is decided at run time; the recorded cubin of the same kernel, every other part of its key
    the same, is what the recorded run launched."""
    events = tmp_path / "events"
    events.mkdir()
    monkeypatch.setenv("AOTPACK_RECORD_DIR", str(events))
    recorded = folder_of("e5" * 32)
    _, group = entry_of(tmp_path, key=recorded, cache="cache")
    compiling("f", "e5" * 32, lambda: guard.Recorder(recorded).put_group("k.json", group), ptxas="13.0")
    held = tmp_path / "package" / "_triton_cache"
    (events / "triton-cache" / recorded).rename(held / recorded)
    asked = folder_of("f6" * 32)
    served = compiling("f", "f6" * 32, lambda: guard.Guard(asked).get_group("k.json"), ptxas="12.8")
    assert set(served) == {"k.json", "k.cubin"} and Path(served["k.cubin"]).read_bytes() == b"cubin"
    assert Path(served["k.cubin"]).parent.name == asked  # under the key Triton asked for, where Inductor looks
    guard.forget_substituted()  # (at the process's exit) not left under a key it was not recorded for
    assert not Path(served["k.cubin"]).parent.exists()
    assert (held / recorded).is_dir()  # (the package's own entry untouched)
    other = folder_of("07" * 32)  # another constant: another kernel, whatever the ptxas
    with pytest.raises(
        guard.CompilationRefused, match=r"differs in its key.s backend \(another ptxas or GPU\), constants"
    ):
        compiling("f", "07" * 32, lambda: guard.Guard(other).get_group("k.json"), ptxas="12.8", block=128)
    with pytest.raises(guard.CompilationRefused):  # asked outside triton.compile: no parts, no substitute
        guard.Guard(folder_of("18" * 32)).get_group("k.json")


@pytest.mark.parametrize("plant", ["outside", "link", "hard link", "fifo", "other folder", "not a key", "dot name"])
def test_a_planted_group_copies_nothing_from_outside_its_entry(tmp_path, plant):
    """A group file lists absolute paths: one planted in a cache named a secret file, and record copied it into
    the recording and the wheel. Each file is read only from the entry's own folder, as a plain file."""
    from aotpack.runtime import _aotpack_agent as record_agent

    secret = tmp_path / "secret.txt"
    secret.write_text("a key of the user's")
    metadata, group = entry_of(tmp_path)
    entry = tmp_path / "program-cache" / KEY
    if plant == "outside":
        group["k.cubin"] = str(secret)
    elif plant == "link":
        (entry / "k.cubin").unlink()
        (entry / "k.cubin").symlink_to(secret)
    elif plant == "hard link":
        (entry / "k.cubin").unlink()
        os.link(secret, entry / "k.cubin")
    elif plant == "fifo":  # (opened without blocking, refused unread)
        (entry / "k.cubin").unlink()
        os.mkfifo(entry / "k.cubin")
    elif plant == "other folder":  # a folder named like an entry, elsewhere
        other = tmp_path / "elsewhere" / KEY
        other.mkdir(parents=True)
        for name in ("k.json", "k.cubin"):
            (other / name).write_text("{}")
        group = {name: str(other / name) for name in ("k.json", "k.cubin")}
    elif plant == "not a key":
        group = {"secret.txt": str(secret)}
    else:
        group["..k.cubin"] = str(entry / "..k.cubin")
    agent = record_agent.Agent(str(tmp_path / "events"))
    said: list[dict] = []
    agent.sink = said.append
    agent.on_compiled(src=object(), metadata=metadata, metadata_group=group, times=None, cache_hit=True)
    assert [e["event"] for e in said] == ["skipped"], said
    copied = [p for p in (tmp_path / "events").rglob("*") if p.is_file()] if (tmp_path / "events").exists() else []
    assert (
        not [p for p in copied if p.read_bytes() == secret.read_bytes()]
        and not (tmp_path / "events" / "triton-cache").exists()
    )


def test_an_entry_planted_under_a_key_the_package_holds_is_never_loaded(guard, tmp_path):
    """Another user (or anything that wrote the program's Triton cache) put an entry under a key the package holds:
    the package's copy replaces it at the key's first lookup, in each process."""
    planted = tmp_path / "cache" / KEY
    planted.mkdir(parents=True)
    (planted / "k.json").write_text('{"name": "k"}')
    (planted / "k.cubin").write_bytes(b"planted cubin")
    group = {"k.json": str(planted / "k.json"), "k.cubin": str(planted / "k.cubin")}
    (planted / "__grp__k.json").write_text(json.dumps({"child_paths": group}))
    served = guard.Guard(KEY).get_group("k.json")
    assert Path(served["k.cubin"]).read_bytes() == b"\x7fELF cubin"
    assert guard.Guard(KEY).get_file("k.cubin") == served["k.cubin"]  # (a file of it: the package's too)
    assert Path(guard.Guard(KEY).get_file("k.cubin")).read_bytes() == b"\x7fELF cubin"


def test_a_recorded_file_swapped_for_a_link_after_the_recipe_was_read_is_not_shipped(tmp_path):
    """The build checked each file of an entry when it read the recipe and opened it again to pack it: a file
    swapped for a link between the two shipped a host file in the wheel. It is read through the descriptor checked."""
    from aotpack.errors import RecipeError
    from aotpack.pipeline import build

    (tmp_path / "triton-cache" / KEY).mkdir(parents=True)
    (tmp_path / "triton-cache" / KEY / "a.json").write_text(METADATA)
    (tmp_path / "triton-cache" / KEY / "a.cubin").write_bytes(b"cubin")
    (entry,) = read_recipe(tmp_path).triton_cache
    assert build._recorded(entry.folder / "a.cubin") == b"cubin"
    (tmp_path / "secret").write_text("a host file")
    (entry.folder / "a.cubin").unlink()
    (entry.folder / "a.cubin").symlink_to(tmp_path / "secret")
    with pytest.raises(RecipeError, match="not the plain file of the recording it was when the recipe was read"):
        build._recorded(entry.folder / "a.cubin")


@pytest.mark.parametrize("parts", ["fifo", "deep"])
def test_a_package_entry_s_key_parts_that_are_not_one_s_neither_hang_nor_raise(guard, tmp_path, parts):
    """A served entry's __aotpack_key__.json that is a FIFO hung triton.compile; one nested past json's reach
    raised RecursionError into it (issue 58). Such parts are no parts: the entry serves its own key alone."""
    import threading

    from aotpack.runtime import _aotpack_held

    other = tmp_path / "package" / "_triton_cache" / ("C" * 52)
    other.mkdir()
    (other / "k.json").write_text('{"name": "k"}')
    if parts == "fifo":
        os.mkfifo(other / "__aotpack_key__.json")
    else:
        (other / "__aotpack_key__.json").write_text("[" * 100_000 + "]" * 100_000)
    out: list = []
    worker = threading.Thread(target=lambda: out.append(_aotpack_held.kernels("k")), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and [(key, parts) for key, _, parts in out[0]] == [(KEY, {}), ("C" * 52, {})]
