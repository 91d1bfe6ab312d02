"""One reader for each kind of value (aotpack/values.py): the same text is taken or refused alike wherever it is
given (an option, ``[tool.aotpack]``, a ``-C`` config setting, the environment), with the same message."""

from __future__ import annotations

import json
import re

import pytest

from aotpack import build_meta, values
from aotpack.commands import cli
from aotpack.errors import UsageError
from aotpack.pipeline import cache

JOBS = "expected a number of parallel compiles: a whole number from 1 to 1024 in ASCII digits; got "
SIZE = (
    "expected a cache size: bytes in ASCII digits, a decimal point allowed, then optionally K, M, G or T (binary "
    "units) and B, such as 4096, 500M or 1.5G, at most 1048576T; got "
)
# one rule for every number: ASCII digits only, at most limits.MAX_DIGITS (20) of them
NOT_COUNTS = ["", "0", "-1", "+5", " 5 ", "5 ", "5.0", "0x10", "1_000", "1e3", "\u00b2", "\u0663", "9" * 5000,
              "1025", "inf", "nan", "5\n", "\uff15", "true"]  # fmt: skip
COUNTS = [("1", 1), ("0007", 7), ("1024", 1024), ("0" * 19 + "8", 8)]
NOT_SIZES = ["", "10Q", "-1", "nan", "inf", "10 G", " 10G", "10G ", "1e400", "1e3", "+5", "0x10", "1_000", "\u00b2",
             "\u0663G", "9" * 5000, "K", "B", ".5G", "5.G", "1.5.5G", "1048577T", "10GiB", "10\n"]  # fmt: skip
SIZES = [("0", 0), ("4096", 4096), ("100B", 100), ("500M", 500 << 20), ("1.5k", 1536), ("2GB", 2 << 30),
         ("10g", 10 << 30), ("0.5K", 512), ("1048576T", 1 << 60), ("0." + "0" * 18 + "1T", 0)]  # fmt: skip


def _argparse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def _setting(tmp_path, monkeypatch, toml: str, config: dict[str, str] | None = None) -> str:
    (tmp_path / "pyproject.toml").write_text(f'[tool.aotpack]\nrecipe = "r.yaml"\n{toml}')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as refused:
        build_meta._settings(config)
    return str(refused.value)


@pytest.mark.parametrize("text", NOT_COUNTS)
def test_a_number_of_jobs_is_refused_alike_by_j_toml_and_config_settings(text, tmp_path, monkeypatch, capsys):
    message = JOBS + repr(text)
    assert _argparse_error(["build", "r.yaml", "-j", text], capsys) == (
        f"aotpack build: error: argument -j/--jobs: {message}"
    )
    assert _setting(tmp_path, monkeypatch, "", {"jobs": text}) == f"pyproject.toml: config setting jobs: {message}"
    toml = f"jobs = {json.dumps(text)}\n"  # a TOML string: read as the command line reads it
    assert _setting(tmp_path, monkeypatch, toml) == f"pyproject.toml: [tool.aotpack] jobs: {message}"


@pytest.mark.parametrize(("text", "number"), COUNTS)
def test_a_number_of_jobs_is_taken_alike_everywhere(text, number, tmp_path, monkeypatch):
    assert cli._parser().parse_args(["build", "r.yaml", "-j", text]).jobs == number
    (tmp_path / "pyproject.toml").write_text(f'[tool.aotpack]\nrecipe = "r.yaml"\njobs = "{text}"\n')
    (tmp_path / "r.yaml").write_text("")  # the recipe named
    monkeypatch.chdir(tmp_path)
    assert build_meta._settings({})["jobs"] == number
    assert build_meta._settings({"jobs": text})["jobs"] == number


@pytest.mark.parametrize(("toml", "shown"), [("0", "0"), ("-1", "-1"), ("1025", "1025"), ("1.0", "1.0"),
                                             ("true", "True"), ("[1]", "[1]"), ("10_000", "10000")])  # fmt: skip
def test_a_toml_number_of_jobs_is_held_to_the_same_range(toml, shown, tmp_path, monkeypatch):
    """``jobs = 0`` is refused as ``-j 0`` and ``-C jobs=0`` are; a TOML value is shown as TOML read it."""
    assert _setting(tmp_path, monkeypatch, f"jobs = {toml}\n") == f"pyproject.toml: [tool.aotpack] jobs: {JOBS}{shown}"


@pytest.mark.parametrize("text", NOT_SIZES)
def test_a_size_is_refused_alike_by_trim_the_environment_and_a_build(text, tmp_path, monkeypatch, capsys):
    """``--trim`` and ``$AOTPACK_CACHE_SIZE`` read by ``aotpack cache`` and by a build (which reads it through
    cache.size_limit before any work): the same refusal, before the cache is touched."""
    message = SIZE + repr(text)
    assert _argparse_error(["cache", "--cache-dir", str(tmp_path), "--trim", text], capsys) == (
        f"aotpack cache: error: argument --trim: {message}"
    )
    if text == "":
        return  # an empty variable is an unset one: the default (test_an_empty_variable_is_the_default)
    monkeypatch.setenv(cache.SIZE_SETTING, text)
    env_message = f"${cache.SIZE_SETTING}: {message}; set it so, or unset it for 10G"
    with pytest.raises(UsageError, match=f"^{re.escape(env_message)}$"):
        cache.size_limit()  # what a build reads first (pipeline._cache_keys)
    sentinel = tmp_path / "variants" / "ab" / ("ab" * 32 + ".pickle")
    sentinel.parent.mkdir(parents=True)
    sentinel.write_bytes(b"kept")
    for extra in ([], ["--clear"], ["--trim", "0"]):
        assert cli.main(["cache", "--cache-dir", str(tmp_path), *extra]) == 2
        assert capsys.readouterr().err == f"aotpack: error: {env_message}\n"
    assert sentinel.read_bytes() == b"kept"


@pytest.mark.parametrize(("text", "size"), SIZES)
def test_a_size_is_taken_alike_everywhere(text, size, tmp_path, monkeypatch):
    assert cli._parser().parse_args(["cache", "--trim", text]).trim == size
    monkeypatch.setenv(cache.SIZE_SETTING, text)
    assert cache.size_limit() == size


def test_an_empty_variable_is_the_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.SIZE_SETTING, "")
    assert cache.size_limit() == 10 << 30
    assert cli.main(["cache", "--cache-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.endswith("a build keeps it to 10G ($AOTPACK_CACHE_SIZE)\n")


@pytest.mark.parametrize(("text", "low", "refused"), [("0", 1, True), ("0", 0, False), ("100000", 1, False),
                                                      ("100001", 0, True), ("-1", 0, True), ("3.0", 1, True)])  # fmt: skip
def test_tune_runs(text, low, refused, capsys):
    option = "--reps" if low else "--warmup"
    if not refused:
        assert getattr(cli._parser().parse_args(["tune", "r.yaml", option, text]), option[2:]) == int(text)
        return
    assert _argparse_error(["tune", "r.yaml", option, text], capsys) == (
        f"aotpack tune: error: argument {option}: expected a number of runs: a whole number from {low} to 100000 in "
        f"ASCII digits; got {text!r}"
    )


@pytest.mark.parametrize(("given", "taken"), [("true", True), ("TRUE", True), ("1", True), ("False", False),
                                              ("0", False), (True, True), (False, False)])  # fmt: skip
def test_booleans_taken(given, taken):
    assert values.boolean(given, "a boolean") is taken


@pytest.mark.parametrize("given", ["yes", "no", "on", "", " true", "2", "t", 1, 0, "\u0661"])
def test_booleans_refused_alike_as_config_setting_and_toml(given, tmp_path, monkeypatch):
    message = f"expected a boolean: true or false (or 1 or 0, in any case); got {given!r}"
    if isinstance(given, str):
        assert _setting(tmp_path, monkeypatch, "", {"strict": given}) == (
            f"pyproject.toml: config setting strict: {message}"
        )
    toml = json.dumps(given)  # a string as a TOML string; 1 and 0 as TOML integers, which are not booleans
    assert _setting(tmp_path, monkeypatch, f"strict = {toml}\n") == f"pyproject.toml: [tool.aotpack] strict: {message}"


@pytest.mark.parametrize("argv", [["new", "kit", "--dir", ""], ["cache", "--cache-dir", ""], ["inspect", ""]])
def test_an_empty_path_is_not_the_current_folder(argv, capsys):
    """Path('') is '.': `aotpack cache --cache-dir '' --clear` would clear the current folder's cache folders."""
    assert _argparse_error(argv, capsys).endswith(": expected a path; got '' (for the current folder, give .)")
