"""`aotpack record` and the drop-in launch, without a GPU: a hook stream in the form Triton's JIT
gives it (signature, constants, attributes, options) becomes a recipe that builds exactly the
variants seen; the built package launches them with Triton's syntax on the fake driver, and
`activate()` makes the original @triton.jit function's call sites launch them."""

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from aotpack import build, model, record
from aotpack.backends import recipes as recipe
from aotpack.commands import cli
from aotpack.errors import RecipeError
from aotpack.manifest import read_wheel
from aotpack.plan import variants as plan
from aotpack.runtime import _aotpack_agent as record_agent

from .helpers import CAI_ARRAY, install_wheel, recorded_variants, run_on_fake_driver

ROOT = Path(__file__).resolve().parents[2]


def add_kernel():
    from aotpack.recipe import sources as _sources

    return _sources.load(model.Source(path=ROOT / "examples" / "add.py", module=None, function="add_kernel"))


def hook_call(jit, dtype, n_state, block, warps=4, aligned=True):
    """The keyword arguments Triton's JIT passes its jit_cache_hook for add_kernel(x, y, out, n, BLOCK)."""
    signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "n_elements": "i32",
                 "BLOCK": "constexpr"}  # fmt: skip
    constants = {(4,): block}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3 if aligned else 0)}
    if n_state == "1":
        signature["n_elements"] = "constexpr"
        constants[(3,)] = 1
    elif n_state == "D":
        attrs[(3,)] = [["tt.divisibility", 16]]
    spec = {"options": {"num_warps": warps, "num_stages": 3, "num_ctas": 1, "maxnreg": None,
                        "enable_fp_fusion": True, "launch_cooperative_grid": False, "launch_pdl": False},
            "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}  # fmt: skip
    compile = {"signature": signature, "constants": constants, "configs": [attrs], "num_warps": warps,
               "num_stages": 3, "specialization_data": json.dumps(spec)}  # fmt: skip
    key = f"{dtype}-{n_state}-{block}-{warps}-{aligned}"
    return {"key": key, "repr": "", "fn": SimpleNamespace(module=jit.fn.__module__, name=jit.fn.__qualname__,
            jit_function=jit), "compile": compile, "is_manual_warmup": False, "already_compiled": False}  # fmt: skip


def recorded(calls):
    rec = record.Recording()
    for call in calls:
        rec.on_compile(**call)
    return rec


def test_a_hook_stream_becomes_a_recipe_of_exactly_those_variants(tmp_path):
    jit = add_kernel()
    rec = recorded([hook_call(jit, "fp32", "D", 1024), hook_call(jit, "fp32", "", 1024),
                    hook_call(jit, "fp16", "1", 256, warps=8), hook_call(jit, "fp32", "D", 1024)])  # fmt: skip
    path = tmp_path / "r.yaml"
    record.write(path, rec.events, "recorded_kernels")
    text = path.read_text()
    loaded = recipe.load(path)
    ids = [v.id for v in plan.plan_variants(loaded)]
    assert ids == [  # each recorded class, and its floor: what a call with another length or offset runs
        "add_kernel/T=fp16,BLOCK=256,w8,s3/sm_90a/DDD1",
        "add_kernel/T=fp16,BLOCK=256,w8,s3/sm_90a/___1",
        "add_kernel/T=fp32,BLOCK=1024,w4,s3/sm_90a/DDDD",
        "add_kernel/T=fp32,BLOCK=1024,w4,s3/sm_90a/DDD_",
        "add_kernel/T=fp32,BLOCK=1024,w4,s3/sm_90a/____",
    ]
    kernel = yaml.safe_load(text)["kernels"]["add_kernel"]
    assert kernel["launch"] == "triton" and kernel["types"] == {"T": ["fp16", "fp32"]}
    assert kernel["args"] == {"x_ptr": "*T", "y_ptr": "*T", "out_ptr": "*T", "n_elements": "i32"}
    assert yaml.safe_load(text)["targets"] == ["sm_90a"]
    # one line per variant (diff-friendly), in a stable order
    assert (
        "      - {types: {T: fp32}, config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDD_, launches: 0}"
        in text
    )

    # a second recording merges in: new variants are added, the rest kept as written (launch counts included)
    text = text.replace("class: DDDD, launches: 0", "class: DDDD, launches: 5")
    again = recorded([hook_call(jit, "fp32", "D", 512), hook_call(jit, "fp32", "D", 1024)])
    again.events.add({"event": "launches", "counts": {"1": 2}})  # the second compilation launched twice
    merged = record.recipe_text(again.events.compilations(), again.events.picks, yaml.safe_load(text))
    rows = yaml.safe_load(merged)["kernels"]["add_kernel"]["variants"]
    assert len(rows) == 4
    assert [r["launches"] for r in rows if r["class"] == "DDDD" and r["config"]["BLOCK"] == 1024] == [5]
    assert record.recipe_text([], {}, yaml.safe_load(merged)) == merged  # a fixed point


def test_a_compilation_the_recipe_cannot_say_is_reported_not_dropped_silently(tmp_path):
    jit = add_kernel()
    wide = hook_call(jit, "fp32", "", 512)
    wide["compile"]["signature"]["n_elements"] = "i64"  # a call with n past i32's range
    rec = recorded([hook_call(jit, "fp32", "D", 1024), hook_call(jit, "fp16", "", 1024), wide])
    path = tmp_path / "r.yaml"
    record.write(path, rec.events, "recorded_kernels")
    recorded_ids = [v.id.split("/")[1] for v in recorded_variants(recipe.load(path))]
    assert recorded_ids == ["T=fp16,BLOCK=1024,w4,s3", "T=fp32,BLOCK=1024,w4,s3"]
    ((what, why),) = rec.events.skipped.items()
    assert "add_kernel (BLOCK=512, num_warps=4)" in what
    assert why.startswith("n_elements was i64 here, i32 in the kernel's other variants: a recipe kernel takes one")


WORKLOAD = """
import sys
from triton import knobs
sys.path.insert(0, {tests!r})
from integration.test_record import add_kernel, hook_call
jit = add_kernel()
for dtype in sys.argv[1:]:  # what the JIT would do on a GPU: call the hook before each compilation
    knobs.runtime.jit_cache_hook(**hook_call(jit, dtype, "D", 1024))
"""


def test_the_record_command_runs_a_program_with_the_hooks_and_merges_its_recipe(tmp_path):
    import subprocess
    import sys

    program = tmp_path / "work.py"
    program.write_text(WORKLOAD.format(tests=str(ROOT / "tests")))
    out = tmp_path / "r.yaml"
    cmd = [sys.executable, "-m", "aotpack", "record", "-o", str(out), "--package", "mine", "--", "python",
           str(program)]  # fmt: skip
    first = subprocess.run([*cmd, "fp32"], capture_output=True, text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert "1 compilation of 1 kernel, 0 launches" in first.stdout
    second = subprocess.run([*cmd, "fp16"], capture_output=True, text=True, cwd=ROOT)
    assert second.returncode == 0, second.stderr
    data = yaml.safe_load(out.read_text())
    assert data["package"] == "mine" and data["targets"] == ["sm_90a"]
    kernel = data["kernels"]["add_kernel"]
    assert kernel["types"] == {"T": ["fp16", "fp32"]} and len(kernel["variants"]) == 2  # merged
    failing = subprocess.run([*cmd[:-1], str(tmp_path / "missing.py")], capture_output=True, text=True, cwd=ROOT)
    assert failing.returncode == 7 and "the recorded program exited with status 2" in failing.stderr


def test_launch_counts_and_unrecordable_kernels_are_reported(tmp_path):
    jit = add_kernel()
    rec = recorded([hook_call(jit, "fp32", "D", 1024)])
    rec.events.add({"event": "launches", "counts": {"0": 7}})
    assert rec.events.compilations()[0].launches == 7
    bad = hook_call(jit, "fp32", "D", 1024)
    bad["compile"]["constants"] = {(4,): object()}
    rec.on_compile(**bad)
    assert "constexpr BLOCK is a builtins.object (<object object" in next(iter(rec.events.skipped.values()))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("class: DDDD", "class: DDD"), "expected one letter per argument (4: x_ptr, y_ptr, out_ptr, n_elements)"),
        (("class: DDDD", "class: DD1D"), "argument out_ptr cannot be '1'"),
        (("launch: triton", "launch: jit"), "unknown launch 'jit' (expected: triton)"),
        (("launch: triton", "launch: triton\n    grid: [1]"), "a 'launch: triton' kernel takes no 'grid'"),
        (("BLOCK: 1024, ", ""), "missing required key 'BLOCK'"),
    ],
)
def test_recorded_recipes_are_checked_with_located_errors(tmp_path, change, message):
    good = textwrap.dedent(f"""\
        package: r
        version: 0.1.0
        targets: [sm_90a]
        kernels:
          add_kernel:
            triton: {ROOT}/examples/add.py:add_kernel
            launch: triton
            args: {{x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n_elements: i32}}
            variants:
              - {{config: {{BLOCK: 1024, num_warps: 4, num_stages: 3}}, class: DDDD}}
        """)
    recipe.parse(good, tmp_path / "r.yaml")
    with pytest.raises(RecipeError) as err:
        recipe.parse(good.replace(*change), tmp_path / "r.yaml")
    assert message in str(err.value) and "r.yaml:" in str(err.value)


@pytest.fixture(scope="module")
def recorded_site(tmp_path_factory):
    jit = add_kernel()
    rec = recorded([hook_call(jit, "fp32", "D", 1024), hook_call(jit, "fp32", "", 1024),
                    hook_call(jit, "fp16", "1", 256, warps=8)])  # fmt: skip
    folder = tmp_path_factory.mktemp("recorded")
    path = folder / "r.yaml"
    record.write(path, rec.events, "recorded_kernels")
    wheel = build(path, folder / "dist", jobs=2).wheel
    return install_wheel(wheel, folder / "site")


def test_drop_in_launch_with_tritons_syntax_on_the_fake_driver(recorded_site, fake_driver, tmp_path):
    code = (
        CAI_ARRAY
        + """
import recorded_kernels as k
x, y, o = (Array(A + i * 0x1000000, (4096,), "<f4") for i in range(3))
k.add_kernel[(4,)](x, y, o, 4096, BLOCK=1024)                                  # class DDDD
k.add_kernel[lambda meta: (meta["n_elements"] // meta["BLOCK"] + 1,)](x, y, o, 4000, BLOCK=1024)  # DDD_
h = Array(A, (1,), "<f2")
k.add_kernel[(1, 1, 1)](h, h, h, n_elements=1, BLOCK=256, num_warps=8)         # DDD1 (fp16)
k.add_kernel[(1,)](Array(A + 4, (8,), "<f4"), x, o, 8, BLOCK=1024)  # misaligned, n odd: the recorded classes' floor
print(k.stats()["class_misses"])
for bad in (lambda: k.add_kernel[(1,)](x, y, o, 4096, BLOCK=512),
            lambda: k.add_kernel[(1,)](x, y, o, 4096, BLOCK=1024, num_warps=8)):
    try:
        bad()
    except k.MissingVariant as exc:
        print("missing:", exc)
try:
    k.add_kernel[(1,)](x, y, o, 4096, BLOCK=1024, colour=1)
except TypeError as exc:
    print("type:", exc)
print(k.add_kernel)
for bad in (lambda: k.add_kernel[(1,)](x, y, o, BLOCK=1024),                 # n_elements missing
            lambda: k.add_kernel[(1,)](x, y, o, 4096, n_elements=4096, BLOCK=1024),
            lambda: k.add_kernel.run(x, y, o, 4096, BLOCK=1024),            # no grid
            lambda: k.add_kernel[()](x, y, o, 4096, BLOCK=1024),
            lambda: k.add_kernel[(1,)](x, y, o, 4096, BLOCK=1024, num_ctas=2),
            lambda: k.select("add_kernel", x, y, o, 4096, BLOCK=1024, target="sm_90a")):
    try:
        bad()
    except (TypeError, ValueError, k.MissingVariant) as exc:
        print(type(exc).__name__ + ":", exc)
k.add_kernel.run(x, y, o, 4096, grid=(4,), warmup=True, BLOCK=1024)          # checks the config, launches nothing
calls = []
k.add_kernel.runner(lambda *a: calls.append(a))(x, y, o, 4096, grid=(1,), BLOCK=512)
message, args, kwargs = calls[0]
print("fallback:", message.split(";")[0], len(args), sorted(kwargs))
"""
    )
    out, log = run_on_fake_driver(code, recorded_site, fake_driver, tmp_path / "cuda.log")
    assert out[5:] == [
        "TypeError: add_kernel[grid]() missing required argument 'n_elements'",
        "TypeError: add_kernel[grid]() got multiple values for argument 'n_elements'",
        "TypeError: add_kernel.run() missing the keyword argument 'grid'",
        "ValueError: add_kernel[grid]: the grid has no dimensions",
        "MissingVariant: add_kernel[grid](...): no variant was built with num_ctas=2",
        "TypeError: add_kernel is a recorded kernel (launch: triton): the call's constexprs and options pick its "
        "config and its class is the JIT's, so select() has nothing to choose; `aotpack inspect -v` lists its variants",
        "fallback: add_kernel[grid](...): no variant was built for BLOCK=512, num_warps=4, num_stages=3 4 "
        "['BLOCK', 'grid']",
    ]
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 4
    assert "grid=4,1,1 block=128,1,1" in launches[0] and "p3=4096" in launches[0]
    assert "grid=4,1,1" in launches[1] and "p3=4000" in launches[1]
    # n_elements == 1 is folded into that code: parameter 3 is already Triton's (null) scratch pointer
    assert "grid=1,1,1 block=256,1,1" in launches[2] and " p3=0 " in launches[2]
    # a class no recorded call had (a misaligned pointer, an odd length) runs the floor, counted as a class miss
    assert "grid=1,1,1 block=128,1,1" in launches[3] and " p3=8 " in launches[3]
    assert out[0] == "[{'kernel': 'add_kernel', 'ran': '____', 'jit': '_DD_', 'calls': 1}]"
    assert out[1].startswith("missing: add_kernel[grid](...): no variant was built for BLOCK=512, num_warps=4")
    assert out[2].startswith("missing: add_kernel[grid](...): no variant was built for BLOCK=1024, num_warps=8")
    assert out[3] == "type: add_kernel[grid]() got an unexpected keyword argument 'colour'"
    assert out[4] == "<kernel add_kernel[grid]: 5 variants>"


def test_activate_makes_the_original_call_sites_launch_the_built_variants(recorded_site, fake_driver, tmp_path):
    code = (
        CAI_ARRAY
        + f"""
import sys
sys.path.insert(0, {str(ROOT / "examples")!r})
import triton
from add import add_kernel
import recorded_kernels as k
x, y, o = (Array(A + i * 0x1000000, (4096,), "<f4") for i in range(3))
print(k.activate(fallback="error"))
grid = lambda meta: (triton.cdiv(meta["n_elements"], meta["BLOCK"]),)
add_kernel[grid](x, y, o, 4096, BLOCK=1024)   # the user's call site, unchanged
add_kernel[grid](Array(A + 4, (8,), "<f4"), y, o, 8, BLOCK=1024)  # a class never recorded: the floor, no compile
try:
    add_kernel[grid](x, y, o, 4096, BLOCK=2048)
except k.MissingVariant as exc:
    print("missing")
print(k.stats()["class_misses"])
k.deactivate()
print("run" in add_kernel.__dict__)
"""
    )
    out, log = run_on_fake_driver(code, recorded_site, fake_driver, tmp_path / "cuda.log")
    assert out == ["['add_kernel']", "missing", "[{'kernel': 'add_kernel', 'ran': '____', 'jit': '_DD_', 'calls': 1}]",
                   "False"]  # fmt: skip
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 2 and "grid=4,1,1" in launches[0] and "grid=1,1,1" in launches[1]


COMPILE = """
import sys
sys.path.insert(0, {tests!r})
from triton import knobs
from integration.test_record import add_kernel, hook_call
knobs.runtime.jit_cache_hook(**hook_call(add_kernel(), {dtype!r}, "D", 1024))
"""


def _record(tmp_path, *program, env=None):
    import os
    import subprocess
    import sys

    out = tmp_path / "r.yaml"
    cmd = [sys.executable, "-m", "aotpack", "record", "-o", str(out), "--", *program]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    return done, out


def compile_code(dtype):
    return COMPILE.format(tests=str(ROOT / "tests"), dtype=dtype)


def test_any_command_is_recorded_with_its_child_processes(tmp_path):
    import os
    import sys

    child = compile_code("fp16")
    code = compile_code("fp32") + f"import subprocess\nsubprocess.run([sys.executable, '-c', {child!r}], check=True)\n"
    done, out = _record(tmp_path, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    kernel = yaml.safe_load(out.read_text())["kernels"]["add_kernel"]
    assert kernel["types"] == {"T": ["fp16", "fp32"]}, "the child process's compilation is recorded too"
    # a console script (what `vllm serve` or `torchrun` are), found on PATH
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "my-workload"
    script.write_text(f"#!{sys.executable}\n" + compile_code("bf16"))
    script.chmod(0o755)
    done, out = _record(tmp_path, "my-workload", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(out.read_text())["kernels"]["add_kernel"]["types"] == {"T": ["bf16", "fp16", "fp32"]}
    done, _ = _record(tmp_path, "no-such-workload")
    assert done.returncode == 7 and "no such program: no-such-workload (not a file, and not on PATH)" in done.stderr


@pytest.mark.parametrize(
    ("ending", "status"),
    [("sys.exit(3)", "exited with status 3"), ("import os; os._exit(5)", "exited with status 5"),
     ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "was killed by SIGKILL"),
     ("raise RuntimeError('boom')", "exited with status 1")],
)  # fmt: skip
def test_a_program_that_fails_leaves_the_recipe_and_keeps_its_capture_beside_it(tmp_path, ending, status):
    out = tmp_path / "r.yaml"
    out.write_text("# the team's recipe, not to be touched\n")
    done, _ = _record(tmp_path, "python", "-c", compile_code("fp32") + ending + "\n")
    assert done.returncode == 7, done.stderr
    assert f"the recorded program {status}: {out} is left as it was" in done.stderr
    assert out.read_text() == "# the team's recipe, not to be touched\n"
    partial = tmp_path / "r.partial.yaml"
    assert f"what it recorded (1 compilation) is in {partial}" in done.stderr
    assert yaml.safe_load(partial.read_text())["kernels"]["add_kernel"]["variants"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("kernels: [\n", "r.yaml:2:1: invalid YAML"), ("- a\n", "r.yaml:1:1: expected a mapping, got a list"),
     (b"package: \xff\n", "r.yaml:1:10: the recipe is not UTF-8 text"),
     ("kernels: 3\n", "r.yaml:1:10: kernels: expected a mapping"),
     ("targets: {sm_90a: 1}\n", "r.yaml:1:10: targets: expected a list"),
     ("kernels:\n  k: {launch: triton, variants: 3}\n", "r.yaml:2:33: kernels.k.variants: expected a list"),
     ("kernels:\n  k: {launch: triton, args: [1]}\n", "r.yaml:2:29: kernels.k.args: expected a mapping"),
     ("kernels:\n  k: {launch: triton, variants: [{config: {}}]}\n", "missing required key 'class'"),
     ("kernels:\n  k: {launch: triton, variants: [{config: 3, class: D}]}\n",
      "kernels.k.variants[0].config: expected a mapping"),
     ("kernels:\n  k: {launch: triton, variants: [{config: {num_warps: four}, class: D}]}\n",
      "kernels.k.variants[0].config.num_warps: expected an integer, got 'four'"),
     ("kernels:\n  k: {launch: triton, variants: [{config: {}, class: D, launches: -1}]}\n",
      "kernels.k.variants[0].launches: expected an integer >= 0"),
     ("kernels:\n  k: {launch: triton, autotuned: {}}\n", "kernels.k.autotuned: expected a list")],
)  # fmt: skip
def test_a_malformed_recipe_is_a_located_error_before_the_program_runs(tmp_path, text, message):
    out = tmp_path / "r.yaml"
    if isinstance(text, bytes):
        out.write_bytes(text)
    else:
        out.write_text(text)
    before = out.read_bytes()
    sentinel = tmp_path / "ran"
    done, _ = _record(tmp_path, "python", "-c", f"open({str(sentinel)!r}, 'w').close()\n" + compile_code("fp32"))
    assert done.returncode == 8 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not sentinel.exists(), "the program ran although its recording could not be merged"
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.yaml"]


def test_a_server_stopped_with_sigterm_is_recorded(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out, ready = tmp_path / "r.yaml", tmp_path / "ready"
    server = compile_code("fp32") + f"open({str(ready)!r}, 'w').close()\nimport time\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-m", "aotpack", "record", "-o", str(out), "--", "python", "-c", server],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    for _ in range(600):
        if ready.exists():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "1 compilation of 1 kernel" in stdout
    assert yaml.safe_load(out.read_text())["kernels"]["add_kernel"]["args"]["x_ptr"] == "*fp32"


def test_widen_builds_the_set_of_values_a_deployment_needs(tmp_path):
    jit = add_kernel()
    rec = recorded([hook_call(jit, "fp32", "D", 1024), hook_call(jit, "fp32", "", 1024)])
    path = tmp_path / "r.yaml"
    record.write(path, rec.events, "recorded_kernels", widen=dict([record.parse_widen("BLOCK=256..2048:pow2")]))
    rows = yaml.safe_load(path.read_text())["kernels"]["add_kernel"]["variants"]
    assert [r["config"]["BLOCK"] for r in rows] == [[256, 512, 1024, 2048]] * 2
    planned = plan.plan_variants(recipe.load(path))
    ids = [v.id for v in recorded_variants(recipe.load(path))]
    assert len(ids) == 8 and "add_kernel/BLOCK=512,w4,s3/sm_90a/DDDD" in ids  # one dtype: no type variable
    assert [v.id for v in planned if v.spec.origin == "floor"] == [f"add_kernel/BLOCK={b},w4,s3/sm_90a/____"
                                                                  for b in (256, 512, 1024, 2048)]  # fmt: skip
    text = path.read_text()
    again = recorded([hook_call(jit, "fp32", "D", 512), hook_call(jit, "fp32", "D", 4096)])  # one is in the set
    merged = record.recipe_text(again.events.compilations(), again.events.picks, yaml.safe_load(text))
    rows = yaml.safe_load(merged)["kernels"]["add_kernel"]["variants"]  # the recipe keeps widen:, which takes 4096's
    assert yaml.safe_load(text)["widen"] == {"BLOCK": [256, 512, 1024, 2048]}  # row too; it covers the old D row
    assert sorted(str(r["config"]["BLOCK"]) for r in rows) == ["[256, 512, 1024, 2048, 4096]",
                                                                "[256, 512, 1024, 2048]"]  # fmt: skip
    with pytest.raises(RecipeError, match="more than 65536 variants"):
        rows_only = "".join(line for line in text.splitlines(True) if not line.startswith("widen:"))
        recipe.parse(rows_only.replace("[256, 512, 1024, 2048]", str(list(range(1, 70000)))), path)


def test_a_report_merged_later_is_built_as_the_recipes_widen(tmp_path, capsys):
    """The issue's case: recorded with --widen, then a report (AOTPACK_REPORT) of another value merged with
    ``record --report`` (no --widen): its row takes the recipe's widen: too, and plan and the wheel build the
    product of every row, not the reported value alone."""
    jit = add_kernel()
    path = tmp_path / "r.yaml"
    rec = recorded([hook_call(jit, "fp32", "D", 1024)])
    assert record.write(path, rec.events, "recorded_kernels", widen=dict([record.parse_widen("BLOCK=256,512")]))
    sent: list = []
    record_agent.Agent(sink=sent.append).on_compile(**hook_call(jit, "fp32", "", 2048))
    report = tmp_path / "reports" / "recorded_kernels.1.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"format": "aotpack-report/1", "package": "recorded_kernels", "class_misses": [],
                                  "compilations": [e for e in sent if e.get("event") == "compile"]}))  # fmt: skip
    assert cli.main(["record", "-o", str(path), "--report", str(report.parent)]) == 0
    data = yaml.safe_load(path.read_text())
    assert data["widen"] == {"BLOCK": [256, 512]}
    assert [(r["config"]["BLOCK"], r["class"]) for r in data["kernels"]["add_kernel"]["variants"]] == [
        ([256, 512, 1024], "DDDD"), ([256, 512, 2048], "DDD_")]  # fmt: skip
    capsys.readouterr()
    assert cli.main(["plan", str(path)]) == 0
    out, err = capsys.readouterr()
    exact = {v.id for v in recorded_variants(recipe.load(path))}  # the rows' own classes (not their floors)
    assert exact == {
        f"add_kernel/BLOCK={b},w4,s3/sm_90a/{c}"
        for b, c in ((256, "DDDD"), (512, "DDDD"), (1024, "DDDD"), (256, "DDD_"), (512, "DDD_"), (2048, "DDD_"))
    }
    assert exact <= set(out.splitlines())
    assert "widen: BLOCK takes 256, 512 in every row of add_kernel" in err
    wheel = build(path, tmp_path / "dist", jobs=2).wheel
    built = {v["id"] for k in read_wheel(wheel)["kernels"].values() for v in k["variants"]}
    assert set(exact) <= built


@pytest.mark.parametrize(
    ("text", "values"),
    [("bs=1,2,4", [1, 2, 4]), ("bs=1..4", [1, 2, 3, 4]), ("bs=1..256:pow2", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
     ("bs=3..20:pow2", [4, 8, 16]), ("MODE=fast,exact", ["fast", "exact"]), ("F=true,false", [True, False]),
     ("eps=0.5,1e-3", [0.5, 1e-3]), ("bs=2,2,1", [2, 1])],
)  # fmt: skip
def test_widen_values_are_read(text, values):
    assert record.parse_widen(text) == (text.split("=")[0], values)


@pytest.mark.parametrize(
    ("text", "message"),
    [("bs", "expected NAME=VALUES"), ("1bs=1", "expected NAME=VALUES"), ("bs=0..8:pow2", "starts above 0"),
     ("bs=1..99999", "give between 1 and 4096 values"), ("bs=9..1", "give between 1 and 4096 values"),
     ("bs=" + ",".join(map(str, range(5000))), "give between 1 and 4096 values")],
)  # fmt: skip
def test_bad_widen_values_are_refused(text, message):
    from aotpack.errors import UsageError

    with pytest.raises(UsageError, match=message):
        record.parse_widen(text)


def test_a_program_running_an_untested_triton_is_refused_and_nothing_is_written(tmp_path):
    import os

    fake = tmp_path / "site"  # a Triton 3.5.1 as pip lays one out: its metadata, a package with knobs
    (fake / "triton").mkdir(parents=True)
    (fake / "triton" / "__init__.py").write_text("")
    (fake / "triton" / "knobs.py").write_text("")
    (fake / "triton-3.5.1.dist-info").mkdir()
    (fake / "triton-3.5.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: triton\nVersion: 3.5.1\n")
    done, out = _record(tmp_path, "python", "-c", "import triton.knobs",
                        env={"PYTHONPATH": f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})  # fmt: skip
    assert done.returncode == 7, done.stderr
    assert "the program runs Triton 3.5.1; aotpack records with Triton 3.6.x, 3.7.x, 3.8.x, 3.9.x" in done.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["site"]
