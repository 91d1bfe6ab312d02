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
    # add: 72 (hinted/safe); softmax and matmul, without hints, in the JIT's common classes: 108 (3
    # classes) and 320 (10: every subset of M, N, K odd, and the fallbacks); the CUDA RMSNorm: 48
    assert result.variants == 548
