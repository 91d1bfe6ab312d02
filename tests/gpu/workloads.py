"""Whole workloads for the drop-in path, as their users run them: a transformers Llama with Liger-Kernel patched in
(training steps at several batch sizes and sequence lengths, then a short ``generate()``), Helion kernels with
fixed configs, and fla-core's public functions (autotuned kernels among them).

``python -m tests.gpu.workloads NAME MODE OUT``: MODE ``jit`` runs it under Triton's JIT; ``replay`` imports the
wheel built from its recording (``<NAME>_kernels``) and ``activate(fallback="error")`` first, so that any
compilation fails. Both write ``OUT/NAME-MODE.json``
(the time from the process's start to the end of the first step, ``step_s``: that step alone, after imports and
set-up; the compilations Triton's hooks saw, and each
output's sha256, shape and dtype: what bit-identity compares).
``benchmarks/workloads.sh`` records them on a GPU; ``tests/gpu/test_workloads.py`` replays them."""

from __future__ import annotations

import time

START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def llama(mark: Callable[[str], None]) -> dict[str, Any]:
    import torch
    from liger_kernel.transformers import apply_liger_kernel_to_llama
    from transformers import LlamaConfig, LlamaForCausalLM

    apply_liger_kernel_to_llama(rope=True, swiglu=True, rms_norm=True, fused_linear_cross_entropy=True,
                                cross_entropy=False)  # fmt: skip
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=704, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    out: dict[str, Any] = {}
    mark("ready")
    for step, (batch, seq) in enumerate([(2, 64), (4, 128), (1, 200)]):
        ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        out[f"loss{step}"] = loss.detach().float().cpu()
        out[f"grad{step}"] = torch.cat(
            [p.grad.flatten().float() for p in model.parameters() if p.grad is not None]
        ).cpu()
        optimizer.step()
        optimizer.zero_grad()
        if step == 0:
            mark("first_step")
    model.eval()
    with torch.no_grad():
        for batch in (1, 3):
            prompt = torch.randint(0, config.vocab_size, (batch, 16), device="cuda")
            out[f"generate{batch}"] = model.generate(prompt, max_new_tokens=8, do_sample=False).cpu()
    return out


def helion(mark: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from .helion_kernels import add, softmax

    torch.manual_seed(0)
    out: dict[str, Any] = {}
    mark("ready")
    for i, n in enumerate((4096, 1 << 20)):
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out[f"add{i}"] = add(x, y).cpu()
        if i == 0:
            mark("first_step")
    for i, shape in enumerate(((64, 1024), (100, 1000))):
        out[f"softmax{i}"] = softmax(torch.randn(*shape, device="cuda", dtype=torch.float16)).cpu()
    return out


def fla(mark: Callable[[str], None]) -> dict[str, Any]:
    import torch
    from fla.modules import RMSNorm
    from fla.modules.l2norm import l2norm
    from fla.ops.utils import chunk_local_cumsum

    torch.manual_seed(0)
    out: dict[str, Any] = {}
    norm = RMSNorm(hidden_size=256).to(device="cuda", dtype=torch.bfloat16)
    mark("ready")
    for i, (batch, seq) in enumerate(((2, 64), (1, 300))):
        x = torch.randn(batch, seq, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = norm(x)
        z = l2norm(x)
        (y.float().sum() + z.float().square().sum()).backward()
        assert x.grad is not None
        out[f"rmsnorm{i}"], out[f"l2norm{i}"], out[f"grad{i}"] = y.detach().cpu(), z.detach().cpu(), x.grad.cpu()
        if i == 0:
            mark("first_step")
        g = torch.randn(batch, seq, 4, device="cuda", dtype=torch.float32)
        out[f"cumsum{i}"] = chunk_local_cumsum(g, chunk_size=64).cpu()
    return out


WORKLOADS = {"llama": llama, "helion": helion, "fla": fla}


def digest(tensor: Any) -> list[Any]:
    """A tensor's bytes' sha256, shape and dtype."""
    import hashlib

    data = tensor.detach().contiguous().cpu()
    raw = data.view(-1).view(__import__("torch").uint8).numpy().tobytes() if data.numel() else b""
    return [hashlib.sha256(raw).hexdigest(), list(data.shape), str(data.dtype)]


def main(name: str, mode: str, folder: Path) -> None:
    import torch
    from triton import knobs

    compiled: list[str] = []
    previous = knobs.runtime.jit_cache_hook

    def count(**hook: Any) -> Any:  # every compilation Triton's JIT starts goes through this hook
        compiled.append(f"{hook['fn'].module}:{hook['fn'].name}")
        return previous(**hook) if previous else None

    knobs.runtime.jit_cache_hook = count
    if mode == "replay":
        import importlib

        importlib.import_module(f"{name}_kernels").activate(fallback="error")
    times: dict[str, float] = {}

    def mark(event: str) -> None:  # "ready": imports and set-up done; "first_step": its results are there
        torch.cuda.synchronize()
        times[f"{event}_s"] = time.perf_counter() - START

    out = WORKLOADS[name](mark)
    times["step_s"] = times["first_step_s"] - times["ready_s"]
    torch.cuda.synchronize()
    times["total_s"] = time.perf_counter() - START
    folder.mkdir(parents=True, exist_ok=True)
    report = {**times, "compilations": len(compiled), "compiled": sorted(set(compiled)),
              "outputs": {key: digest(value) for key, value in sorted(out.items())}}  # fmt: skip
    (folder / f"{name}-{mode}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k not in ("compiled", "outputs")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
