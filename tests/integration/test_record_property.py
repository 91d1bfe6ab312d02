"""Every recording builds: hook streams of a kernel with an argument of every kind and a constexpr of every kind
the JIT takes (tests/fixtures/kernels/every_kind.py), generated, recorded (in two sittings: the second merges
into the first's recipe), and the recipe read by aotpack build's loader and planner: the variants planned are
exactly those the hooks saw, and the autotuner's picks come back."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aotpack import model, record  # noqa: E402
from aotpack.backends import recipes as recipe  # noqa: E402
from aotpack.backends.triton import introspect  # noqa: E402
from aotpack.plan import variants as plan  # noqa: E402
from aotpack.recipe import sources as _sources  # noqa: E402
from aotpack.runtime import _aotpack_tuners  # noqa: E402

from .helpers import recorded_variants  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "fixtures" / "kernels"
PARAMS = ["a_ptr", "b_ptr", "n", "m", "scale", "flag", "NUMBER", "RATIO", "FLAG", "MODE", "NOTHING", "DTYPE", "SHAPE",
          "FN"]  # fmt: skip


def load(function):
    return _sources.load(model.Source(path=KERNELS / "every_kind.py", module=None, function=function))


def jit():
    return introspect.unwrap(load("every_kind"))


scalars = st.one_of(st.integers(-(2**40), 2**40), st.floats(-1e6, 1e6, allow_nan=False), st.booleans(),
                    st.sampled_from(["fast", "exact", "a/b", "", "evict first", "a,b=c", "'q'", "é"]),
                    st.none())  # text of every kind Triton takes: empty (an eviction policy left empty) and odd  # fmt: skip
DTYPES = ["fp16", "bf16", "fp32", "i32"]


def constexpr():
    """A constexpr's value as Triton gives it to the hook, of every kind."""
    import torch
    import triton.language as tl

    leaf = st.one_of(scalars, st.sampled_from([tl.float16, tl.bfloat16, tl.float32, tl.int8]),
                     st.sampled_from([torch.float16, torch.int32]), st.just("function"))  # fmt: skip
    return st.recursive(leaf, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=4)


@st.composite
def compilation(draw, scalar_types):
    states = {"a_ptr": draw(st.sampled_from("D_N")), "b_ptr": draw(st.sampled_from("D_")),
              "n": draw(st.sampled_from("D1_N")), "m": draw(st.sampled_from("D1_"))}  # (n: None in some calls)  # fmt: skip
    dtype = draw(st.sampled_from(DTYPES))
    consts = {name: draw(constexpr()) for name in PARAMS[6:]}
    return {"states": states, "dtype": dtype, "b_dtype": draw(st.sampled_from(DTYPES)), "consts": consts,
            "num_warps": draw(st.sampled_from([1, 2, 4, 8])), "num_stages": draw(st.integers(1, 4)),
            "types": scalar_types}  # fmt: skip


def hook(fn, c):
    """What Triton's JIT passes its jit_cache_hook for this compilation."""
    value_of = {"function": load("twice")}
    signature, constants, attrs = {}, {}, {}
    types = {"a_ptr": f"*{c['dtype']}", "b_ptr": f"*{c['b_dtype']}", "n": c["types"][0], "m": c["types"][1],
             "scale": "fp32", "flag": "i1"}  # fmt: skip
    for index, name in enumerate(PARAMS):
        if name in c["consts"]:
            signature[name] = "constexpr"
            value = c["consts"][name]
            constants[(index,)] = _deep(value, value_of)
            continue
        state = c["states"].get(name, "")
        if state in ("N", "1"):
            signature[name] = "constexpr"
            constants[(index,)] = None if state == "N" else 1
            continue
        signature[name] = types[name]
        if state == "D":
            attrs[(index,)] = [["tt.divisibility", 16]]
    spec = {"options": {"num_warps": c["num_warps"], "num_stages": c["num_stages"]}, "target": {"arch": 90}}
    compile = {"signature": signature, "constants": constants, "configs": [attrs], "num_warps": c["num_warps"],
               "num_stages": c["num_stages"], "specialization_data": json.dumps(spec)}  # fmt: skip
    return {"key": json.dumps(c, default=str, sort_keys=True), "repr": "", "compile": compile,
            "fn": SimpleNamespace(module=fn.fn.__module__, name=fn.fn.__qualname__, jit_function=fn),
            "is_manual_warmup": False, "already_compiled": False}  # fmt: skip


def _deep(value, value_of):
    if isinstance(value, tuple):
        return tuple(_deep(v, value_of) for v in value)
    return value_of.get(value, value) if isinstance(value, str) else value


def expected(c):
    """The variant a compilation should plan as: (pointer dtypes, config's constexprs as recipes say them,
    num_warps, num_stages, class)."""
    letters = "".join(c["states"].get(n, "_") for n in ("a_ptr", "b_ptr", "n", "m"))
    return (c["dtype"] if c["states"]["a_ptr"] != "N" else None, c["b_dtype"], _canon(c["consts"]),
            c["num_warps"], c["num_stages"], letters)  # fmt: skip


def _canon(consts):
    def one(v):
        if isinstance(v, tuple):
            return ("tuple", tuple(one(x) for x in v))
        if type(v).__name__ == "dtype":
            return ("dtype", str(v).removeprefix("torch."))
        return ("function", "twice") if v == "function" else v

    return tuple((n, one(v)) for n, v in sorted(consts.items()))


def planned(v):
    def one(x):
        if isinstance(x, tuple):
            return ("tuple", tuple(one(y) for y in x))
        if isinstance(x, model.DtypeConst):
            return ("dtype", x.name)
        return ("function", x.source.function) if isinstance(x, model.FunctionConst) else x

    a = v.kernel.arg("a_ptr")
    states = v.spec.states
    letters = "".join(s or "_" for s in states[:4])
    a_dtype = None if states[0] == "N" else v.dtype_of("a_ptr") if a.pointer else None
    return (a_dtype, v.dtype_of("b_ptr"), tuple(sorted((n, one(x)) for n, x in v.config.constexprs)),
            v.config.num_warps, v.config.num_stages, letters)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(data=st.data())
def test_every_recording_builds_exactly_what_was_compiled(tmp_path_factory, data):
    scalar_types = data.draw(st.tuples(st.sampled_from(["i32", "i64"]), st.sampled_from(["i32", "i64"])))
    first = data.draw(st.lists(compilation(scalar_types), min_size=1, max_size=6))
    second = data.draw(st.lists(compilation(scalar_types), max_size=4))
    folder = tmp_path_factory.mktemp("rec")
    path = folder / "r.yaml"
    fn = jit()
    for sitting in (first, second):
        rec = record.Recording()
        for c in sitting:
            rec.on_compile(**hook(fn, c))
        assert not rec.events.skipped, rec.events.skipped
        if sitting:
            record.write(path, rec.events, "recorded_kernels")
    loaded = recipe.load(path)
    exact = recorded_variants(loaded)
    got = sorted(map(repr, (planned(v) for v in exact)))
    want = sorted(map(repr, dict.fromkeys(expected(c) for c in first + second)))
    assert got == want
    # the floors add classes of those, never a config or a type binding the recording did not compile
    assert {(v.binding, v.config) for v in plan.plan_variants(loaded)} == {(v.binding, v.config) for v in exact}


@pytest.mark.parametrize(
    ("wrapper", "picked"), [("tuned", ({"NUMBER": 64}, 4)), ("heuristic_outside", ({"NUMBER": 32}, 2))]
)
def test_an_autotuned_and_heuristic_kernel_s_picks_come_back(tmp_path, wrapper, picked):
    """@triton.autotune outside @triton.heuristics and inside it (fla's kernels): the picks are found either way."""
    import triton.language as tl

    wrapped = load(wrapper)
    fn = introspect.unwrap(wrapped)
    c = {"states": {"a_ptr": "D", "b_ptr": "D", "n": "D", "m": "_"}, "dtype": "fp16", "b_dtype": "fp16",
         "consts": {"NUMBER": 64, "RATIO": 0.5, "FLAG": True, "MODE": "fast", "NOTHING": None, "DTYPE": tl.float16,
                    "SHAPE": (1, 2), "FN": "function"}, "num_warps": 4, "num_stages": 3, "types": ("i32", "i32")}  # fmt: skip
    rec = record.Recording()
    rec.on_compile(**hook(fn, c))
    tuner = _aotpack_tuners.tuner_of(wrapped)
    tuner.cache[(4096, "torch.float16")] = tuner.configs[0]  # what the autotuner picked for a key
    rec.stop()  # reads the picks (the agent's exit)
    path = tmp_path / "r.yaml"
    record.write(path, rec.events, "recorded_kernels")
    (kernel,) = recipe.load(path).kernels
    assert kernel.triton is not None
    assert [(p.key, dict(p.kwargs), p.num_warps) for p in kernel.triton.picks] == [((4096, "torch.float16"), *picked)]


def test_an_integer_none_in_one_call_and_one_in_another_keeps_both_classes(tmp_path):
    """A low-bit matmul library's stride that is None in some calls and the integer 1 in others: an integer
    argument that may be left out, with a row of each class (it was written as a pointer, and the rows whose
    class said 1 were refused by the build)."""
    import triton.language as tl

    consts = {"NUMBER": 64, "RATIO": 0.5, "FLAG": True, "MODE": "", "NOTHING": None, "DTYPE": tl.float16,
              "SHAPE": (1, 2), "FN": "function"}  # fmt: skip
    rec = record.Recording()
    for n in ("N", "1", "D"):
        c = {"states": {"a_ptr": "D", "b_ptr": "D", "n": n, "m": "_"}, "dtype": "fp16", "b_dtype": "fp16",
             "consts": consts, "num_warps": 4, "num_stages": 3, "types": ("i32", "i32")}  # fmt: skip
        rec.on_compile(**hook(jit(), c))
    path = tmp_path / "r.yaml"
    record.write(path, rec.events, "recorded_kernels")
    (kernel,) = recipe.load(path).kernels
    assert kernel.arg("n").kind == "int" and kernel.arg("n").optional
    assert sorted(planned(v)[-1] for v in recorded_variants(recipe.load(path))) == ["DD1_", "DDD_", "DDN_"]
