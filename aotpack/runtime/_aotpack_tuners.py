"""What a @triton.autotune wrapper picked, and its run wrapped: ``aotpack record``'s agent reads the picks of each
autotuner around a recorded function, and taps its runs to see the keys; ``activate()`` seeds the recorded picks
through the same wrapped runs. Every Triton release's Autotuner and libraries' subclasses of it.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import sys
from typing import Any

from ._aotpack_identity import jit_of
from ._aotpack_jit import encode


def picks(jit: Any) -> list[dict[str, Any]]:
    """What any @triton.autotune around ``jit`` in its module picked: key -> config. An autotuner whose cache
    cannot be read (``tuned``) raises ValueError saying why."""
    module = sys.modules.get(jit.fn.__module__)
    out = []
    for obj in list(vars(module).values()) if module else ():
        tuner = tuner_of(obj) if obj is not jit and jit_of(obj) is jit else None
        for key, config in tuned(tuner) if tuner is not None else ():
            pick = pick_of(key, config)
            if pick not in out:
                out.append(pick)
    return out


def pick_of(key: tuple[Any, ...], config: Any) -> dict[str, Any]:
    """An autotuner's pick for a key, as JSON."""
    return {"key": [encode(v) for v in key],
            "config": {**{k: encode(v) for k, v in config.kwargs.items()}, "num_warps": config.num_warps,
                       "num_stages": config.num_stages}}  # fmt: skip


def wrap_tuner_runs(autotuner: Any, wrap: Any) -> Any:
    """Give Triton's Autotuner and each subclass with a run of its own (libraries' autotuners, whose run may not
    call Autotuner's), those defined now and those defined later (a hook on Autotuner, chained after one already
    there), the run ``wrap(original)``. Returns the undo."""
    wrapped: list[tuple[type, Any]] = []

    def give(cls: type) -> None:
        original = cls.__dict__["run"]
        wrapped.append((cls, original))
        type.__setattr__(cls, "run", wrap(original))

    previous = autotuner.__dict__.get("__init_subclass__")

    def subclassed(cls: Any, /, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(autotuner, cls).__init_subclass__(**kwargs)
        if "run" in cls.__dict__:
            give(cls)

    todo: list[type] = [autotuner]
    while todo:
        cls = todo.pop()
        if "run" in cls.__dict__:
            give(cls)
        todo += cls.__subclasses__()
    hook = classmethod(subclassed)
    type.__setattr__(autotuner, "__init_subclass__", hook)

    def undo() -> None:
        for cls, original in reversed(wrapped):
            type.__setattr__(cls, "run", original)
        if autotuner.__dict__.get("__init_subclass__") is hook:
            if previous is None:
                type.__delattr__(autotuner, "__init_subclass__")
            else:
                type.__setattr__(autotuner, "__init_subclass__", previous)

    return undo


class KeyTap:
    """An autotuner's cache while its run runs, as ``aotpack record`` sees it: every key the run looks up or
    stores, in order (the last is the run's own key, whatever the autotuner makes its keys of), the cache
    itself unchanged behind it. With the autotuner's ``best_config`` after the run: its pick, also from a cache
    no one can read back (a database)."""

    __slots__ = ("_cache", "keys")

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self.keys: list[Any] = []

    def __contains__(self, key: Any) -> bool:
        self.keys.append(key)
        return key in self._cache

    def __getitem__(self, key: Any) -> Any:
        self.keys.append(key)
        return self._cache[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.keys.append(key)
        self._cache[key] = value

    def get(self, key: Any, *default: Any) -> Any:
        self.keys.append(key)
        return self._cache.get(key, *default)

    def __iter__(self) -> Any:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


def _is_config(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("kwargs", "num_warps", "num_stages"))


def tuned(tuner: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """An autotuner's picks, (key, Config), whatever its cache is: Triton's dict, another mapping, an object a
    key indexes that iterates over its keys, or one that keeps its picks in a dict of its own (libraries'
    Autotuner subclasses: a cache backed by a database that holds in memory what this process picked)."""
    cache = tuner.cache
    items = getattr(cache, "items", None)
    if callable(items):
        found = list(items())
    elif hasattr(cache, "__iter__") and hasattr(cache, "__getitem__"):
        found = [(key, cache[key]) for key in list(cache)]
    else:
        inner = [v for v in vars(cache).values() if isinstance(v, dict) and v and all(map(_is_config, v.values()))]
        if len(inner) != 1:
            raise ValueError(f"its autotuner's cache ({type(tuner).__name__}.cache, a {type(cache).__name__}) "
                             "is no mapping, cannot be iterated and holds no one dict of configs")  # fmt: skip
        found = list(inner[0].items())
    for key, config in found:
        if not isinstance(key, tuple) or not _is_config(config):
            raise ValueError(f"its autotuner's cache ({type(tuner).__name__}.cache) holds {type(key).__name__} -> "
                             f"{type(config).__name__}, not a key tuple -> a triton.Config")  # fmt: skip
    return found


def tuner_of(value: Any) -> Any:
    """The @triton.autotune wrapper in ``value``'s chain of wrappers (@triton.heuristics may sit outside it),
    or None."""
    for _ in range(16):
        if value is None or all(hasattr(value, a) for a in ("cache", "configs", "keys")):
            return value
        value = getattr(value, "fn", None)
    return None
