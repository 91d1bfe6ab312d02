"""``aotpack inspect WHEEL``: what a built wheel holds, read from its manifest (tables, or --json)."""

from __future__ import annotations

from collections import Counter
from typing import cast

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..errors import WheelError, printable
from ..manifest import HeldOut, Manifest, Selection, type_problem
from ..words import plural


def describe(manifest: Manifest, wheel_name: str, every: bool = False) -> str:
    """``render`` (``every``: each variant id and whole digests too), or one error line when the manifest lacks
    what aotpack writes or holds a field of another type. Every text it shows comes from the wheel, escaped (a
    manifest's terminal escape sequences are shown, not run)."""
    manifest, wheel_name = cast(Manifest, _escaped(manifest)), printable(wheel_name)
    problem = type_problem(manifest)
    if problem is not None:
        raise WheelError(f"{wheel_name}: its manifest's {problem}: aotpack did not write it; rebuild the wheel")
    try:
        return render(manifest, wheel_name, every)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, RecursionError) as exc:
        raise WheelError(
            f"{wheel_name}: its manifest lacks what aotpack writes ({type(exc).__name__}: {exc}); "
            "was it built by another version? rebuild the wheel"
        ) from None


def _escaped(value: object) -> object:
    """``value`` (read from JSON) with each of its texts, keys too, made safe to print (errors.printable)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {printable(str(k)): _escaped(v) for k, v in value.items()}
    return value


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _tags(wheel_name: str) -> str:
    """A wheel file name's tags as the name writes them (``cp39-abi3-manylinux_2_17_x86_64``), "" for a file not
    named as a wheel."""
    try:
        tags = parse_wheel_filename(wheel_name)[3]
    except InvalidWheelFilename:
        return ""
    return "-".join(".".join(sorted({getattr(t, part) for t in tags})) for part in ("interpreter", "abi", "platform"))


def selection_lines(name: str, sel: Selection) -> list[str]:
    """A kernel's rule between measured keys and its held-out error (inspect; tune prints it too)."""

    def held(h: HeldOut) -> str:
        key = "x".join(map(str, h["worst_key"]))
        return f"median {h['median']:.3f}x, worst {h['worst']:.3f}x at {key}, {h['over']} of {h['points']} over 1.05x"

    rule = f"{sel['neighbours']} nearest measured keys" if sel["neighbours"] else "the nearest table row"
    if sel["scale"]:
        rule += f", each config's time scaled by its work to the power {sel['scale']:g} in tiles " + ", ".join(
            sel["tiles"]
        )
    if sel.get("occupancy"):
        rule += ", programs in waves of " + ", ".join(f"{o} per SM ({c})" for c, o in sel["occupancy"].items())
    if sel.get("own_occupancy"):
        rule += ", programs in waves of as many of each variant's blocks as fit on an SM (registers, warps, shared)"
    if sel.get("fixed"):
        rule += f", each program's work the elements of its loops plus {sel['fixed']}"
    on = "at keys drawn as calls are (tune.validate), by the rule chosen without them: " if sel.get("drawn") else ""
    lines = [f"  {name}: {rule}; held-out {on}{held(sel['held_out'])}"]
    if sel["neighbours"]:
        lines.append(f"  {' ' * len(name)}  (the nearest-row rule's: {held(sel['nearest'])})")
    return lines


def render(manifest: Manifest, wheel_name: str, every: bool = False) -> str:
    out = [
        f"{manifest['package']} {manifest['version']}  (built by aotpack {manifest['aotpack']}; {_tags(wheel_name)})",
        "targets (and the NVIDIA driver their code needs): "
        + ", ".join(f"{t} (CUDA {v}+)" for t, v in sorted(manifest["min_driver_cuda"].items())),
        "",
        _table([["toolchain", "version"], *([k, v] for k, v in sorted(manifest["toolchain"].items()))]),
        "",
    ]
    rows = [["kernel", "source", "types", "key", "variants", "pruned", "dispatch rows", "per target"]]
    for name, k in sorted(manifest["kernels"].items()):
        per_target = Counter(v["target"] for v in k["variants"])
        rows.append([
            name, k["source"], " ".join(f"{t}={'|'.join(c)}" for t, c in k["types"].items()) or "-",
            ", ".join(n for n, _ in k["key"]) + f" ({k['bucket']})" if k["key"] else "-",
            str(len(k["variants"])), str(len(k["pruned"])), str(len(k["dispatch"])),
            " ".join(f"{t}:{n}" for t, n in sorted(per_target.items())),
        ])  # fmt: skip
    out += [_table(rows), ""]
    # what each class assumes, in Triton's JIT terms (D: 16-divisible or aligned, 1: equal to 1, N: None)
    out += ["specialization classes (most specialized first; a class's letters follow the arguments' order):"]
    for name, k in sorted(manifest["kernels"].items()):
        order = [a["name"] for a in k.get("args", [])]
        for spec in k.get("specializations", []):
            assumes = spec["assumes"]  # (the manifest's keys are sorted: shown in the kernel's argument order)
            shown = [a for a in order if a in assumes] + sorted(set(assumes) - set(order))
            terms = " ".join(f"{arg}={assumes[arg]}" for arg in shown) or "nothing assumed"
            out.append(f"  {name} {spec['name']}: {terms}")
    out.append("")
    chosen = [(name, k["selection"]) for name, k in sorted(manifest["kernels"].items()) if "selection" in k]
    if chosen:  # how the dispatcher picks between the keys its tables measured (aotpack/selection.py)
        out += ["dispatch between measured keys (held-out: each measured key predicted by the rule the other three "
                "quarters of the keys chose; the config picked over the fastest):"]  # fmt: skip
        out += [line for name, sel in chosen for line in selection_lines(name, sel)] + [""]
    shipped = manifest.get("triton_cache") or []
    if shipped:  # what activate() serves as Triton cache hits (torch.compile's kernels, Triton's modules)
        kinds = Counter(e["target"] for e in shipped)
        out += [f"Triton cache entries: {len(shipped)} ("
                + ", ".join(f"{n} {t}" for t, n in sorted(kinds.items())) + ")", ""]  # fmt: skip
    graphs = manifest.get("inductor_cache") or []
    if graphs:  # what activate() loads into torch.compile's caches
        torches = ", ".join(sorted({g["torch"] for g in graphs}))
        size = sum(g["size"] for g in graphs) / 1e6
        cpp, held = sum(g.get("cpp_kernels", 0) for g in graphs), sum(g.get("cpp_objects", 0) for g in graphs)
        objects = plural(held, "shared object")
        said = (f"; their graphs call for C++ kernels of Inductor's ({plural(cpp, 'call')}), {objects} of them held "
                "(for the recording's CPU and Python; any other needs a C++ compiler where served)")  # fmt: skip
        said = said if cpp else ""
        out += [f"torch.compile's caches: {plural(len(graphs), 'set')} of torch {torches} ({size:.2f} MB){said}", ""]
    pruned = [(name, p) for name, k in sorted(manifest["kernels"].items()) for p in k["pruned"]]
    if pruned:
        out += ["pruned variants:", *(f"  {p['id']}: {p['reason']}" for _, p in pruned), ""]
    if every:
        out += [
            "variants:",
            *(f"  {v['id']}" for _, k in sorted(manifest["kernels"].items()) for v in k["variants"]),
            "",
        ]
    digits = None if every else 16
    out += [_table([["source", "sha256"], *([p, d[:digits]] for p, d in sorted(manifest["sources"].items()))])]
    return "\n".join(out)
