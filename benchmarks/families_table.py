"""The table of benchmarks/families.sh serve: per recording, whether it was served (no compilation: any would have
been refused), its first step against Triton's JIT cold and with its caches warm, and its logits against the cold
JIT's.

    python3 benchmarks/families_table.py OUT/j
"""

import json
import sys
from pathlib import Path


def runs(folder: Path, name: str) -> dict[str, dict]:
    found = {k: folder / f"{name}-{k}.json" for k in ("serve", "warm", "cold")}
    return {k: json.loads(p.read_text()) if p.exists() else {} for k, p in found.items()}


def seconds(run: dict, field: str) -> str:
    value = run.get(field)
    value = value[0] if isinstance(value, list) and value else value
    return f"{value:.1f}" if isinstance(value, float) else "-"


def main(folder: Path) -> None:
    print("| recording | served | first step: served / warm JIT / cold JIT (s) | logits equal to the cold JIT's |"
          " whole run: served / warm / cold (s) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for name in sorted({p.name.rsplit("-", 1)[0] for p in folder.glob("*-serve.json")}):
        r = runs(folder, name)
        served, cold = r["serve"], r["cold"]
        equal = sum(a == b for a, b in zip(served.get("outputs", []), cold.get("outputs", []), strict=False))
        ok = "yes" if served.get("ok") else f"NO: {str(served.get('error', 'no result'))[:300]}"
        first = " / ".join(seconds(r[k], "times") for k in ("serve", "warm", "cold"))
        whole = " / ".join(seconds(r[k], "wall") for k in ("serve", "warm", "cold"))
        print(f"| {name} | {ok} | {first} | {equal} of {len(cold.get('outputs', []))} | {whole} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
