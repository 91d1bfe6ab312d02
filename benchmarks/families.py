"""Model families the tests do not name, served (benchmarks/families.sh runs it; docs/dropin.md has the table).

A small random-weight bf16 model of FAMILY (qwen3, mistral, gemma2, olmo2, phi3) from transformers with
Liger-Kernel patched in, its forward eager or torch.compile'd (MODE: eager, default, ro = reduce-overhead), run at
STEPS (batch x length, comma-separated). RUN=jit: Triton's JIT; RUN=serve: the recording's package
(``{FAMILY}_{MODE}_kernels``) activated with fallback="error" before anything compiles. Writes OUT (JSON, or "-"):
per step the wall time and the sha256 of the logits, the Triton cache entries made, Inductor's cache counters, and
the error if any; exits 3 when the run failed.

    python benchmarks/families.py FAMILY MODE RUN OUT STEPS
"""

import hashlib
import json
import os
import sys
import time
import traceback

family, mode, run, out, steps = sys.argv[1:6]
result = {"family": family, "mode": mode, "run": run, "steps": steps, "outputs": [], "times": []}
start = time.perf_counter()
try:
    if run == "serve":
        import importlib

        pkg = importlib.import_module(f"{family}_{mode}_kernels")
        pkg.activate(fallback="error")
    import torch
    import transformers
    from liger_kernel.transformers import monkey_patch as mp

    CONFIGS = {
        "qwen3": (transformers.Qwen3Config, mp.apply_liger_kernel_to_qwen3, {"head_dim": 64}),
        "mistral": (transformers.MistralConfig, mp.apply_liger_kernel_to_mistral, {"head_dim": 64}),
        "gemma2": (transformers.Gemma2Config, mp.apply_liger_kernel_to_gemma2, {"head_dim": 64}),
        "phi3": (transformers.Phi3Config, mp.apply_liger_kernel_to_phi3, {}),
        "olmo2": (transformers.Olmo2Config, mp.apply_liger_kernel_to_olmo2, {}),
    }
    config_cls, patch, extra = CONFIGS[family]
    patch()
    config = config_cls(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        **extra,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16).cuda().eval()
    forward = model.forward
    if mode != "eager":
        forward = torch.compile(model.forward, mode=None if mode == "default" else "reduce-overhead")
    for i, step in enumerate(steps.split(",")):
        b, n = (int(v) for v in step.split("x"))
        g = torch.Generator(device="cpu").manual_seed(1000 + i)
        ids = torch.randint(0, config.vocab_size, (b, n), generator=g).cuda()
        t = time.perf_counter()
        with torch.no_grad():
            logits = forward(input_ids=ids, use_cache=False).logits
            host = logits.float().cpu()
        result["times"].append(time.perf_counter() - t)
        result["outputs"].append(hashlib.sha256(host.numpy().tobytes()).hexdigest()[:16])
    result["ok"] = True
except BaseException as exc:
    result["ok"] = False
    result["error"] = f"{type(exc).__name__}: {exc}"[:3000]
    result["traceback"] = traceback.format_exc()[-4000:]
result["wall"] = time.perf_counter() - start
cache = os.environ.get("TRITON_CACHE_DIR")
if cache and os.path.isdir(cache):
    result["triton_cache_entries"] = len(os.listdir(cache))
try:
    from torch._dynamo.utils import counters

    result["inductor"] = {k: v for k, v in counters["inductor"].items() if "cache" in k}
except Exception:
    pass
if out != "-":
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
print(json.dumps({k: result[k] for k in ("family", "mode", "run", "ok", "wall")}), flush=True)
sys.exit(0 if result["ok"] else 3)
