"""Triton's own JIT on a machine without a GPU: a stub driver that reports a target, so that ``JITFunction.run(...,
warmup=True)`` binds real argument objects (CPU tensors, ints, None), computes the release's own specialization,
compiles, calls its hooks, and launches nothing. tests/integration/test_jit_identity.py compares its cubins with
aotpack's; ``captured()`` records what a release's jit_cache_hook receives, through aotpack's record agent, for
the fixtures of tests/integration/test_releases.py (``python -m tests.jit_stub`` writes them)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HOOKS = Path(__file__).resolve().parent / "fixtures" / "hooks"  # triton-<version>.json: what each release's hook got


class StubDriver:
    """What JITFunction.run asks the active driver for (device, stream, target); nothing launches in warmup."""

    def __init__(self, capability: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, 32)

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return self.target.arch  # a device per target: the JIT keeps a binder and a cache per device

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


@contextlib.contextmanager
def jit_on(capability: int, cache: str, ptxas: str | None = None) -> Iterator[None]:
    """Triton's JIT compiling for ``capability`` into its own cache, without line info (and with ``ptxas``)."""
    from triton.runtime import driver

    settings = {"TRITON_CACHE_DIR": cache, "TRITON_DISABLE_LINE_INFO": "1",
                "TRITON_DEFAULT_FP_FUSION": "1"}  # 3.9 warns without it (its default, and aotpack's, is on)  # fmt: skip
    if ptxas is not None:
        settings.update(TRITON_PTXAS_PATH=ptxas, TRITON_PTXAS_BLACKWELL_PATH=ptxas)
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    previous = driver._active  # reset_active() would make the default driver, which needs a GPU
    driver.set_active(StubDriver(capability))
    try:
        yield
    finally:
        driver._active = previous
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def calls() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Calls of tests/fixtures/kernels/every_kind.py that make the JIT show every kind of argument and constexpr:
    (arguments, launch options)."""
    import torch
    import triton.language as tl

    from aotpack import model
    from aotpack.recipe import sources as _sources

    kernels = Path(__file__).resolve().parent / "fixtures" / "kernels" / "every_kind.py"
    twice = _sources.load(model.Source(path=kernels, module=None, function="twice"))
    aligned = torch.zeros(64, dtype=torch.float16)
    wide = torch.zeros(64, dtype=torch.float32)
    base = {"a_ptr": aligned, "b_ptr": wide, "n": 64, "m": 3, "scale": 0.5, "flag": True, "NUMBER": 64,
            "RATIO": 0.25, "FLAG": False, "MODE": "fast", "NOTHING": None, "DTYPE": tl.float16, "SHAPE": (1, 2),
            "FN": twice}  # fmt: skip
    return [
        (base, {"num_warps": 4, "num_stages": 3}),
        ({**base, "a_ptr": aligned[1:], "n": 1, "m": 17, "DTYPE": torch.bfloat16}, {"num_warps": 2, "num_stages": 2}),
        ({**base, "b_ptr": None, "m": 1 << 33, "SHAPE": ((1, 2), (3,)), "NOTHING": None}, {"num_warps": 8,
                                                                                         "num_stages": 1}),
        ({**base, "a_ptr": torch.zeros(64, dtype=torch.bfloat16), "n": 48, "FLAG": True, "MODE": "exact"}, {}),
    ]  # fmt: skip


def captured(capability: int, cache: str) -> list[dict[str, Any]]:
    """What the record agent writes for each compilation of ``calls()`` under the installed Triton."""
    from aotpack import model
    from aotpack.backends.triton import introspect
    from aotpack.recipe import sources as _sources
    from aotpack.runtime import _aotpack_agent as record_agent

    kernels = Path(__file__).resolve().parent / "fixtures" / "kernels" / "every_kind.py"
    fn = introspect.unwrap(_sources.load(model.Source(path=kernels, module=None, function="every_kind")))
    events: list[dict[str, Any]] = []
    agent = record_agent.Agent(sink=events.append)
    agent.install()
    try:
        with jit_on(capability, cache):
            for args, options in calls():
                fn.run(grid=(1,), warmup=True, **args, **options)
    finally:
        agent.uninstall()
    return [{k: v for k, v in e.items() if k != "key"} for e in events]  # the key: the JIT's cache key, unstable


def main() -> None:
    import tempfile

    import triton

    with tempfile.TemporaryDirectory() as cache:
        events = captured(90, cache)
    HOOKS.mkdir(parents=True, exist_ok=True)
    path = HOOKS / f"triton-{triton.__version__}.json"
    path.write_text(json.dumps({"triton": triton.__version__, "capability": 90, "events": events}, indent=1,
                               sort_keys=True) + "\n")  # fmt: skip
    print(f"wrote {path}: {len(events)} compilations", file=sys.stderr)


if __name__ == "__main__":
    main()
