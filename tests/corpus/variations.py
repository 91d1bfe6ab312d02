"""Equivalent recipes: every corpus kernel (tests/corpus/thirdparty.yaml) written the other ways users write
it, generated, so that what is checked is the class of recipes, not the one the corpus happens to use.

Each variation rewrites a kernel's entry into one that means the same for the calls its library makes
(contiguous, aligned tensors):
- ``hints``: pointers ``*T:16``; integers ``:16`` where the kernel's common call (its first benchmark shape)
  has them 16-divisible, ``:1`` where it has them equal to 1 (the README's first example does this);
- ``spans``: extents written as spans: a 1-D tensor's ``n`` as ``(n - 1) * s + 1`` with its stride
  argument, a bare innermost size ``C`` as ``(C - 1) * 1 + 1``;
- ``products``: a 2-D span ``(R - 1) * S + C`` as ``R * C``;
- ``explicit``: the stride arguments of 1-D tensors lose their default (callers pass them);
- ``defaults``: a size read off one tensor is read off another of the same size in the kernel's common call
  (``size(X, 1)`` as ``size(Y, 1)``, or ``numel(W)`` for a 1-D W);
- ``hints_spans``: both (the recipe a user wrote after the README's first example: ``:16`` everywhere it holds,
  the 1-D output's extent ``(n_rows - 1) * RSTD_row_stride + 1``);
- ``all``: every variation at once.
A variation that changes nothing in a kernel is left out. ``python -m tests.corpus.variations [--one-dtype] OUT``
writes the recipe of every variation (package ``variations_kernels``, kernels ``<kernel>__<variation>``;
``make variations-matched`` builds it for the GPU tests and the benchmark).
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aotpack import expr

from . import cases

CORPUS = Path(__file__).resolve().parent / "thirdparty.yaml"
Entry = dict[str, Any]


def _args(entry: Entry) -> dict[str, dict[str, Any]]:
    """The entry's arguments, each as a mapping (a bare type string becomes {type: ...})."""
    args = entry["args"]
    for name, value in list(args.items()):
        if isinstance(value, str):
            args[name] = {"type": value}
    return args


def hints(entry: Entry, common: Common) -> None:
    jit = common.jit
    for name, arg in _args(entry).items():
        kind = arg["type"]
        if arg.get("launch_only") or ":" in kind:
            continue
        if kind.startswith("*"):
            arg["type"] = f"{kind}:16"
        elif kind in ("i32", "i64") and jit.get(name) in ("D", "1"):
            arg["type"] = f"{kind}:{16 if jit[name] == 'D' else 1}"


def _terms(e: expr.Expr) -> list[expr.Expr]:
    if isinstance(e, expr.BinOp) and e.op == "+":
        return _terms(e.left) + _terms(e.right)
    return [e]


def _is_span_term(e: expr.Expr) -> bool:
    return isinstance(e, expr.BinOp) and e.op == "*" and "- 1)" in expr.unparse(e)


def spans(entry: Entry, common: Common) -> None:
    args = _args(entry)
    for name, arg in args.items():
        if "extent" not in arg or not arg["type"].startswith("*"):
            continue
        e = expr.parse(arg["extent"])
        terms = _terms(e)
        if any(_is_span_term(t) for t in terms):
            bare = [t for t in terms if not _is_span_term(t) and not (isinstance(t, expr.Num) and t.value == 1)]
            if len(bare) == 1:
                rest = " + ".join(expr.unparse(t) for t in terms if t is not bare[0])
                arg["extent"] = f"{rest} + ({expr.unparse(bare[0])} - 1) * 1 + 1"
        elif not (isinstance(e, expr.Call) and e.func == "numel") and not (isinstance(e, expr.BinOp) and e.op == "*"):
            stride = next((n for n, a in args.items() if a.get("default") == f"stride({name}, 0)"), None)
            if stride is not None:
                arg["extent"] = f"({expr.unparse(e)} - 1) * {stride} + 1"


def products(entry: Entry, common: Common) -> None:
    for arg in _args(entry).values():
        if "extent" not in arg:
            continue
        terms = _terms(expr.parse(arg["extent"]))
        spanned = [t for t in terms if _is_span_term(t)]
        inner = [t for t in terms if not spanned or t is not spanned[0]]
        if len(terms) == 2 and len(spanned) == 1 and not isinstance(inner[0], expr.Num):
            assert isinstance(spanned[0], expr.BinOp)
            rows = spanned[0].left if "- 1)" in expr.unparse(spanned[0].left) else spanned[0].right
            assert isinstance(rows, expr.BinOp)
            arg["extent"] = f"{expr.unparse(rows.left)} * {expr.unparse(inner[0])}"


def _int_default(arg: dict[str, Any]) -> expr.Expr | None:
    """An integer argument's default expression (None for other arguments, or none given)."""
    integer = arg["type"].split(":")[0] in ("i32", "i64")
    return expr.parse(arg["default"]) if integer and isinstance(arg.get("default"), str) else None


def explicit(entry: Entry, common: Common) -> None:
    for arg in _args(entry).values():
        default = _int_default(arg) if not arg.get("launch_only") else None
        if isinstance(default, expr.Call) and default.func == "stride":
            tensor = common.tensors[0].get(expr.unparse(default.args[0]))
            if tensor is not None and tensor.dim() == 1:
                del arg["default"]


def defaults(entry: Entry, common: Common) -> None:
    """``size(t, d)`` as another tensor's size that equals it in every test call (the first found, in the
    arguments' order): ``numel(u)`` of a 1-D tensor u, or ``size(u, e)``. Optional tensors are not read."""
    args = _args(entry)
    for arg in args.values():
        default = _int_default(arg)
        if not (isinstance(default, expr.Call) and default.func == "size" and isinstance(default.args[1], expr.Num)):
            continue
        tensor, dim = expr.unparse(default.args[0]), default.args[1].value
        for other in (
            n for n, a in args.items() if n != tensor and a["type"].startswith("*") and not a.get("optional")
        ):
            calls = [(c[tensor].size(dim), c[other]) for c in common.tensors if other in c]
            if len(calls) < len(common.tensors):
                continue
            if all(t.dim() == 1 and t.numel() == length for length, t in calls):
                arg["default"] = f"numel({other})"
                break
            same = [e for e in range(calls[0][1].dim()) if all(t.size(e) == length for length, t in calls)]
            if same:
                arg["default"] = f"size({other}, {same[0]})"
                break


# in the order "all" applies them (a span is made of what products left; explicit drops what spans read)
VARIATIONS: dict[str, Callable[[Entry, Common], None]] = {
    "hints": hints, "products": products, "spans": spans, "explicit": explicit, "defaults": defaults}  # fmt: skip


@dataclass(frozen=True)
class Common:
    """A kernel's contiguous calls, on the CPU: the JIT's class of the common one (its first benchmark shape),
    from Triton's own binder, and each call's tensors by argument name (every test shape)."""

    jit: dict[str, str]
    tensors: list[dict[str, Any]]


def common_calls() -> dict[str, Common]:
    import torch

    saved, cases.DEVICE = cases.DEVICE, "cpu"
    try:
        out = {}
        for kernel, (case, dtypes, shapes, odd, _) in cases.CASES.items():
            calls = []
            for shape in [*shapes, *odd]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    calls.append(case(torch, shape, getattr(torch, dtypes[0]), "contiguous"))
            args = [call.jit_kwargs({}) for call in calls]
            out[kernel] = Common(cases.jit_class(cases.jit_function(calls[0].source), args[0]),
                                 [{n: v for n, v in a.items() if isinstance(v, torch.Tensor)} for a in args])  # fmt: skip
        return out
    finally:
        cases.DEVICE = saved


def generate(common: dict[str, Common], one_dtype: bool = False) -> dict[str, Any]:
    """The recipe of every variation of every corpus kernel; ``one_dtype``: each type variable keeps its first
    dtype (for a GPU build of half the size)."""
    corpus = yaml.safe_load(CORPUS.read_text())
    kernels: dict[str, Any] = {}
    for name, entry in corpus["kernels"].items():
        if one_dtype:
            entry["types"] = {var: dtypes[:1] for var, dtypes in entry["types"].items()}
        seen = [entry]
        ways: list[tuple[str, list[Callable[[Entry, Common], None]]]] = [(v, [f]) for v, f in VARIATIONS.items()]
        ways += [("hints_spans", [hints, spans]), ("all", list(VARIATIONS.values()))]
        for variation, rewrites in ways:
            changed = copy.deepcopy(entry)
            for rewrite in rewrites:
                rewrite(changed, common[name])
            if changed not in seen:
                seen.append(changed)
                kernels[f"{name}__{variation}"] = changed
    return {"package": "variations_kernels", "version": "0.1.0", "targets": corpus["targets"],
            "summary": "The corpus kernels' recipes written other equivalent ways", "kernels": kernels}  # fmt: skip


def main() -> None:
    out = Path(sys.argv[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(generate(common_calls(), "--one-dtype" in sys.argv), sort_keys=False, width=120))
    print(f"wrote {out}: {len(yaml.safe_load(out.read_text())['kernels'])} kernels")


if __name__ == "__main__":
    main()
