"""Writing a recording: the recipe written anew (``recipe_text``) or merged into the one there
(``merge.merged_text``), the sources it names written out beside it (``kernels/``) and the Triton cache entries
of kernels compiled outside the JIT (``triton_cache:``, ``triton-cache/<key>/`` by default), each file
atomically."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

from .._temp import atomic_file
from ..backends import recipes as recipe
from ..backends.triton import introspect
from ..errors import AotpackError, RecordError
from ..model import Source
from ..plan.variants import plan_variants
from ..recipe import inductor_cache, sources, yamlnodes
from ..runtime._aotpack_identity import identity
from ..values import Widened
from .events import Compilation, Events, Json
from .existing import existing_recipe
from .kernels import recipe_data
from .merge import merged_text
from .yamlio import dump

log = logging.getLogger("aotpack")


def write(path: Path, events: Events, package: str, merge: bool = True,
          widen: dict[str, list[Widened]] | None = None, check: bool = True) -> bool:  # fmt: skip
    """Write the recipe of a recording to ``path``, merged into what is there (``widen``: constexprs given sets
    of values), with the sources it names written out beside it (``kernels/``; each file atomically). False:
    the recipe already held all of it, and was not written. ``check``: the recipe is read and planned as
    ``aotpack build`` will before it is written (``_check``)."""
    existing = existing_recipe(path) if merge else None
    compiled = events.compilations()
    dropped, widen = events.skipped, widen or {}
    if existing is None or existing.data is None:  # a new recipe (under the comments of an empty file)
        lines = (existing.text if existing else "").splitlines(keepends=True)
        kept = "".join(line for line in lines if line.lstrip().startswith("#"))
        data = recipe_data(
            compiled,
            events.picks,
            None,
            package,
            widen,
            dropped,
            events.tritons,
            [c.target for c in events.cached.values()],
            inductor=bool(events.inductor),
        )
        text: str | None = kept + dump(data)
    else:
        cached = [c.target for c in events.cached.values()]
        data = recipe_data(compiled, events.picks, existing.data, package, widen, dropped, events.tritons, cached,
                           _identities(existing.data, path.parent), inductor=bool(events.inductor))  # fmt: skip
        text = merged_text(existing, path, data)
    added = _write_entries(path.parent / str(data.get("triton_cache")), events) if events.cached else False
    if events.inductor:
        added = _write_sets(path.parent / str(data.get("inductor_cache")), events.inductor) or added
    for name in sorted(_kernel_sources(data) | _function_sources(compiled)):  # before the recipe that names them
        source = path.parent / "kernels" / name
        if name in events.sources and not (source.is_file() and source.read_bytes() == events.sources[name].encode()):
            source.parent.mkdir(exist_ok=True)
            with atomic_file(source) as f:
                f.write(events.sources[name].encode())
    if text is None:
        return added
    if check:
        _check(text, path, data)
    with atomic_file(path) as f:
        f.write(text.encode())
    return True


def _check(text: str, path: Path, data: dict[str, Any]) -> None:
    """The recipe about to be written, read and planned as ``aotpack build`` will: one that the build would refuse
    is not written (a fault of record's, said as one; the recording is kept beside it). Where this Python cannot
    load its kernels (a program recorded in another environment: its libraries, or Triton, missing here), it is
    not planned here, and that is said."""
    modules = {str(k.get("triton")).rpartition(":")[0] for k in (data.get("kernels") or {}).values()
               if isinstance(k, dict)}  # fmt: skip
    missing = sorted(m for m in {"triton", *modules} if "/" not in m and not m.endswith(".py") and not _found(m))
    if missing:
        log.info("the recipe is not planned before it is written: %s cannot be imported here (aotpack plan %s, where "
                 "it builds, plans it)", ", ".join(missing), path)  # fmt: skip
        return
    try:
        plan_variants(recipe.from_nodes(yamlnodes.parse(text, path, "recipe"), path))
    except AotpackError as exc:
        raise RecordError(f"aotpack record made a recipe that aotpack build refuses ({exc}); this is a fault of "
                          "aotpack's: please report it with what was recorded") from None  # fmt: skip


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (a parent package that fails to import)
        return False


def _identities(data: dict[str, Any], root: Path) -> dict[str, str]:
    """``activate()``'s source identity of each kernel of the recipe whose function loads here -> its name (the
    first of a source named twice): what a recording matches its functions by, however the recipe spells them."""
    out: dict[str, str] = {}
    for name, kernel in (data.get("kernels") or {}).items():
        ref = kernel.get("triton") if isinstance(kernel, dict) else None
        where, sep, function = ref.rpartition(":") if isinstance(ref, str) else ("", "", "")
        if not (sep and where and function):
            continue
        file = where.endswith(".py") or "/" in where
        source = Source(path=root / where if file else None, module=None if file else where, function=function)
        try:
            fn = introspect.unwrap(sources.load(source))
        except Exception:  # (the recipe's own module, imported: whatever it raises, it is matched by its text)
            continue
        if fn is not None:
            out.setdefault(identity(fn), str(name))
    return out


def _write_entries(folder: Path, events: Events) -> bool:
    """The cache entries the recording copied, each file the agent listed, into ``folder/<key>/`` (a file there
    already is Triton's for the same key: kept); whether any was added."""
    if events.entries is None:
        return False
    copied = [_copy_new(events.entries / key / name, folder / key / name)
              for key, entry in sorted(events.cached.items()) for name in entry.files]  # fmt: skip
    return any(copied)


def _write_sets(folder: Path, sets: tuple[Path, ...]) -> bool:
    """torch.compile's caches each process saved, into ``folder`` (``<digest>.bin``, the shared objects of C++
    kernels its ``.json`` lists, then the ``.json``; a file there already is the same bytes: kept); whether any was
    added."""
    files = [f for data in sets for f in (data, *_objects(data.with_suffix(".json")), data.with_suffix(".json"))]
    return any([_copy_new(file, folder / file.name) for file in files])


def _objects(meta: Path) -> list[Path]:
    """The C++ kernels' shared objects a set's .json lists (one the agent could not describe: none; the recipe
    reader then says what is wrong with the set)."""
    try:
        names = inductor_cache.listed_objects(json.loads(meta.read_bytes()).get("cpp"))
    except (OSError, ValueError, AttributeError):
        return []
    return [meta.parent / f"{name}.cpp" for name in names]


def _copy_new(source: Path, target: Path) -> bool:
    """``source`` written atomically to ``target`` where no file is there (a file named by its content's key or
    digest holds the same bytes); whether it was."""
    if target.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(target) as f:
        f.write(source.read_bytes())
    return True


def _kernel_sources(data: dict[str, Any]) -> set[str]:
    """The written-out files the recipe's kernels name (a kernel recorded by module path keeps it)."""
    refs = [str(k.get("triton")) for k in data["kernels"].values() if isinstance(k, dict)]
    return {ref.split("/", 1)[1].partition(":")[0] for ref in refs if ref.startswith("kernels/")}


def _function_sources(compiled: list[Compilation]) -> set[str]:
    """The written-out files that constexprs name (functions passed to kernels)."""
    out: set[str] = set()

    def visit(value: object) -> None:
        ref = value.get("function") if isinstance(value, dict) else None
        if isinstance(ref, str) and ref.startswith("kernels/"):
            out.add(ref.split("/", 1)[1].partition(":")[0])
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    for c in compiled:
        for _, value in c.constexprs:
            visit(value)
    return out


def recipe_text(compiled: list[Compilation], picks: dict[str, list[Json]],
                existing: dict[str, Any] | None = None, package: str = "recorded_kernels",
                widen: dict[str, list[Widened]] | None = None,
                dropped: dict[str, str] | None = None) -> str:  # fmt: skip
    """The recipe (YAML text, as a new file has it) of these compilations, merged into ``existing`` (a loaded
    recipe); what the recipe cannot say goes into ``dropped`` (what -> why)."""
    return dump(recipe_data(compiled, picks, existing, package, widen, dropped))
