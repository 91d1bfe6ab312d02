"""The build's progress line: cut to the terminal's width, plain lines in a log, and an ETA at each kernel's own
pace, checked against simulated runs of a pool of compile processes on a fake clock."""

import heapq
import io
import os
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from aotpack.backends import Artifact, Pruned
from aotpack.backends import recipes as recipe
from aotpack.commands.progress import Progress
from aotpack.pipeline.build import compile_order
from aotpack.plan import variants as plan

from ..shared import GOOD


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def variant(backend: str, i: int) -> Any:  # a stand-in for plan.Variant: one kernel per backend
    kernel = SimpleNamespace(name=f"{backend}_kernel", backend=backend)
    return SimpleNamespace(kernel=kernel, id=f"{backend}/config-{i}/" + "x" * 100)


OK = Artifact(variant_id="v", image=b"", entry="k", shared=0, static_shared=0, num_warps=4, extra_pointer_params=2,
              metadata=())  # fmt: skip
# kit.yaml's kernel, and the same kernel again as 'slow' (72 variants each, both Triton)
TWO_KERNELS = GOOD + GOOD.split("kernels:\n", 1)[1].replace("  add:", "  slow:", 1)


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setattr(
        "aotpack.commands.progress.shutil.get_terminal_size", lambda *a, **k: os.terminal_size((80, 24))
    )


def two_kernels(kernel_dir) -> tuple[plan.Variant, ...]:
    variants = plan.plan_variants(recipe.parse(TWO_KERNELS, kernel_dir / "r.yaml"))
    assert [v.kernel.name for v in variants] == ["add"] * 72 + ["slow"] * 72  # the plan goes kernel by kernel
    return variants


def simulate(order: Sequence[Any], cost: dict[str, float], jobs: int) -> list[tuple[float, Any]]:
    """When each variant completes in a pool of ``jobs`` processes taking them in ``order`` (each the next
    variant as it comes free, as a process pool does), a variant of kernel k taking cost[k] seconds."""
    free = [0.0] * jobs
    done = []
    for i, v in enumerate(order):
        start = heapq.heappop(free)
        heapq.heappush(free, start + cost[v.kernel.name])
        done.append((start + cost[v.kernel.name], i, v))
    return [(t, v) for t, _, v in sorted(done, key=lambda d: d[:2])]


def estimates(planned: Sequence[Any], run: list[tuple[float, Any]]) -> list[tuple[float, float, float]]:
    """At each tenth of the run: the Progress's ETA, the ETA at the pace of every compiled variant (what a pace
    per backend gives where every kernel is of one backend), and the true time left."""
    clock = Clock()
    progress = Progress(quiet=True, clock=clock)
    progress.planned(planned)
    found = []
    for done, (t, v) in enumerate(run, 1):
        clock.now = t
        progress(v, OK, False)
        if done % (len(run) // 10) == 0 and done < len(run):
            one_pace = t / done * (len(run) - done)
            found.append((progress.eta(), one_pace, run[-1][0] - t))
    return found


def within(estimate: float, truth: float, factor: float = 1.5) -> bool:
    return truth / factor <= estimate <= truth * factor


@pytest.mark.parametrize("jobs", [1, 4])
def test_the_eta_of_a_build_whose_second_kernel_is_ten_times_as_slow_is_right_from_the_first_tenth(kernel_dir,
                                                                                                   jobs):  # fmt: skip
    """Compiled in compile_order, every kernel's pace is measured from the start: at each tenth of the run the
    ETA is within 1.5x of the time the simulated pool still takes (with 4 processes too: a pace is the wall time
    between completions, which a division by the number of processes would make 4x short). In plan order (kernel by kernel) the first
    tenth has seen only the fast kernel, and no pace can tell what the slow one will cost."""
    planned = two_kernels(kernel_dir)
    cost = {"add": 1.0, "slow": 10.0}
    for eta, _, left in estimates(planned, simulate(compile_order(planned), cost, jobs)):
        assert within(eta, left), (eta, left)
    eta, _, left = estimates(planned, simulate(planned, cost, jobs))[0]
    assert eta < left / 1.5


def test_a_kernel_ahead_of_the_others_goes_at_its_own_pace(kernel_dir):
    """Where completions do not follow the mix of the plan (one kernel all done, as a cluster's scheduler may
    order them), the pace of everything compiled (one backend's) is the fast kernel's and misses the slow
    kernel's remaining time by far more than 1.5x; each kernel at its own pace is right."""
    planned = two_kernels(kernel_dir)
    found = estimates(planned, simulate(planned, {"add": 1.0, "slow": 10.0}, jobs=1))
    eta, one_pace, left = found[5]  # 84 of 144 done: all of 'add', 12 of 'slow'
    assert not within(one_pace, left) and eta == pytest.approx(left)


def test_a_kernel_not_compiled_yet_goes_at_its_backends_pace_else_the_overall_one():
    clock = Clock()
    progress = Progress(quiet=True, clock=clock)
    kernels = [SimpleNamespace(name=n, backend=b) for n, b in (("a", "triton"), ("b", "triton"), ("c", "cuda"))]
    planned: list[Any] = [SimpleNamespace(kernel=k, id=f"{k.name}/{i}") for k in kernels for i in range(2)]
    progress.planned(planned)
    assert progress.eta() == 0  # nothing compiled: no pace yet
    clock.now = 3.0
    progress(planned[0], OK, False)
    assert progress.eta() == pytest.approx(1 * 3 + 2 * 3 + 2 * 3)  # b: Triton's pace; c: no nvcc yet, the overall
    clock.now = 3.0 + 30
    progress(planned[4], OK, False)
    assert progress.eta() == pytest.approx(1 * 3 + 2 * 3 + 1 * 30)


def test_cached_variants_cost_nothing_and_are_no_sample(narrow):
    clock = Clock()
    planned = [variant("triton", i) for i in range(4)]
    progress = Progress(quiet=True, clock=clock)
    progress.planned(planned)
    clock.now = 5.0  # the cache read (and the pool's start) take a while
    progress(planned[0], OK, True)
    progress(planned[1], OK, True)
    assert progress.eta() == 0
    clock.now = 7.0
    progress(planned[2], OK, False)
    assert progress.eta() == pytest.approx(2.0)  # one left, at the 2 s since the last cached one


def test_the_eta_runs_each_backend_at_its_own_pace_and_lines_fit_the_terminal(narrow):
    clock = Clock()
    planned = [variant("triton", i) for i in range(4)] + [variant("cuda", i) for i in range(2)]
    out = Terminal()
    progress = Progress(quiet=False, stream=out, clock=clock)
    progress.planned(planned)
    for i in range(2):  # two Triton variants, one second each
        clock.now += 1
        progress(planned[i], OK, False)
    assert progress.eta() == pytest.approx(2 * 1 + 2 * 1)  # no nvcc pace yet: the overall one
    clock.now += 10
    progress(planned[4], OK, False)  # an nvcc variant takes ten
    assert progress.eta() == pytest.approx(2 * 1 + 1 * 10)  # two Triton at 1 s, one nvcc at 10 s
    progress(planned[2], OK, True)  # from the cache: no time charged
    progress(planned[3], Pruned(variant_id=planned[3].id, reason="too big " * 30), False)
    lines = out.getvalue().replace("\r\033[K", "\n").splitlines()
    assert all(len(line) <= 79 for line in lines) and any(line.endswith("…") for line in lines)
    assert any(line.startswith("pruned triton/config-3/") for line in lines)


def test_a_log_gets_plain_lines():
    clock = Clock()
    planned = [variant("triton", i) for i in range(20)]
    out = io.StringIO()
    progress = Progress(quiet=False, stream=out, clock=clock)
    progress.planned(planned)
    for v in planned:
        clock.now += 1
        progress(v, OK, False)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("[20/20] 20s, eta 0s, 0 cached, 0 pruned")
    assert "\r" not in out.getvalue()


def test_compile_order_spreads_each_kernel_over_the_run_and_keeps_every_variant(kernel_dir):
    planned = two_kernels(kernel_dir)
    order = compile_order(planned)
    assert sorted(order, key=planned.index) == list(planned)
    assert [v.kernel.name for v in order[:4]] == ["add", "slow", "add", "slow"]
    lopsided = planned[:8] + planned[72:74]  # 8 of add, 2 of slow: a slow one in each half
    assert [v.kernel.name for v in compile_order(lopsided)] == "add add slow add add add add slow add add".split()
