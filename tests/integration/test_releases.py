"""Every Triton release aotpack is tested with (backends/triton/releases.py), without a GPU:

- what each release's own jit_cache_hook receives (captured by tests/jit_stub.py under that release, through
  aotpack's record agent: tests/fixtures/hooks/triton-X.Y.Z.json, never written by hand) records into a recipe
  that plans exactly those compilations, whatever release runs the test;
- under the installed release, the capture is that release's fixture (tests/releases.py runs this file with each
  release first on the path);
- `aotpack build --triton X` from an environment whose Triton is another release builds with X (tests/releases.py
  names the releases it fetched: $AOTPACK_TEST_RELEASES);
- installing aotpack beside a torch's Triton pin never moves that Triton, and `pip check` stays clean (real
  installs of each release from the wheelhouse tests/releases.py fills: $AOTPACK_TEST_WHEELHOUSE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aotpack import record
from aotpack.backends import recipes as recipe
from aotpack.backends.triton import releases

from .. import jit_stub
from ..shared import ROOT, stand_in_wheel
from .helpers import recorded_variants

FIXTURES = sorted(jit_stub.HOOKS.glob("triton-*.json"))


def test_every_tested_release_has_its_hook_fixture():
    assert sorted({releases.minor(p.stem.removeprefix("triton-")) for p in FIXTURES}) == list(releases.SUPPORTED)


def _class(event: dict) -> str:
    """The JIT's class of each runtime argument, read off the raw event (D, 1, N or _)."""
    divisible = {path[0] for path, attrs in event["attrs"] if ["tt.divisibility", 16] in attrs}
    folded = {path[0]: value for path, value in event["constants"]}
    out = []
    for index, (_, is_constexpr) in enumerate(event["function"]["params"]):
        if is_constexpr:
            continue
        if index in folded:
            out.append("N" if folded[index] is None else "1")
        else:
            out.append("D" if index in divisible else "_")
    return "".join(out)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_each_release_s_hook_payloads_record_into_a_recipe_that_plans_them(fixture, tmp_path):
    events = json.loads(fixture.read_text())["events"]
    assert [e["event"] for e in events] == ["compile"] * len(events), "the release's hook gave record every call"
    got = record.Events()
    for event in events:
        got.add(event, "fixture")
    path = tmp_path / "r.yaml"
    record.write(path, got, "recorded_kernels")
    variants = recorded_variants(recipe.load(path))  # (and each one's floors: test_record.py)
    scalar = {e["signature"]["m"] for e in events}
    kept = [e for e in events if e["signature"]["m"] == "i32"]  # one type per scalar argument: i64's call reported
    assert scalar == {"i32", "i64"} and len(got.skipped) == 1 and "m was i64 here" in next(iter(got.skipped.values()))
    want = sorted((_class(e), e["num_warps"], e["num_stages"]) for e in kept)
    planned = sorted(("".join(s or "_" for s in v.spec.states), v.config.num_warps, v.config.num_stages)
                     for v in variants)  # fmt: skip
    assert planned == want


def _normal(event: dict) -> dict:
    """An event without what depends on the checkout (module names, cache keys, source file names)."""

    def plain(value):
        if isinstance(value, dict) and "function" in value:
            return {"function": value["function"]["identity"]}
        if isinstance(value, dict) and "tuple" in value:
            return {"tuple": [plain(v) for v in value["tuple"]]}
        return value

    return {"signature": event["signature"], "attrs": event["attrs"], "arch": event["arch"],
            "constants": [[p, plain(v)] for p, v in event["constants"]], "num_warps": event["num_warps"],
            "num_stages": event["num_stages"], "function": event["function"]["identity"]}  # fmt: skip


def test_the_installed_release_s_hooks_are_its_fixture(tmp_path):
    import triton

    mine = [p for p in FIXTURES if releases.minor(p.stem.removeprefix("triton-")) == releases.minor(triton.__version__)]
    assert mine, f"no hook fixture for Triton {triton.__version__}: run python -m tests.jit_stub under it"
    now = jit_stub.captured(90, str(tmp_path / "cache"))
    assert [_normal(e) for e in now] == [_normal(e) for e in json.loads(mine[0].read_text())["events"]]


OTHERS = [r for r in os.environ.get("AOTPACK_TEST_RELEASES", "").split(",") if r]


@pytest.mark.skipif(not OTHERS, reason="tests/releases.py names the releases it fetched ($AOTPACK_TEST_RELEASES)")
@pytest.mark.parametrize("release", OTHERS)
def test_a_build_with_another_release_than_the_installed_one(release, tmp_path):
    import triton

    cache = Path(os.environ["AOTPACK_TEST_RELEASES_CACHE"])
    before = triton.__version__
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "aotpack", "build", str(ROOT / "recipes" / "demo.yaml"), "--only",
                           "add/T=fp32,BLOCK=1024,w4*", "--triton", release, "--cache-dir", str(cache), "-o", str(out)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"building with Triton {release}" in done.stderr
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        manifest = json.loads(z.read("demo_kernels/manifest.json"))
    assert manifest["toolchain"]["triton"] == release
    assert {v["compiler"]["triton"] for v in manifest["kernels"]["add"]["variants"]} == {release}
    assert triton.__version__ == before and releases.installed_version() == before  # this environment untouched


@pytest.mark.skipif(not OTHERS or not os.environ.get("AOTPACK_TEST_WHEELHOUSE"), reason="run by tests/releases.py")
def test_a_kernel_project_naming_another_release_builds_with_it_without_build_isolation(tmp_path):
    """`pip wheel --no-build-isolation` of a project whose [tool.aotpack] names another release than the installed
    one: the backend keeps that release in aotpack's cache (here a fresh one, from the wheelhouse) and builds."""
    from aotpack.commands import cli

    release, project = OTHERS[0], tmp_path / "kit"
    assert cli.main(["new", "release_kit", "--dir", str(project)]) == 0
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('recipe = "recipe.yaml"\n',
                                                       f'recipe = "recipe.yaml"\ntriton = "{release}"\n'))  # fmt: skip
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "AOTPACK_WHEELHOUSE": os.environ["AOTPACK_TEST_WHEELHOUSE"],
    }
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "out"), str(project)], check=True, env=env)  # fmt: skip
    (wheel,) = (tmp_path / "out").glob("release_kit-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert json.loads(z.read("release_kit/manifest.json"))["toolchain"]["triton"] == release
    assert (tmp_path / "xdg" / "aotpack" / "toolchains" / f"triton-{release}").is_dir()


WHEELHOUSE = os.environ.get("AOTPACK_TEST_WHEELHOUSE")
# the Triton requirement line of a torch release that pins each (torch 2.11, 2.13, 2.14; none pins 3.9 yet)
TORCH_PINS = {(3, 6): "triton==3.6.0", (3, 7): "triton==3.7.1", (3, 8): "triton~=3.8.0", (3, 9): "triton>=3.9"}
INSTALLS = [(r.tested, TORCH_PINS[r.minor]) for r in releases.RELEASES if sys.version_info[:2] in r.pythons]
UNTESTED = ("3.5.1", "triton==3.5.1")  # torch 2.9's: a stand-in wheel, since no Triton requirement of aotpack's decides


@pytest.fixture(scope="module")
def aotpack_wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("aotpack-wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)], check=True)
    (wheel,) = out.glob("aotpack-*.whl")
    return wheel


@pytest.mark.skipif(not WHEELHOUSE, reason="tests/releases.py fills a wheelhouse of Triton releases")
@pytest.mark.parametrize(("version", "pin"), [*INSTALLS, UNTESTED])
def test_installing_aotpack_beside_a_torch_pin_keeps_its_triton(version, pin, tmp_path, aotpack_wheel):
    stand_ins = tmp_path / "stand-ins"
    if (version, pin) == UNTESTED:
        stand_in_wheel(stand_ins, "triton", version)
    torch_pin = stand_in_wheel(stand_ins, "torch-pin", "1.0", (pin,))  # torch's requirement line, nothing else
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    links = ["--no-index", "--find-links", str(WHEELHOUSE), "--find-links", str(stand_ins)]
    subprocess.run([*pip, "install", "-q", *links, f"triton=={version}", str(torch_pin)], check=True)
    installed = subprocess.run([*pip, "install", "-q", str(aotpack_wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-3000:]
    shown = subprocess.run([*pip, "show", "triton"], capture_output=True, text=True, check=True).stdout
    assert f"Version: {version}\n" in shown, "installing aotpack moved the user's Triton"
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
