"""The build's progress line: cut to the terminal's width, an ETA at each backend's own pace, plain
lines in a log."""

import io
import os
from types import SimpleNamespace
from typing import Any

import pytest

from aotpack.backends import Artifact, Pruned
from aotpack.commands import cli


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def variant(backend: str, i: int) -> Any:  # a stand-in for plan.Variant
    return SimpleNamespace(kernel=SimpleNamespace(backend=backend), id=f"{backend}/config-{i}/" + "x" * 100)


OK = Artifact(variant_id="v", image=b"", entry="k", shared=0, static_shared=0, num_warps=4, extra_pointer_params=2,
              metadata=())  # fmt: skip


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("aotpack.commands.cli.time.monotonic", lambda: now[0])
    monkeypatch.setattr("aotpack.commands.cli.shutil.get_terminal_size", lambda: os.terminal_size((80, 24)))
    return now


def test_the_eta_runs_each_backend_at_its_own_pace_and_lines_fit_the_terminal(clock):
    planned = [variant("triton", i) for i in range(4)] + [variant("cuda", i) for i in range(2)]
    out = Terminal()
    progress = cli.Progress(quiet=False, stream=out)
    progress.planned(planned)
    for i in range(2):  # two Triton variants, one second each
        clock[0] += 1
        progress(planned[i], OK, False)
    assert progress.eta() == pytest.approx(2 * 1 + 2 * 1)  # no nvcc pace yet: the overall one
    clock[0] += 10
    progress(planned[4], OK, False)  # an nvcc variant takes ten
    assert progress.eta() == pytest.approx(2 * 1 + 1 * 10)  # two Triton at 1 s, one nvcc at 10 s
    progress(planned[2], OK, True)  # from the cache: no time charged
    progress(planned[3], Pruned(variant_id=planned[3].id, reason="too big " * 30), False)
    lines = out.getvalue().replace("\r\033[K", "\n").splitlines()
    assert all(len(line) <= 79 for line in lines) and any(line.endswith("…") for line in lines)
    assert any(line.startswith("pruned triton/config-3/") for line in lines)


def test_a_log_gets_plain_lines(clock):
    planned = [variant("triton", i) for i in range(20)]
    out = io.StringIO()
    progress = cli.Progress(quiet=False, stream=out)
    progress.planned(planned)
    for v in planned:
        clock[0] += 1
        progress(v, OK, False)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("[20/20] 20s, eta 0s, 0 cached, 0 pruned")
    assert "\r" not in out.getvalue()
