"""What `aotpack record` gives the recorded program's environment, for every process it starts: the agent first
on the path, Triton's cache manager the Recorder (behind it the program's own), and an empty Inductor cache."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from aotpack.record import program


class Started(Exception):
    pass


def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **given: str) -> dict[str, str]:
    seen: dict[str, Any] = {}

    def popen(cmd: list[str], env: dict[str, str]) -> Any:
        seen.update(env)
        raise Started

    for name, value in given.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(Started):
        program.run(["python", "-c", "pass"], tmp_path)
    return seen


def test_every_process_records_through_triton_s_cache_manager_with_an_empty_inductor_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_CACHE_MANAGER", raising=False)
    env = environment(monkeypatch, tmp_path, TORCHINDUCTOR_CACHE_DIR="/warm/inductor")
    assert env["TRITON_CACHE_MANAGER"] == "_aotpack_recording._aotpack_guard:Recorder"
    assert "AOTPACK_RECORDED_CACHE_MANAGER" not in env
    # importable where the agent is, by that name: the runtime's files as a package, under their own names
    assert (tmp_path / "agent" / "_aotpack_recording" / "_aotpack_guard.py").is_file()
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor-cache")  # a graph it held hides its kernels
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path / "agent")


def test_the_program_s_own_cache_manager_stays_behind_the_recorder(monkeypatch, tmp_path):
    env = environment(monkeypatch, tmp_path, TRITON_CACHE_MANAGER="mine:Manager")
    assert env["TRITON_CACHE_MANAGER"] == "_aotpack_recording._aotpack_guard:Recorder"
    assert env["AOTPACK_RECORDED_CACHE_MANAGER"] == "mine:Manager"
