"""Merging a recording into a recipe as it is written: only what the recording adds changes (targets, kernels,
rows and autotuner picks it lacks, ``widen:`` where --widen adds to it, and a recorded kernel's ``types``,
``args`` and ``options`` where a new row needs them, such as a new dtype). Everything else stays as written
(comments, key order, quoting, keys record does not write, kernels written by hand): ruamel.yaml's round trip
edits those nodes, and only the lines it changed replace the file's. A row already there is kept as written, its
launch count included: the count is what the recording that added the row saw, and re-recording what a recipe
holds leaves the file byte-identical (it is not written at all)."""

from __future__ import annotations

import collections
import contextlib
import difflib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.comments import Comment, CommentedMap, CommentedSeq

from .. import recorded
from ..errors import RecordError
from .existing import Existing
from .kernels import compilations_of, listed
from .yamlio import flow, render, round_trip, said

# where dump writes them
_TOP_ORDER = ("package", "version", "summary", "triton", "triton_cache", "inductor_cache", "widen", "targets",
              "kernels")  # fmt: skip


def merged_text(existing: Existing, path: Path, wanted: dict[str, Any]) -> str | None:
    """``existing``'s text with what ``wanted`` (recipe_data of it and a recording) adds: the targets, kernels,
    rows and autotuner picks it lacks, and a recorded kernel's types, args and options where new rows change
    them. The rest stays as written: ruamel.yaml's round trip changes only those nodes, and only the lines it
    changed replace the file's (``_splice``). None: the recipe holds it all already."""
    assert existing.data is not None and existing.doc is not None
    rt, doc = round_trip(existing.indents), existing.doc
    before = render(rt, doc)
    if said(before) != json.dumps(existing.data, default=str):  # what merging takes of ruamel.yaml's lines
        raise RecordError(f"{path}: ruamel.yaml, which merges a recording into it, would write some of it as "
                          "saying something else; record into another recipe (-o) and merge the two by "
                          "hand")  # fmt: skip
    new = _Verbatim(existing.text)
    if not _merge(new, doc, existing.data, wanted):
        return None
    after = new.fill(render(rt, doc))
    try:
        intended = said(after)
    except yaml.YAMLError as exc:  # aotpack's own edit broke it: a bug, said as such
        raise RecordError(f"merging into {path} would make it unreadable ({exc}); it is left unchanged") from None
    text = _splice(existing.text, before, after)
    with contextlib.suppress(yaml.YAMLError):
        if said(text) == intended:
            return text
    return after  # the file's lines and ruamel.yaml's do not fit together: its rendering whole


def _merge(new: _Verbatim, doc: CommentedMap, data: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Change the round-trip document ``doc`` (loaded as ``data``) into what ``wanted`` says where it adds to
    it; whether anything changed."""
    changed = False  # package, version, summary and every other key it does not add to stay as written
    if "triton" in wanted and "triton" not in data:  # the release the recording ran (one named already stays)
        _put(doc, "triton", wanted["triton"], _TOP_ORDER)
        changed = True
    if "triton_cache" in wanted and "triton_cache" not in data:  # the folder of cache entries (one named stays)
        _put(doc, "triton_cache", wanted["triton_cache"], _TOP_ORDER)
        changed = True
    if "inductor_cache" in wanted and "inductor_cache" not in data:  # torch.compile's caches (one named stays)
        _put(doc, "inductor_cache", wanted["inductor_cache"], _TOP_ORDER)
        changed = True
    if wanted.get("widen", {}) != (data.get("widen") or {}):  # values --widen adds to those kept
        _put(doc, "widen", new(wanted["widen"]), _TOP_ORDER)
        changed = True
    targets = [t for t in wanted.get("targets", ()) if t not in listed(data.get("targets"))]
    if targets and (doc.get("targets") is None or isinstance(doc.get("targets"), str)):  # none yet, or one alone
        _put(doc, "targets", new(wanted["targets"]), _TOP_ORDER)
    elif targets:
        seq, _ = _own(doc, "targets", False)
        keys = [str(t) for t in seq]
        for target in targets:
            _insert(seq, keys, target, target)
    old = data.get("kernels") or {}
    if doc.get("kernels") is None:
        _put(doc, "kernels", CommentedMap(), _TOP_ORDER)
    kernels, shared = _own(doc, "kernels", False)
    keys = [str(k) for k in kernels]
    for name, kernel in wanted["kernels"].items():
        if name not in old:
            _insert(kernels, keys, name, (name, new.kernel(kernel)))
            changed = True
        elif isinstance(old[name], dict) and old[name].get("launch"):  # recorded; one written by hand is as it is
            changed |= _merge_kernel(new, kernels, name, old[name], kernel, shared)
    return changed or bool(targets)


def _merge_kernel(new: _Verbatim, kernels: CommentedMap, name: str, old: dict[str, Any], want: dict[str, Any],
                  shared: bool) -> bool:  # fmt: skip
    """Give a recorded kernel the rows and picks ``want`` adds (its types, args and options with them); a row
    already there stays as written, launch count included, unless new rows rename its type variables."""
    rows = old.get("variants") or []
    have = [_ident(old, row) for row in rows]
    wanted = {_ident(want, row): row for row in want["variants"]}
    added = [row for ident, row in wanted.items() if ident not in have]
    gone = [i for i, ident in enumerate(have) if ident not in wanted]  # what a widened row now covers
    picked = [recorded.pick_order(p) for p in old.get("autotuned") or ()]
    picks = [p for p in want.get("autotuned") or () if recorded.pick_order(p) not in picked]
    if not (added or gone or picks):
        return False
    node, shared = _own(kernels, name, shared)
    for key in ("types", "args", "options"):
        if key in want and want[key] != old.get(key):
            _put(node, key, new(want[key]), recorded.KERNEL_KEYS)
        elif key not in want and key in node:
            del node[key]
    if added or gone:
        if node.get("variants") is None:
            _put(node, "variants", CommentedSeq(), recorded.KERNEL_KEYS)
        seq, _ = _own(node, "variants", shared)
        keys = [recorded.row_order(row) for row in rows]
        for i, ident in enumerate(have):
            if ident in wanted and wanted[ident].get("types") != rows[i].get("types"):
                seq[i], keys[i] = new(wanted[ident]), recorded.row_order(wanted[ident])
        for i in reversed(gone):
            del seq[i], keys[i]
        for row in added:
            _insert(seq, keys, recorded.row_order(row), new(row))
    if picks:
        if node.get("autotuned") is None:
            _put(node, "autotuned", CommentedSeq(), recorded.KERNEL_KEYS)
        seq, _ = _own(node, "autotuned", shared)
        for pick in picks:
            _insert(seq, picked, recorded.pick_order(pick), new(pick))
    return True


def _ident(kernel: dict[str, Any], row: dict[str, Any]) -> tuple[object, ...]:
    """What a row of a recorded kernel compiles, whatever its type variables are named."""
    return compilations_of({"args": kernel.get("args"), "variants": [row]})[0].variant[:-1]


def _insert(into: CommentedSeq | CommentedMap, keys: list[str], key: str, item: Any) -> None:
    """Into a list or mapping in the order dump writes (``keys``: its entries' keys): before the first entry
    whose key sorts after ``key`` (``item``: a mapping's (key, value))."""
    at = next((i for i, k in enumerate(keys) if k > key), len(keys))
    if isinstance(into, CommentedMap):
        into.insert(at, *item)
    else:
        into.insert(at, item)
    keys.insert(at, key)


def _put(mapping: CommentedMap, key: str, value: Any, order: tuple[str, ...]) -> None:
    """``mapping[key] = value``; a new key goes before the first key ``order`` puts after it."""
    if key in mapping:
        mapping[key] = value
        return
    later = [i for i, k in enumerate(mapping) if k in order and order.index(k) > order.index(key)]
    mapping.insert(later[0] if later else len(mapping), key, value)


def _own(parent: CommentedMap, key: str, shared: bool) -> tuple[Any, bool]:
    """``parent[key]``, to change: where an anchor shares it (its own, or a parent's), a copy that takes its
    place, so that the change does not reach the aliases; and whether it was shared."""
    node = parent[key]
    if not shared and node.anchor.value is None:
        return node, False
    mine = type(node)(node)
    node.copy_attributes(mine, memo={})
    mine.yaml_set_anchor(None)
    setattr(node, Comment.attrib, Comment())  # its comments stay where they are written
    parent[key] = mine
    return mine, True


class _Verbatim:
    """What a merge adds, written as dump writes it (flow style; PyYAML's quoting and numbers, which aotpack
    reads with): in the round-trip document a placeholder stands for each value, and ``fill`` writes the
    values in after ruamel.yaml has laid it out (it would write them as YAML 1.2 does, a float can lose its
    last digit)."""

    def __init__(self, text: str) -> None:
        self.prefix = "aotpack_merged_"
        while self.prefix in text:
            self.prefix += "_"
        self.values: list[str] = []

    def __call__(self, value: Any) -> str:
        self.values.append(flow(value))
        return f"{self.prefix}{len(self.values) - 1}x"

    def kernel(self, kernel: dict[str, Any]) -> CommentedMap:
        """A kernel laid out as dump does: a line per key, and per variant and autotuner pick."""
        listed = ("variants", "autotuned")
        return CommentedMap((key, CommentedSeq(map(self, value)) if key in listed and isinstance(value, list)
                             else self(value)) for key, value in kernel.items())  # fmt: skip

    def fill(self, rendered: str) -> str:
        return re.sub(re.escape(self.prefix) + r"(\d+)x", lambda m: self.values[int(m[1])], rendered)


def _splice(text: str, before: str, after: str) -> str:
    """A three-way merge of lines: the file (``text``) and ruamel.yaml's rendering of the merged document
    (``after``), over its rendering of the document as loaded (``before``). A stretch the merge changed takes
    ``after``'s lines, every other keeps the file's: ruamel.yaml writes some of what it leaves alone otherwise
    than the file (a flow list over several lines, ``null``, another indentation), and only where such a line
    touches a change does the stretch take ruamel.yaml's lines."""
    base = before.splitlines(keepends=True)
    versions = [(text if text.endswith("\n") else text + "\n").splitlines(keepends=True), after.splitlines(True)]
    changes = [collections.deque(op[1:] for op in difflib.SequenceMatcher(None, base, lines, autojunk=False)
                                 .get_opcodes() if op[0] != "equal") for lines in versions]  # fmt: skip
    shift = [0, 0]  # how far each version's lines run ahead of ``base``'s
    out: list[str] = []
    copied = 0  # ``base``'s lines up to here are in ``out``
    while changes[0] or changes[1]:
        low = high = min(side[0][0] for side in changes if side)
        taken: list[list[tuple[int, int, int, int]]] = [[], []]
        while any(side and side[0][0] <= high for side in changes):  # changes that overlap or touch: one stretch
            for side, chunk in zip(changes, taken, strict=True):
                while side and side[0][0] <= high:
                    chunk.append(side.popleft())
                    high = max(high, chunk[-1][1])
        out += versions[0][copied + shift[0] : low + shift[0]]
        grown = [sum((j2 - j1) - (i2 - i1) for i1, i2, j1, j2 in chunk) for chunk in taken]
        which = 1 if taken[1] else 0
        out += versions[which][low + shift[which] : high + shift[which] + grown[which]]
        shift = [shift[0] + grown[0], shift[1] + grown[1]]
        copied = high
    return "".join(out + versions[0][copied + shift[0] :])
