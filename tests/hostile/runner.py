"""Run hostile cases and classify each.

Every case gets a fresh folder (its project, and ``out/``, the only place it may write besides what the case names
in ``may_write``), a private HOME and cache, stdin at EOF, and runs ``aotpack plan``, the PEP 517 hooks (compiling
stubbed out) or another command line (``cli``: cache, inspect, new, record) either in a forked child of this process
(``fork``: aotpack and Triton already imported, so a case costs milliseconds; a crash or a hang still only takes the
child) or in a fresh interpreter (``subprocess``: exactly what a user runs). Classes:

- GOOD: an ``aotpack: error:`` with an aotpack exit code that locates the problem (``file:line:col``, or the file
  where the input has no lines); or exit 0 for a case the generator marks valid (or open).
- VAGUE: an aotpack error that does not locate it.
- TRACEBACK: a Python traceback, or an exit that is not aotpack's.
- HANG: over the case's budget (1 s for a small input; CPU seconds in fork mode, wall seconds in subprocess
  mode), or killed at the runner's timeout (wall seconds).
- CRASH: killed by a signal.
- WRONG-ACCEPT: exit 0 for a case invalid by construction.
- WRONG-REJECT: an error for a case the generator marks valid (the generator's claim, or the loader, is wrong).
- WRITES: something outside the case's ``out/`` changed (sentinels outside the case, or the case's own files).
- SKIPPED: the case cannot hold here (a full disk is injected in fork mode only), said so in the report.

A "non-root" case (an unreadable file, an unwritable folder) runs as nobody when the runner is root, its folder
theirs but for its ``readonly`` folders.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aotpack import errors

from . import commands
from .generator import Case, Special

CLASSES = ("GOOD", "VAGUE", "TRACEBACK", "HANG", "CRASH", "WRONG-ACCEPT", "WRONG-REJECT", "WRITES", "SKIPPED")
FAILING = ("TRACEBACK", "HANG", "CRASH", "WRONG-ACCEPT", "WRITES")
AOTPACK_EXIT_CODES = set(errors.EXIT_CODES.values())
TIMEOUT = 10.0  # seconds before a child is killed; budgets (1 s) are what classify a HANG
MEMORY = 3 << 30  # address space a fork child may add before MemoryError
_NAMES_A_FILE = re.compile(r"(\S+\.(yaml|yml|json|toml|py|cu)\b|/dev/\w+|\b(recipe|tuning table) \S+)")
_AOTPACK_FRAME = re.compile(r'File "[^"]*/aotpack/[^"]*", line')
_OPTION_ERROR = re.compile(r"^aotpack(?: \w+)?: error: ", re.M)
_LOCATED = re.compile(r"aotpack: error: (?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+): ")

PEP517_DRIVER = """
import json, sys
from pathlib import Path
from aotpack import build_meta, errors
from aotpack.backends.triton import toolchain
from aotpack.pipeline import build as pipeline

def stub_run(rec, options, progress=None):
    wheel = Path(options.out_dir) / f"{rec.package}-stub.whl"
    wheel.write_bytes(b"")
    return pipeline.BuildResult(wheel=wheel, variants=0, pruned=())

def main(settings):
    build_meta.pipeline.run = stub_run  # the hooks' own checks, then no compile
    build_meta.toolchain.needed = lambda *a, **k: None  # no Triton install from an index
    try:
        build_meta.get_requires_for_build_wheel(settings)
        build_meta.build_sdist("out", settings)
        build_meta.build_wheel("out", settings)
    except errors.AotpackError as exc:
        print(f"aotpack: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
"""


@dataclass
class Result:
    case: Case
    cls: str
    rc: int | None
    elapsed: float
    output: str
    note: str = ""
    located: str = ""  # file:line:col the error names
    on_line: bool | None = None  # whether it names the changed line

    def record(self) -> dict[str, Any]:
        last = next((ln for ln in reversed(self.output.splitlines()) if ln.strip()), "")
        out = {**self.case.describe(), "class": self.cls, "rc": self.rc, "elapsed": round(self.elapsed, 3),
               "last_line": last[:400], "note": self.note, "located": self.located, "on_line": self.on_line}  # fmt: skip
        if self.cls in FAILING or self.cls in ("VAGUE", "WRONG-REJECT"):
            out["output"] = self.output[-4000:]
        return out


@dataclass
class Workspace:
    """The run's folder: ``outside/`` (sentinels and link targets beyond every case), ``home/``, ``cases/``."""

    root: Path
    site: Path | None = None  # served cases: where the built package is installed
    driver: Path | None = None  # served cases: the folder of the fake libcuda.so.1
    outside: Path = field(init=False)
    home: Path = field(init=False)

    def __post_init__(self) -> None:
        self.outside, self.home = self.root / "outside", self.root / "home"
        for folder in (self.outside, self.home / ".cache", self.root / "cases", self.root / "logs"):
            folder.mkdir(parents=True, exist_ok=True)
        from .generator import BASES, base_files

        files = {k: v for k, v in base_files(BASES["triton"])[0].items() if isinstance(v, bytes)}
        (self.outside / "copy").write_bytes(files["kernels/add.py"])
        (self.outside / "include").mkdir(exist_ok=True)
        (self.outside / "recipe.yaml").write_bytes(files["recipe.yaml"])
        (self.outside / "kernels").mkdir(exist_ok=True)
        (self.outside / "kernels" / "add.py").write_bytes(files["kernels/add.py"])
        (self.outside / "kernels" / "tuning.py").write_bytes(files["kernels/tuning.py"])
        for rel, data in {**base_files(BASES["table"])[0], **base_files(BASES["cuda"])[0]}.items():
            target = self.outside / "pointed" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                target.write_bytes(data)
            else:
                target.mkdir(exist_ok=True)
        (self.outside / "SENTINEL").write_text("must stay as it is\n")
        (self.home / "SENTINEL").write_text("must stay as it is\n")
        (self.root / "SENTINEL").write_text("must stay as it is\n")
        for folder in (self.root, self.root / "cases"):  # a "non-root" case's user reaches its own folder
            folder.chmod(0o755)
        OUTSIDE[0] = self.outside
        commands.outside_victims(self.outside)
        self.sentinels = self.snapshot_outside()

    def snapshot_outside(self) -> dict[str, tuple[Any, ...]]:
        snap = _snapshot(self.outside, "outside/")
        snap.update(_snapshot(self.home, "home/"))
        snap.update({p.name: _stat(p) for p in self.root.iterdir() if p.name not in ("cases", "logs")})
        return snap


def _stat(p: Path) -> tuple[Any, ...]:
    st = p.lstat()
    digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) and st.st_size < 1 << 20 else ""
    return (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_size, st.st_mtime_ns, digest)


def _snapshot(folder: Path, prefix: str = "", skip: str | None = None) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        rel_dir = os.path.relpath(dirpath, folder)
        if skip is not None and rel_dir.split(os.sep)[0] == skip:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if skip is not None and rel.split(os.sep)[0] == skip:
                continue
            try:
                out[prefix + rel] = _stat(p) if not p.is_fifo() and os.access(p, os.R_OK) else (p.lstat().st_mode,)
            except OSError:
                out[prefix + rel] = ("?",)
    return out


def materialize(case: Case, folder: Path, ws: Workspace) -> None:
    folder.mkdir(parents=True)
    (folder / "out" / "tmp").mkdir(parents=True)
    for rel, data in sorted(case.files().items(), key=lambda kv: kv[0]):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        elif data.kind == "dir":
            path.mkdir(exist_ok=True)
        elif data.kind == "fifo":
            os.mkfifo(path)
        elif data.kind == "symlink":
            target = data.target.replace("@outside", str(ws.outside))
            os.symlink(path.name if target == "." else target, path)
        elif data.kind == "unreadable":
            path.write_bytes(data.data)
            path.chmod(0)
        elif data.kind == "readonly":
            path.mkdir(exist_ok=True)
        elif data.kind == "sparse":
            with path.open("wb") as f:
                f.truncate(data.size)


def _seal(case: Case, folder: Path) -> None:
    """Make the case's ``readonly`` folders (and the folders in them) mode 555, once their files are in."""
    for rel, data in case.files().items():
        if isinstance(data, Special) and data.kind == "readonly":
            for dirpath, _, _ in os.walk(folder / rel):
                os.chmod(dirpath, 0o555)


def _cleanup(folder: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if not p.is_symlink():
                try:
                    p.chmod(0o700)
                except OSError:
                    pass
    shutil.rmtree(folder, ignore_errors=True)


OUTSIDE: list[Path] = [Path("/nonexistent")]  # the run's outside folder (set by Workspace), for _fill
NOBODY = 65534  # who a "non-root" case runs as


def _fill(text: str, folder: Path, outside: Path) -> str:
    return text.replace("{case}", str(folder)).replace("{outside}", str(outside))


def _env(ws: Workspace, folder: Path, case: Case | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOTPACK_", "TRITON_", "XDG_"))}
    env.update(HOME=str(ws.home), XDG_CACHE_HOME=str(ws.home / ".cache"), TMPDIR=str(folder / "out" / "tmp"),
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))  # fmt: skip
    for name, value in case.env if case is not None else ():
        if value == "":
            env.pop(name, None)
        else:  # ({empty}: set, to nothing)
            filled = (
                _fill(value, folder, ws.outside).replace("{site}", str(ws.site)).replace("{driver}", str(ws.driver))
            )
            env[name] = filled.replace("{empty}", "")
    return env


class _FullDisk:
    """A file on a full disk: every write fails with ENOSPC (injected into aotpack's atomic writer)."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def write(self, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


class _OsOnAFullDisk:
    """``os`` as aotpack's atomic writer sees it on a full disk: the files it opens fail every write."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def fdopen(*args: Any, **kwargs: Any) -> _FullDisk:
        return _FullDisk(os.fdopen(*args, **kwargs))


def _inject(case: Case) -> None:
    if case.inject == "stdout-full":  # standard output on a full device: every write of it fails with ENOSPC
        os.dup2(os.open("/dev/full", os.O_WRONLY), 1)
    if case.inject == "full-disk":
        from aotpack import _temp

        setattr(_temp, "os", _OsOnAFullDisk())  # noqa: B010  (a module attribute mypy does not see as one)


def _drop_privileges(case: Case, folder: Path) -> None:
    """Run as nobody: the case's folder becomes theirs (what it makes unreadable stays so: mode 000), except its
    ``readonly`` folders and what is in them, which stay root's."""
    kept = [folder / rel for rel, data in case.files().items() if isinstance(data, Special) and data.kind == "readonly"]
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames, ""]:
            path = Path(dirpath, name) if name else Path(dirpath)
            if not any(path == k or path.is_relative_to(k) for k in kept):
                os.lchown(path, NOBODY, NOBODY)


# ---------------------------------------------------------------- running one case


def _child(case: Case, folder: Path, ws: Workspace, log: Path) -> None:
    """In the forked child: become the command, then leave with its exit code (never return)."""
    rc = 1
    try:
        os.chdir(folder)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        # a test runner may have put its own objects in sys.stdout/sys.stderr: write to the fds themselves
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        os.environ.clear()
        os.environ.update(_env(ws, folder, case))
        tempfile.tempdir = None
        sys.dont_write_bytecode = True
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + MEMORY, hard))
        _inject(case)
        if case.needs == "non-root" and os.geteuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        rc = _command(case)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 1)


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _command(case: Case) -> int:
    if case.command == "served":  # a fresh interpreter (the fake driver loads by LD_LIBRARY_PATH): its CPU time counts
        os.execve(sys.executable, [sys.executable, case.program], dict(os.environ))
    if case.command == "plan":
        from aotpack.commands import cli

        return cli.main(["plan", case.target])
    if case.command == "cli":
        from aotpack.commands import cli

        return cli.main([_fill(a, Path.cwd(), OUTSIDE[0]) for a in case.argv])
    scope: dict[str, Any] = {}
    exec(PEP517_DRIVER, scope)
    return int(scope["main"](case.config_settings))


def _preload() -> None:
    """What every fork child would import anyway, imported once in the parent: every aotpack module (a "non-root"
    case's child runs as a user who may not read this Python's files) and the standard library's lazy parts."""
    import importlib
    import importlib.readers  # importlib.resources.files
    import pkgutil

    import aotpack

    for module in pkgutil.walk_packages(aotpack.__path__, "aotpack."):
        if not module.name.startswith(("aotpack.runtime", "aotpack.templates", "aotpack.__main__")):
            importlib.import_module(module.name)

    try:
        import triton
        import triton.language  # noqa: F401
    except ImportError:
        pass
    try:  # Triton 3.6's specialization imports torch on its first call: every child planning a kernel would
        import torch  # noqa: F401
    except ImportError:
        pass


@dataclass
class _Running:
    case: Case
    folder: Path
    log: Path
    started: float
    before: dict[str, tuple[Any, ...]]
    pid: int = 0
    proc: subprocess.Popen[bytes] | None = None
    killed: bool = False


def _start(case: Case, folder: Path, ws: Workspace, mode: str) -> _Running:
    materialize(case, folder, ws)
    _seal(case, folder)
    if case.needs == "non-root" and os.geteuid() == 0:
        _drop_privileges(case, folder)
    log = ws.root / "logs" / f"{folder.name}.log"
    before = _snapshot(folder, skip="out")
    if mode == "fork":
        sys.stdout.flush()
        sys.stderr.flush()
        # what this process made since the last case (a huge case's files, results) is collected and the rest
        # frozen: a child's first full collection would otherwise walk it, copying every page it touches (measured:
        # ~1.3 s of the child's CPU in every case for minutes after a huge one, each a HANG)
        gc.collect()
        gc.freeze()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case, folder, ws, log)
        return _Running(case, folder, log, started, before, pid=pid)
    if case.command == "served":
        argv = [sys.executable, case.program]
    elif case.command == "plan":
        argv = [sys.executable, "-m", "aotpack", "plan", case.target]
    elif case.command == "cli":
        argv = [sys.executable, "-m", "aotpack", *(_fill(a, folder, ws.outside) for a in case.argv)]
    else:
        argv = [sys.executable, "-c", PEP517_DRIVER + "\nsys.exit(main(json.loads(sys.argv[1])))",
                json.dumps(case.config_settings)]  # fmt: skip
    with log.open("wb") as out:
        started = time.monotonic()
        drop = case.needs == "non-root" and os.geteuid() == 0
        proc = subprocess.Popen(argv, cwd=folder, env=_env(ws, folder, case), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, user=NOBODY if drop else None,
                                group=NOBODY if drop else None, extra_groups=[] if drop else None)  # fmt: skip
    return _Running(case, folder, log, started, before, proc=proc)


def _poll(run: _Running) -> tuple[int | None, float | None]:
    """The raw wait status (fork) or returncode (subprocess) once it ended, else None; and, in fork mode, the
    CPU seconds the child used (what a budget measures: a loaded machine's waiting does not count)."""
    if run.proc is not None:
        return run.proc.poll(), None
    pid, status, usage = os.wait4(run.pid, os.WNOHANG)
    return (None, None) if pid == 0 else (status, usage.ru_utime + usage.ru_stime)


def _kill(run: _Running) -> None:
    run.killed = True
    try:
        if run.proc is not None:
            os.killpg(run.proc.pid, signal.SIGKILL)
        else:
            os.kill(run.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_cases(cases: list[Case], ws: Workspace, mode: str = "fork", jobs: int = 2, timeout: float = TIMEOUT,
              startup: float = 0.0, progress: bool = False) -> list[Result]:  # fmt: skip
    """Run every case, ``jobs`` at a time; ``startup`` is added to budgets (a fresh interpreter's start). A case
    over its budget but not killed runs again alone: a HANG is over its budget both times (a loaded machine's cache
    and memory traffic lengthen even CPU seconds; a superlinear input is slow alone too)."""
    results = _run(cases, ws, mode, jobs, timeout, startup, progress)
    again = [r.case for r in results if r.cls == "HANG" and r.rc is not None and not r.note.startswith("killed")]
    if again:
        alone = {r.case.id: r for r in _run(again, ws, mode, 1, timeout, startup, False)}
        results = [_second(r, alone[r.case.id]) if r.case.id in alone else r for r in results]
    return results


def _second(first: Result, alone: Result) -> Result:
    """The rerun's result, saying the first run's time where the rerun is within its budget."""
    if alone.cls != "HANG":
        alone.note = f"{alone.note + '; ' if alone.note else ''}over budget once under load ({first.note})"
    return alone


def _run(cases: list[Case], ws: Workspace, mode: str, jobs: int, timeout: float, startup: float,
         progress: bool) -> list[Result]:  # fmt: skip
    if mode == "fork":
        _preload()
        # what this process holds (the corpus, Triton) is frozen out of the collector: a child's collection would
        # otherwise walk it all, copying every page it touches (a second of CPU per case, on a full corpus)
        gc.collect()
        gc.freeze()
    results: list[Result] = []
    own = _programs_own_time(cases, ws)
    cases = [replace(c, budget=c.budget + own[c.program_text]) if c.program else c for c in cases]
    pending = list(enumerate(cases))
    running: list[_Running] = []
    done = 0
    while pending or running:
        while pending and len(running) < jobs:
            n, case = pending.pop(0)
            if case.inject and mode != "fork":
                results.append(Result(case, "SKIPPED", None, 0.0, "", f"{case.inject} is injected in fork mode only"))
                continue
            if case.command == "served" and case.needs == "non-root" and not _nobody_runs_python():
                results.append(Result(case, "SKIPPED", None, 0.0, "", f"nobody cannot run {sys.executable} here"))
                continue
            running.append(_start(case, ws.root / "cases" / f"c{n:05d}", ws, mode))
        time.sleep(0.002)
        for run in list(running):
            status, cpu = _poll(run)
            elapsed = time.monotonic() - run.started
            if status is None:
                if elapsed > max(timeout, 2 * run.case.budget):  # (a case allowed more than the timeout)
                    _kill(run)
                continue
            running.remove(run)
            results.append(_finish(run, status, elapsed if cpu is None or run.killed else cpu, ws, mode, startup))
            done += 1
            if progress and done % 500 == 0:
                print(f"{done}/{len(cases)}", file=sys.stderr, flush=True)
    if mode == "fork":
        gc.unfreeze()  # this process's own objects are freed at exit again (nanobind reports leaks otherwise)
    order = {c.id: i for i, c in enumerate(cases)}
    return sorted(results, key=lambda r: order[r.case.id])


def _nobody_runs_python() -> bool:
    """Whether a served case's program, dropped to nobody, can start this Python (its folders theirs to enter)."""
    if os.geteuid() != 0:
        return True
    try:
        probe = subprocess.run([sys.executable, "-c", "pass"], user=NOBODY, group=NOBODY, extra_groups=[],
                               capture_output=True)  # fmt: skip
    except PermissionError:
        return False
    return probe.returncode == 0


def _programs_own_time(cases: list[Case], ws: Workspace) -> dict[bytes, float]:
    """What each recorded program costs alone (CPU seconds of a plain run, no recording): its cases' budgets are
    that plus their own."""
    own: dict[bytes, float] = {}
    for case in cases:
        if case.program and case.program_text not in own:
            with tempfile.TemporaryDirectory(dir=ws.root) as tmp:
                Path(tmp, "prog.py").write_bytes(case.program_text)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                plain = replace(case, env=tuple((k, v) for k, v in case.env if k not in case.names))  # (served)
                (Path(tmp) / "out").mkdir()
                subprocess.run(
                    [sys.executable, "prog.py"], cwd=tmp, env=_env(ws, Path(tmp), plain), capture_output=True
                )
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
            own[case.program_text] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return own


def _finish(run: _Running, status: int, elapsed: float, ws: Workspace, mode: str, startup: float) -> Result:
    output = run.log.read_bytes().decode("utf-8", "replace") if run.log.exists() else ""
    if mode == "fork":
        rc = os.waitstatus_to_exitcode(status)
    else:
        rc = status
    after = _snapshot(run.folder, skip="out")
    changed = sorted(
        k
        for k in set(run.before) | set(after)
        if run.before.get(k) != after.get(k)
        and not any(k == p or k.startswith(p.rstrip("/") + "/") for p in run.case.may_write)
    )
    outside = ws.snapshot_outside()
    touched = sorted(k for k in set(ws.sentinels) | set(outside) if ws.sentinels.get(k) != outside.get(k))
    result = classify(run.case, rc, elapsed, output, run.killed, run.case.budget + startup, run.folder)
    if changed or touched:
        result.cls, result.note = "WRITES", f"changed: {(changed + touched)[:10]}"
        ws.sentinels = outside
    _cleanup(run.folder)
    run.log.unlink(missing_ok=True)
    return result


def classify(case: Case, rc: int | None, elapsed: float, output: str, killed: bool, budget: float,
             folder: Path) -> Result:  # fmt: skip
    if killed:
        return Result(case, "HANG", rc, elapsed, output, f"killed after {elapsed:.1f} s")
    if rc is not None and rc < 0:
        return Result(case, "CRASH", rc, elapsed, output, f"signal {signal.Signals(-rc).name}")
    if case.expect == "served":
        return _served(case, rc, elapsed, output, budget)
    if "Traceback (most recent call last)" in output and (not case.program or _AOTPACK_FRAME.search(output)):
        return Result(case, "TRACEBACK", rc, elapsed, output)  # (a recorded program's own traceback is its output)
    if elapsed > budget:
        return Result(case, "HANG", rc, elapsed, output, f"{elapsed:.2f} s, over its {budget:.1f} s budget")
    if rc == 0:
        if case.expect == "invalid":
            return Result(case, "WRONG-ACCEPT", rc, elapsed, output)
        return Result(case, "GOOD", rc, elapsed, output, "accepted" + (f": {case.reason}" if case.reason else ""))
    option = _OPTION_ERROR.search(output)  # argparse's own: "aotpack cache: error: argument --trim: ..."
    if rc not in AOTPACK_EXIT_CODES or ("aotpack: error:" not in output and not option):
        return Result(case, "TRACEBACK", rc, elapsed, output, "an exit that is not aotpack's")
    if case.expect == "valid":
        return Result(case, "WRONG-REJECT", rc, elapsed, output)
    m = _LOCATED.search(output)
    if m:
        line = int(m["line"])
        on_line = None if case.line is None else line == case.line
        return Result(case, "GOOD", rc, elapsed, output, located=f"{m['file']}:{line}:{m['col']}", on_line=on_line)
    message = output[output.index("aotpack: error:") :] if option is None else output[option.start() :]
    if case.locate == "any" or any(n in message for n in case.names):
        return Result(case, "GOOD", rc, elapsed, output, located="value" if case.locate == "value" else "")
    paths = [a for a in case.argv[1:] if a and not a.startswith("-")] if case.command == "cli" else []
    names_file = case.locate == "file" and bool(
        _NAMES_A_FILE.search(message)
        or str(folder) in message
        or any(_fill(a, folder, OUTSIDE[0]) in message for a in paths)
    )
    if names_file:
        return Result(case, "GOOD", rc, elapsed, output, located="file")
    return Result(case, "VAGUE", rc, elapsed, output)


def _served(case: Case, rc: int | None, elapsed: float, output: str, budget: float) -> Result:
    """A served program's case (tests/hostile/served.py): it ran to its end, its compilation went as the case says
    (refused), and every warning names the variable."""
    lines = output.splitlines()
    if "Traceback (most recent call last)" in output or rc != 0 or "SERVED" not in lines:
        return Result(case, "TRACEBACK", rc, elapsed, output, "the served program did not run to its end")
    said = next((line for line in lines if line.startswith(("refused", "COMPILED"))), "")
    refused_naming = said.startswith("refused ImportError") and any(n in said for n in case.names)
    if not said.startswith(case.must_say) and not refused_naming:
        return Result(
            case, "WRONG-ACCEPT", rc, elapsed, output, f"expected {case.must_say!r}, the program said {said!r}"
        )
    if elapsed > budget:
        return Result(case, "HANG", rc, elapsed, output, f"{elapsed:.2f} s, over its {budget:.1f} s budget")
    from .served import PACKAGE

    warned = [line for line in lines if "Warning:" in line or line.startswith(("aotpack", PACKAGE))]
    if any(not any(n in line for n in case.names) for line in warned):
        return Result(case, "VAGUE", rc, elapsed, output, "a warning that does not name the variable")
    return Result(case, "GOOD", rc, elapsed, output, said[:120])


# ---------------------------------------------------------------- reports


def signature(r: dict[str, Any]) -> str:
    """A failing case's likely root cause: the exception and the innermost aotpack frame, or the key."""
    if r["class"] == "TRACEBACK":
        frames = re.findall(r'File "([^"]*aotpack/[^"]+)", line \d+, in (\w+)', r.get("output", ""))
        where = f"{Path(frames[-1][0]).name}:{frames[-1][1]}" if frames else "?"
        exc = r["last_line"].split(":")[0]
        return f"TRACEBACK {exc} at {where}"
    if r["class"] == "HANG":
        return f"HANG {r['key']} / {r['mutation'].split(':')[0]}"
    if r["class"] in ("WRONG-ACCEPT", "WRONG-REJECT"):
        return f"{r['class']} {r['key']} / {r['mutation']}"
    return f"{r['class']} {r['key']} / {r['mutation']}"


def report(results: list[Result], out: Path | None) -> str:
    records = [r.record() for r in results]
    counts = Counter(r["class"] for r in records)
    lines = [f"{len(records)} cases: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in CLASSES)]
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        by[f"surface {r['surface']}"][r["class"]] += 1
        by[f"mutation {r['mutation'].split(':')[0]}"][r["class"]] += 1
        by[f"key {r['surface']}:{r['key']}"][r["class"]] += 1
    lines.append("")
    for group, c in sorted(by.items()):
        lines.append(f"{group:40s} " + " ".join(f"{k}={v}" for k, v in sorted(c.items())))
    on = [r["on_line"] for r in records if r["on_line"] is not None]
    if on:
        lines.append(f"\nlocated errors naming the changed line: {sum(on)} of {len(on)}")
    causes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["class"] in (*FAILING, "VAGUE", "WRONG-REJECT"):
            causes[signature(r)].append(r)
    lines.append(f"\n{len(causes)} distinct causes among failing and vague cases:")
    for sig, rs in sorted(causes.items(), key=lambda kv: (kv[0].split()[0], -len(kv[1]))):
        lines.append(f"\n[{len(rs)}] {sig}\n    e.g. {rs[0]['id']}  ({rs[0]['note'] or rs[0]['reason']})\n"
                     f"    -> {rs[0]['last_line'][:300]}")  # fmt: skip
    text = "\n".join(lines) + "\n"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"counts": counts, "cases": records}, indent=1))
        (out / "report.txt").write_text(text)
    return text


def startup_time(ws: Workspace) -> float:
    """A fresh interpreter's cost to plan the valid base (added to budgets in subprocess mode)."""
    from .generator import BASES, Case, base_files

    files, _ = base_files(BASES["triton"])
    case = Case(id="startup", surface="-", base="triton", key="-", mutation="-", make_files=lambda: files,
                expect="valid", budget=60)  # fmt: skip
    (res,) = run_cases([case], ws, mode="subprocess", jobs=1)
    return res.elapsed
