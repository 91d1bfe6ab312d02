"""`aotpack record` runs a program again while a run changed Dynamo's profile (torch.compile's "PGO" code state,
in the recording's Inductor cache folder): a served process starts with the profile the last run left, and
compiles each frame as that says from its first call, which is not always a graph the first run compiled. The
recipe keeps the last run's torch.compile caches (the graphs such a process finds and those it compiles, the
profile as it is now) and every run's Triton kernels. The program here is a fake ``program.run`` (no torch)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from aotpack import record
from aotpack.commands import cli
from aotpack.errors import RecordError
from aotpack.record import program
from aotpack.runtime import _aotpack_agent as agent
from aotpack.runtime import _aotpack_env
from aotpack.runtime import _aotpack_jit as jit

from .test_inductor_cache import write_set
from .test_record_merge import event

pytestmark = pytest.mark.unit

PROFILE = "code_state_aotpack:None:.pkl"  # where torch 2.11-2.13 keep it, under the job id record sets


class Program:
    """A program as ``program.run`` would run it: run ``n`` compiles add_kernel at BLOCK 256 * n, leaves the
    profile ``profiles[n - 1]`` (None: none), saves a set of torch.compile's caches where ``sets`` and ends with
    ``statuses[n - 1]``."""

    def __init__(self, profiles: list[bytes | None], statuses: list[int] | None = None, stopped: bool = False,
                 sets: bool = True) -> None:  # fmt: skip
        self.profiles, self.statuses, self.stopped, self.sets = profiles, statuses, stopped, sets
        self.runs: list[int] = []
        self.digests: list[str] = []

    def __call__(self, argv: list[str], folder: Path, extra_env: dict[str, str] | None = None) -> record.Outcome:
        number = int((extra_env or {})[_aotpack_env.RECORD_RUN])
        self.runs.append(number)
        events = folder / "events"
        events.mkdir(exist_ok=True)
        # a process of this run, with the id a process of an earlier run had: a file of its own still
        (events / f"{number}-100.jsonl").write_text(json.dumps(event(block=256 * number)) + "\n")
        if self.sets:
            self.digests.append(write_set(events / agent.INDUCTOR, data=f"graphs of run {number}".encode()))
        profile = self.profiles[number - 1]
        if profile is not None:
            (folder / "inductor-cache" / "dynamo").mkdir(parents=True, exist_ok=True)
            (folder / "inductor-cache" / "dynamo" / PROFILE).write_bytes(profile)
        status = self.statuses[number - 1] if self.statuses else 0
        return record.Outcome(status=status, stopped=self.stopped)


def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prog: Program, runs: int = program.RUNS) -> Any:
    monkeypatch.setattr(program, "run", prog)
    return record.record(["python", "prog.py"], tmp_path / "r.yaml", "recorded_kernels", runs=runs)


def sets_in(tmp_path: Path) -> list[str]:
    return sorted(p.stem for p in (tmp_path / "inductor-cache").glob("*.json"))


def blocks(tmp_path: Path) -> list[int]:
    import yaml

    variants = yaml.safe_load((tmp_path / "r.yaml").read_text())["kernels"]["add_kernel"]["variants"]
    return sorted(v["config"]["BLOCK"] for v in variants)


@pytest.mark.parametrize(("profiles", "runs"), [([b"A", b"A"], 2), ([b"A", b"B", b"B"], 3)])
def test_a_run_that_changed_the_profile_is_followed_by_another_until_one_changes_nothing(
    tmp_path, monkeypatch, caplog, profiles, runs
):
    prog = Program(profiles)
    with caplog.at_level(logging.INFO, "aotpack"):
        summary = recorded(tmp_path, monkeypatch, prog)
    assert prog.runs == list(range(1, runs + 1)) and summary.runs == runs
    assert sets_in(tmp_path) == [prog.digests[-1]]  # the last run's caches alone: its profile, its graphs
    assert blocks(tmp_path) == [256 * n for n in range(1, runs + 1)]  # every run's kernels
    assert f"running it again, as a served process starts, to record the graphs it then compiles (run 2 of at " \
           f"most {program.RUNS})" in caplog.text  # fmt: skip
    assert "may compile graphs" not in caplog.text


@pytest.mark.parametrize(("prog", "runs"), [
    (Program([None]), 3),  # no profile: not a torch.compile'd program, or Dynamo keeps none
    (Program([b"A"], sets=False), 3),  # no caches saved
    (Program([b"A"]), 1),  # --runs 1: once, and said
    (Program([b"A"], stopped=True, statuses=[-2]), 3),  # a server stopped by a signal is not started again: said
])  # fmt: skip
def test_the_program_runs_once_where_another_run_would_record_nothing_new_or_is_not_asked(
    tmp_path, monkeypatch, caplog, prog, runs
):
    with caplog.at_level(logging.INFO, "aotpack"):
        summary = recorded(tmp_path, monkeypatch, prog, runs)
    assert prog.runs == [1] and summary.runs == 1 and summary.written
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if prog.profiles[0] is None or not prog.sets:
        assert not said
    else:
        why, fix = (("it was stopped", "record a program that ends by itself") if prog.stopped else
                    ("it ran 1 time (--runs)", "record it with a larger --runs"))  # fmt: skip
        assert len(said) == 1 and said[0].startswith(
            f"run 1 of the program changed torch.compile's profile of which sizes change, and {why}: a served "
            f"process may compile graphs this recording does not hold; {fix}"
        ), said


def test_a_last_run_that_still_changed_the_profile_is_said(tmp_path, monkeypatch, caplog):
    prog = Program([b"A", b"B"])
    summary = recorded(tmp_path, monkeypatch, prog, runs=2)
    assert prog.runs == [1, 2] and summary.runs == 2
    assert "run 2 of the program changed torch.compile's profile" in caplog.text
    assert "it ran 2 times (--runs)" in caplog.text


def test_a_run_again_that_fails_leaves_the_recipe_and_says_which_run(tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text("")
    prog = Program([b"A", b"B"], statuses=[0, 3])
    with pytest.raises(RecordError, match=r"the recorded program exited with status 3 \(run 2: an earlier run "
                       r"changed torch.compile's profile\): .*r\.yaml is left as it was"):  # fmt: skip
        recorded(tmp_path, monkeypatch, prog)
    assert (tmp_path / "r.yaml").read_text() == ""


@pytest.mark.parametrize("value", ["0", "17", "-1", "2.5", "x", ""])
def test_runs_is_a_whole_number_from_1_to_16(value, capsys):
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["record", "-o", "r.yaml", "--runs", value, "--", "python", "p.py"])
    assert "--runs: expected a number of runs of the program: a whole number from 1 to 16" in capsys.readouterr().err


def test_events_of_each_run_go_to_a_file_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv(_aotpack_env.RECORD_RUN, "2")
    assert Path(jit.events_file(str(tmp_path))).name == f"2-{os.getpid()}.jsonl"
