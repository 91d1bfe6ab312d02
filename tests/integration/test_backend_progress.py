"""The PEP 517 backend talks: a real build_wheel of a small project writes what `aotpack build` says to stderr
(the plan's variant count, a progress line per variant, each phase after compiling, the wheel built; what pip -v
shows), and nothing with quiet."""

import re

from aotpack import build_meta

from ..shared import ROOT, SMALL

PYPROJECT = '[project]\nname = "small_kernels"\nversion = "0.2.0"\n\n[tool.aotpack]\nrecipe = "recipe.yaml"\njobs = 2\n'


def test_build_wheel_shows_progress_on_stderr_and_none_quiet(tmp_path, monkeypatch, capfd):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "add.py").write_text((ROOT / "examples" / "add.py").read_text())
    recipe = SMALL.replace("types: {T: [fp32, fp16]}", "types: {T: [fp32]}").replace("[sm_80, sm_90a]", "[sm_80]")
    (tmp_path / "recipe.yaml").write_text(recipe)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    monkeypatch.chdir(tmp_path)
    built = build_meta.build_wheel(str(tmp_path / "quiet"), {"cache": "false", "quiet": "true"})
    assert built.startswith("small_kernels-0.2.0-cp39-abi3-manylinux")
    assert capfd.readouterr().err == ""
    assert build_meta.build_wheel(str(tmp_path / "out"), {"cache": "false"}) == built
    said = capfd.readouterr().err.splitlines()
    lines = [line for line in said if line.startswith("[")]
    assert lines, "no progress"
    last = re.match(r"\[\d+/(\d+)\]", lines[-1])
    assert last is not None, lines[-1]
    total = int(last.group(1))
    assert total > 1 and len(lines) == total  # under twenty variants: a line for each, every one compiled
    assert said[0] == f"compiling {total} variants of 1 kernel (0 cached)", "\n".join(said)
    assert said[len(lines) + 1 :] == [
        "compiling the extension module and the C API library", f"repairing {built.split('-cp39')[0]}-cp39-abi3-"
        "linux_x86_64.whl with auditwheel", *said[-1:]]  # fmt: skip
    assert re.fullmatch(rf"built {tmp_path / 'out' / built} \(\d+\.\d\d MB, {total} variants, \d+s\)", said[-1])
    for i, line in enumerate(lines, 1):
        assert re.fullmatch(rf"\[{i}/{total}\] \d+s, eta \d+s, 0 cached, 0 pruned  add/T=fp32,BLOCK=\d+,w4,s1/sm_80\S*",
                            line), line  # fmt: skip
    assert (tmp_path / "out" / built).read_bytes() == (tmp_path / "quiet" / built).read_bytes()
