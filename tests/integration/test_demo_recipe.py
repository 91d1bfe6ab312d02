"""The main job: recipes/demo.yaml builds into one repaired wheel with every variant compiled."""

import json
import zipfile
from pathlib import Path

import jsonschema

from aotpack import build, manifest

ROOT = Path(__file__).resolve().parents[2]


def test_demo_recipe_builds_every_variant(tmp_path):
    result = build(ROOT / "recipes" / "demo.yaml", tmp_path, jobs=2)
    assert result.wheel.name == "demo_kernels-0.1.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert result.pruned == ()
    with zipfile.ZipFile(result.wheel) as zf:
        written = json.loads(zf.read("demo_kernels/manifest.json"))
    jsonschema.validate(written, manifest.json_schema())
    assert manifest.read_wheel(result.wheel) == written
    for name, kernel in written["kernels"].items():
        for target in ("sm_80", "sm_90a"):
            mine = [v for v in kernel["variants"] if v["target"] == target]
            configs = {v["config"] for v in mine}
            assert len(configs) >= 4, (name, target)
    # per kernel, configs x (typical classes + floors) + dispatched configs x one-argument relaxations, x types
    # x 2 targets: add 6 x (2 + 1) + 6 x 3, x 3 = 216; softmax (6 x 3 + 4 x 5) x 3 = 228; matmul, whose typical
    # classes are every subset of M, N, K not 16-divisible: (8 x 10 + 7 x 11) x 2 x 2 = 628; the CUDA RMSNorm's
    # two hint levels: 48
    assert result.variants == 216 + 228 + 628 + 48
