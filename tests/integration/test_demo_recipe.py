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
        for target in kernel["targets"]:  # the layer norm is built for Hopper only
            mine = [v for v in kernel["variants"] if v["target"] == target]
            configs = {v["config"] for v in mine}
            assert len(configs) >= 4, (name, target)
    assert written["kernels"]["layernorm"]["targets"] == ["sm_90a"]
    # per kernel: configs x (typical classes + floors) + the classes the H200 table's rows name, x types x targets:
    # add 216, softmax 258, matmul 672 (its typical classes are every subset of M, N, K not 16-divisible),
    # layer norm 208 (sm_90a only), the CUDA RMSNorm's two hint levels 48
    per_kernel = {name: len(k["variants"]) for name, k in written["kernels"].items()}
    assert per_kernel == {"add": 216, "softmax": 258, "matmul": 672, "layernorm": 208, "rmsnorm": 48}
    assert result.variants == sum(per_kernel.values())
