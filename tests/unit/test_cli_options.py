"""The command line holds together: every verb takes -q and -v (not both), every argument says what it is for, a
usage error exits 2 whatever the verb, `plan --json` is the document docs/cli.md describes, and counts are
written as counted ("1 variant", never "1 variants")."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aotpack.backends import Pruned
from aotpack.commands import cli
from aotpack.errors import TuneError, UsageError
from aotpack.pipeline import cache
from aotpack.words import plural

from .test_codegen import fake_build

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "recipes" / "demo.yaml")


def verbs() -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_parser_has_the_verbs_main_runs() -> None:
    assert set(verbs()) == set(cli.COMMANDS)


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_every_verb_takes_quiet_or_verbose_one_excluding_the_other(verb: str) -> None:
    parser = verbs()[verb]
    options = {s: a for a in parser._actions for s in a.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= set(options)
    quiet, verbose = options["-q"], options["-v"]
    assert quiet is options["--quiet"] and verbose is options["--verbose"]
    assert [g for g in parser._mutually_exclusive_groups if quiet in g._group_actions and verbose in g._group_actions]


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_every_argument_of_every_verb_says_what_it_is_for(verb: str) -> None:
    parser = verbs()[verb]
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, f"aotpack {verb}: {action.dest} has no help"
        assert action.help in " ".join(parser.format_help().split()), f"aotpack {verb} -h: {action.dest}"


@pytest.mark.parametrize("argv", [["build", DEMO], ["tune", DEMO], ["inspect", "x.whl"], ["new", "mine"],
                                  ["record", "-o", "r.yaml"], ["cache"], ["plan", DEMO]])  # fmt: skip
def test_quiet_with_verbose_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "-q", "-v"])
    assert done.value.code == 2
    assert "argument -v/--verbose: not allowed with argument -q/--quiet" in capsys.readouterr().err


def test_a_recording_of_no_program_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.yaml"
    assert cli.main(["record", "-o", str(out)]) == UsageError.exit_code == 2
    assert capsys.readouterr().err == (
        "aotpack: error: give the program to record after --, e.g. aotpack record -o r.yaml -- python run.py\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["plan", DEMO, "--only", "zzz"], "--only zzz: no variant id matches (ids look like add/"),
    (["tune", DEMO, "--kernel", "nope", "-o", "{tmp}/tables"],
     f"--kernel nope: {DEMO} has no kernel of that name with a 'tune:' section (those with one: add, softmax, "),
    (["record", "-o", "{tmp}/r.yaml", "--report", "{tmp}/nowhere.json"],
     "--report {tmp}/nowhere.json: no such report file or folder"),
    (["build", DEMO, "-o", "/dev/null"], "-o /dev/null: it is a file, not a folder; give a folder"),
])  # fmt: skip
def test_an_option_that_cannot_work_is_a_usage_error_whatever_the_verb(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The option named, exit 2: the command line is what to correct (before any GPU, program or compiler)."""
    assert cli.main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert capsys.readouterr().err.startswith(f"aotpack: error: {said.format(tmp=tmp_path)}")


@pytest.mark.parametrize("amount", ["-q", "", "-v"])
def test_a_recording_says_its_warnings_whatever_the_amount_and_verbose_echoes_the_program(
    amount: str, tmp_path: Path
) -> None:
    """In a process of its own: main() sets logging up as the command line says (a test's logging is pytest's)."""
    out = tmp_path / "r.yaml"
    argv = ["record", "-o", str(out), *filter(None, [amount]), "--", "python", "-c", "pass"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "aotpack", *argv], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and f"{out} not written: the program compiled no Triton kernel\n" in done.stderr
    assert (f"$ {shlex.join([sys.executable, '-c', 'pass'])}\n" in done.stderr) is (amount == "-v")


def test_tuning_without_a_gpu_is_tune_s_error_not_a_usage_error(tmp_path: Path, capsys) -> None:
    """No GPU (or no torch) is the host's, not the command line's: TuneError's code, 10."""
    try:
        import torch
    except ImportError:
        pass
    else:
        if torch.cuda.is_available():
            pytest.skip("this host has a GPU")
    assert cli.main(["tune", DEMO, "-o", str(tmp_path / "tables")]) == TuneError.exit_code == 10
    err = capsys.readouterr().err
    assert "aotpack tune needs a CUDA GPU" in err or "aotpack tune measures with torch" in err, err


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    assert cli.main(["plan", DEMO, *argv]) == 0
    done = capsys.readouterr()
    return done.out, done.err


def test_plan_json_is_the_documented_document(capsys: pytest.CaptureFixture[str]) -> None:
    ids, summary = plan(capsys)
    document = json.loads(plan(capsys, "--json")[0])
    assert set(document) == {"schema", "recipe", "package", "kernels", "totals"} and document["schema"] == 1
    assert document["recipe"] == DEMO and document["package"] == "demo_kernels"
    kernels = document["kernels"]
    assert [k["name"] for k in kernels] == ["add", "softmax", "matmul", "layernorm", "rmsnorm"]
    assert all(set(k) == {"name", "backend", "variants"} for k in kernels)
    assert {k["name"]: k["backend"] for k in kernels} == {"add": "triton", "softmax": "triton", "matmul": "triton",
                                                           "layernorm": "triton", "rmsnorm": "cuda"}  # fmt: skip
    assert [v for k in kernels for v in k["variants"]] == ids.split()  # the ids plan lists, in its order
    assert all(v.startswith(k["name"] + "/") for k in kernels for v in k["variants"])
    per_backend: dict[str, int] = {}
    for k in kernels:
        per_backend[k["backend"]] = per_backend.get(k["backend"], 0) + len(k["variants"])
    assert document["totals"] == {"variants": len(ids.split()), "kernels": 5, "backends": per_backend}
    counts = ", ".join(f"{n} {b}" for b, n in sorted(per_backend.items()))
    assert f"\ntotal: {len(ids.split())} variants ({counts}) of 5 kernels\n" in summary
    for k in kernels:
        assert f"\n{k['name']} ({k['backend']}): {len(k['variants'])} variants; " in "\n" + summary


def test_plan_json_with_only_holds_the_kernels_matched(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(plan(capsys, "--json", "--only", "rmsnorm/*")[0])
    assert [(k["name"], k["backend"]) for k in document["kernels"]] == [("rmsnorm", "cuda")]
    assert document["totals"] == {"variants": len(document["kernels"][0]["variants"]), "kernels": 1,
                                  "backends": {"cuda": len(document["kernels"][0]["variants"])}}  # fmt: skip


def test_a_quiet_plan_prints_the_ids_alone(capsys: pytest.CaptureFixture[str]) -> None:
    ids, summary = plan(capsys)
    assert summary
    assert plan(capsys, "-q") == (ids, "")
    assert json.loads(plan(capsys, "-q", "--json")[0])["totals"]["variants"] == len(ids.split())


TWICE = """\
import triton
import triton.language as tl


@triton.jit
def twice(x_ptr, n_elements, A: tl.constexpr, B: tl.constexpr):
    offsets = tl.arange(0, B)
    tl.store(x_ptr + offsets, tl.full((B,), A, tl.float32), mask=offsets < n_elements)
"""
TWICE_RECIPE = """\
package: twice
version: 1.0.0
targets: [sm_80]
kernels:
  twice:
    triton: k.py:twice
    args: {x_ptr: "*fp32:16", n_elements: "i32:16"}
    constexprs: {A: [1, 2], B: {values: [2, 4], equals: A * 2}}
    grid: [1]
"""


def test_a_verbose_plan_gives_every_combination_skipped(tmp_path: Path, capsys) -> None:
    """B = A * 2: of the configs (A, B), (1, 4) and (2, 2) no call can select, in any class; the summary gives one
    reason, -v each config and class."""
    (tmp_path / "k.py").write_text(TWICE)
    (tmp_path / "r.yaml").write_text(TWICE_RECIPE)
    assert cli.main(["plan", str(tmp_path / "r.yaml")]) == 0
    ids, summary = capsys.readouterr()
    assert "A=1,B=4" not in ids and "A=2,B=2" not in ids and "A=2,B=4" in ids
    assert "skipped that no call can select (e.g. B = (A * 2) is 2, not 4)" in summary
    assert "\n  skipped " not in summary
    assert cli.main(["plan", str(tmp_path / "r.yaml"), "-v"]) == 0
    done = capsys.readouterr()
    assert done.out == ids
    said = [line for line in done.err.splitlines() if line.startswith("  skipped ")]
    classes = summary.split("; ")[1].removesuffix(" classes:")
    assert len(said) == 2 * int(classes.split()[0])  # two configs, every class
    assert "  skipped A=1,B=4,w4,s3 in class DD: B = (A * 2) is 2, not 4" in said
    assert "  skipped A=2,B=2,w4,s3 in class DD: B = (A * 2) is 4, not 2" in said


def test_new_quiet_prints_nothing_and_verbose_names_each_file(tmp_path: Path, capsys) -> None:
    assert cli.main(["new", "quietkernels", "--dir", str(tmp_path / "q"), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "q" / "recipe.yaml").is_file()
    assert cli.main(["new", "loudkernels", "--dir", str(tmp_path / "v"), "-v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    written = sorted(str(p) for p in (tmp_path / "v").rglob("*") if p.is_file())
    assert sorted(line.removeprefix("wrote ") for line in lines[:-1]) == written
    assert lines[-1].startswith(f"wrote {len(written)} files to {tmp_path / 'v'}; next: ")


def test_cache_quiet_prints_nothing_and_verbose_names_what_it_drops(tmp_path: Path, capsys) -> None:
    root = tmp_path / "cache"
    assert cli.main(["cache", "--cache-dir", str(root), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    key = "ab" * 32
    cache.Cache(root).store(key, Pruned(variant_id="k/0/sm_80", reason="x" * 1000))
    entry = root / "variants" / key[:2] / f"{key}{cache.VARIANT_SUFFIX}"
    assert cli.main(["cache", "--cache-dir", str(root), "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{root}: 1 compiled variant, 0 wheels and 0 Triton toolchains, 0.0 MB")
    assert out[1:] == ["  compiled variants: 0.0 MB"]
    assert cli.main(["cache", "--cache-dir", str(root), "--clear", "-q"]) == 0
    assert capsys.readouterr() == ("", "") and not entry.exists()
    cache.Cache(root).store(key, Pruned(variant_id="k/0/sm_80", reason="x" * 1000))
    assert cli.main(["cache", "--cache-dir", str(root), "--clear", "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"dropped {entry}" and out[1].startswith("dropped 1 entry (0.0 MB); ") and out[2:] == []
    assert not entry.exists()


def test_inspect_quiet_says_the_first_line_and_verbose_every_variant(tmp_path: Path, capsys, kernel_dir) -> None:
    from aotpack.codegen import python as codegen_py

    manifest = codegen_py.manifest(fake_build(kernel_dir), "0.1.0")
    wheel = tmp_path / "mykernels-0.1.0-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("mykernels/__init__.py", b"")
        zf.writestr("mykernels/manifest.json", json.dumps(manifest))
    assert cli.main(["inspect", str(wheel)]) == 0
    shown = capsys.readouterr().out
    assert cli.main(["inspect", str(wheel), "-q"]) == 0
    assert capsys.readouterr().out == shown.splitlines()[0] + "\n"
    assert cli.main(["inspect", str(wheel), "-v"]) == 0
    loud = capsys.readouterr().out
    ids = [v["id"] for _, k in sorted(manifest["kernels"].items()) for v in k["variants"]]
    assert ids and all(f"\n  {i}\n" in loud for i in ids) and not any(f"\n  {i}\n" in shown for i in ids)
    digests = list(manifest["sources"].values())
    assert all(d in loud and d not in shown and d[:16] in shown for d in digests)
    assert cli.main(["inspect", str(wheel), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out) == manifest


@pytest.mark.parametrize(("count", "word", "words", "said"), [
    (0, "variant", None, "0 variants"), (1, "variant", None, "1 variant"), (2, "variant", None, "2 variants"),
    (1, "entry", "entries", "1 entry"), (3, "entry", "entries", "3 entries"), (1, "launch", "launches", "1 launch"),
    (0, "class miss", "class misses", "0 class misses"),
])  # fmt: skip
def test_a_count_is_written_as_counted(count: int, word: str, words: str | None, said: str) -> None:
    assert plural(count, word, words) == said


@pytest.mark.parametrize("name", ["r\x1b[2Jx.yaml", "r\u202ex.yaml", "r\x07.yaml", "r\u2028.yaml"])
def test_an_error_naming_a_file_prints_its_control_characters_escaped(tmp_path, capsys, name):
    """A file name (a recording's, a report's) with a terminal's escape sequence, a bidirectional override or a
    line separator in it reaches the terminal escaped, in every error aotpack says."""
    assert cli.main(["plan", str(tmp_path / name)]) != 0
    err = capsys.readouterr().err
    assert err.isprintable() or err.rstrip("\n").isprintable()
    assert name.encode("unicode_escape").decode("ascii").split("r", 1)[1] in err


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["cache", "--cache-dir", "{tmp}/c"], ["plan", "recipes/demo.yaml"], ["new", "closed_kernels"]],
)
def test_a_command_started_with_standard_output_closed_says_so_and_exits_with_its_code(tmp_path, argv):
    """``aotpack cache >&-``: Python starts with sys.stdout None, and every print met it as an AttributeError."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    args = [a.format(tmp=tmp_path) for a in argv]
    done = subprocess.run([sys.executable, "-m", "aotpack", *args], cwd=tmp_path if argv[0] == "new" else root,
                          env=env, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1), timeout=120)  # fmt: skip
    assert done.returncode == 9 and "cannot write standard output: it is closed" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("verb", [["plan", "recipes/demo.yaml"], ["build", "recipes/demo.yaml"]])
def test_an_empty_triton_release_is_a_usage_error_not_the_installed_one(capsys, verb):
    with pytest.raises(SystemExit) as ended:
        cli.main([*verb, "--triton", ""])
    assert ended.value.code == 2 and "argument --triton: '' is not a Triton release" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("errno", "says"),
    [
        (36, r"File name too long; a name in the path is longer than the system takes \(\d+ bytes\); give a shorter"),
        (13, r"Permission denied; make it writable for you \(a read-only folder or file system, an immutable file\)"),
        (28, "No space left on device; free space there"),
        (5, "Input/output error; give another path"),
    ],
)
def test_a_system_refusal_no_command_turned_into_its_own_error_names_the_path_escaped_and_what_to_do(
    monkeypatch, capsys, errno, says
):
    name = "out/\x1b[2J" + "n" * 300

    def refused(args):
        raise OSError(errno, os.strerror(errno), name)

    monkeypatch.setitem(cli.COMMANDS, "plan", refused)
    assert cli.main(["plan", "r.yaml"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.startswith("aotpack: error: out/\\x1b[2Jnnn")
    assert re.search(says, err), err
