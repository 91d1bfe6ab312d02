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

import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from .compiled_small import compiled_small  # noqa: E402

Steps = tuple[tuple[int, int], ...]


def llama(mark: Callable[[str], None], steps: Steps = ((2, 64), (4, 128), (1, 200)),
          prompts: tuple[int, ...] = (1, 3), compiled: bool = False, dynamic: bool | None = None,
          liger: bool = True) -> dict[str, Any]:  # fmt: skip
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if liger:
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        apply_liger_kernel_to_llama(rope=True, swiglu=True, rms_norm=True, fused_linear_cross_entropy=True,
                                    cross_entropy=False)  # fmt: skip
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=704, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    if compiled:  # as training loops and servers run it: Inductor compiles its own kernels and its copies of Liger's
        model.forward = torch.compile(model.forward, dynamic=dynamic)
    out: dict[str, Any] = {}
    mark("ready")
    for step, (batch, seq) in enumerate(steps):
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
        for batch in prompts:
            prompt = torch.randint(0, config.vocab_size, (batch, 16 + batch), device="cuda")
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


def flaggems(mark: Callable[[str], None], shapes: Steps = ((256, 512), (1024, 768))) -> dict[str, Any]:
    """FlagGems as its users run it: aten ops routed to its kernels (``use_gems``): its own autotuner
    (LibTuner, picks in a database-backed cache), its LibEntry launching what the JIT's run returned, kernels
    generated into its code cache at run time, the Hopper matmul on host tensor descriptors, and a package
    whose import needs a GPU."""
    import flag_gems
    import torch

    torch.manual_seed(0)
    out: dict[str, Any] = {}
    mark("ready")
    for i, (m, n) in enumerate(shapes):
        a = torch.randn(m, 384, device="cuda", dtype=torch.bfloat16)  # torch's own generator: the same inputs
        b = torch.randn(384, n, device="cuda", dtype=torch.bfloat16)  # in every run (FlagGems' randn draws per
        x = torch.randn(m, n, device="cuda", dtype=torch.float16)  # the config its autotuner picked)
        with flag_gems.use_gems():
            out[f"mm{i}"] = torch.mm(a, b)
            out[f"abs{i}"] = torch.abs(x)
            out[f"add{i}"] = x + 0.5 * torch.abs(x)
            out[f"softmax{i}"] = torch.softmax(x, dim=-1)
            out[f"sum{i}"] = x.float().sum(dim=1)
            out[f"layer_norm{i}"] = torch.nn.functional.layer_norm(x, (n,))
            if i == 0:
                mark("first_step")
    return out


# a server's requests: batch sizes, lengths and matrix shapes the recording of the workload never saw
Workload = Callable[[Callable[[str], None]], dict[str, Any]]
WORKLOADS: dict[str, Workload] = {"llama": llama, "helion": helion, "fla": fla, "flaggems": flaggems,
             "compiled_small": compiled_small,
             "llama_served": functools.partial(llama, steps=((3, 48), (2, 130), (5, 77)), prompts=(2, 5)),
             "flaggems_served": functools.partial(flaggems, shapes=((200, 512), (768, 1024), (64, 256))),
             # generate() at two batch sizes, as a server warms up: a size the recording never changed is compiled
             # static (Dynamo's profile marks dynamic only what changed), so one batch size serves no other
             "llama_compiled": functools.partial(llama, steps=((2, 64), (2, 64), (4, 128)), prompts=(2, 5),
                                                 compiled=True),
             "llama_compiled_served": functools.partial(llama, steps=((3, 48), (2, 130), (5, 77)), prompts=(3,),
                                                        compiled=True),
             # every size symbolic from the first call (Liger's autograd functions fail in Dynamo under it, torch
             # 2.11, so Inductor's own kernels only). generate() at two batch sizes too: at batch 2 alone the
             # batch equals the KV cache's heads, and Dynamo gives equal sizes one symbol (duck sizing), a graph
             # that serves no other batch. A length that is no multiple of 8 among the training steps: a graph
             # compiled at multiples of 8 alone guards on it (seq % 8 == 0; H200, 2026-11-27) and serves no other.
             # (One graph of generate() was generated anew in every served run, even at the recorded sizes and order:
             # the served process starts with the finished profile, which gives the attention mask's sizes their own
             # symbols where the recording's first run had shared the input ids'; record now runs it again)
             "llama_dynamic": functools.partial(llama, steps=((2, 64), (4, 99), (4, 128), (2, 98)), prompts=(2, 5),
                                                compiled=True, dynamic=True, liger=False),
             "llama_dynamic_served": functools.partial(llama, steps=((3, 48), (2, 130), (5, 77)), prompts=(3,),
                                                       compiled=True, dynamic=True, liger=False),
             # torch.compile'd at a server's rows. With Dynamo's default (static first), a fresh process compiles
             # a graph for the first rows it meets, whose kernels no recording of other rows has: fallback="error"
             # refuses it. Marked dynamic from the first call, Inductor still takes configs and divisibility from
             # the first rows (its size hint): starting at other rows than the recording refuses too (measured,
             # H200 2026-11-27); starting at the recording's first rows, unseen rows after them are to be served
             "compiled_small_marked": functools.partial(compiled_small, marked=True),
             "compiled_small_marked_served": functools.partial(compiled_small, rows=(100, 320), marked=True),
             "compiled_small_marked_grown": functools.partial(compiled_small, rows=(64, 100, 320), marked=True),
             "compiled_small_marked_hinted": functools.partial(compiled_small, rows=(100, 320), marked=True, hint=64),
             "compiled_small_served": functools.partial(compiled_small, rows=(100, 320))}  # fmt: skip
# whose recording serves it
RECORDED_AS = {"llama_served": "llama", "flaggems_served": "flaggems", "compiled_small_served": "compiled_small",
               "compiled_small_marked_served": "compiled_small_marked",
               "compiled_small_marked_grown": "compiled_small_marked",
               "compiled_small_marked_hinted": "compiled_small_marked", "llama_compiled_served": "llama_compiled",
               "llama_dynamic_served": "llama_dynamic"}  # fmt: skip
REFUSED: set[str] = set()  # a workload whose replay stops at its first compilation (none, with torch.compile's caches)


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
    package: Any = None
    if mode == "replay":
        import importlib

        package = importlib.import_module(f"{RECORDED_AS.get(name, name)}_kernels")
        package.activate(fallback=os.environ.get("AOTPACK_WORKLOAD_FALLBACK", "error"))  # (jit: to see a miss)
    times: dict[str, float] = {}

    def mark(event: str) -> None:  # "ready": imports and set-up done; "first_step": its results are there
        torch.cuda.synchronize()
        times[f"{event}_s"] = time.perf_counter() - START

    out = WORKLOADS[name](mark)
    times["step_s"] = times["first_step_s"] - times["ready_s"]
    torch.cuda.synchronize()
    times["total_s"] = time.perf_counter() - START
    folder.mkdir(parents=True, exist_ok=True)
    misses = package.stats()["class_misses"] if package is not None else []  # calls that ran a floor
    # every kernel in Triton's cache, whoever compiled it in whichever process (the JIT, Inductor's workers)
    cache = os.environ.get("TRITON_CACHE_DIR")
    cubins = sum(1 for _ in Path(cache).rglob("*.cubin")) if cache and Path(cache).is_dir() else -1
    report = {**times, "compilations": len(compiled), "cubins": cubins, "compiled": sorted(set(compiled)),
              "class_misses": misses,
              "outputs": {key: digest(value) for key, value in sorted(out.items())}}  # fmt: skip
    (folder / f"{name}-{mode}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k not in ("compiled", "outputs", "class_misses")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
