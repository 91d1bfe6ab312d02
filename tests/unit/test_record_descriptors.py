"""Host tensor descriptors, recorded and launched: the JIT's ``tensordesc<bf16[64, 128]>`` as a recorded kernel's
descriptor argument (dtype a type variable where rows differ, block literal or named by constexprs, rows no
recipe type says dropped with the reason), and activate()'s launch taking a call's TensorDescriptors as the
tensors they describe, a descriptor the variants were not built for going to the fallback."""

import importlib.util
import json
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aotpack import record
from aotpack.record import kernels
from aotpack.runtime import _aotpack_desc, _aotpack_jit, _aotpack_runtime, _aotpack_source

pytestmark = pytest.mark.unit

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "hopper" / "tma_matmul.py"
PARAMS = ["a_desc", "b_desc", "c_desc", "M", "N", "K", "programs", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
REF = "kernels/mm.py:mm"


def event(dtype: str = "fp16", bm: int = 128, bn: int = 256, bk: int = 64, a_desc: str | None = None,
          c_dtype: str | None = None, number: int = 0) -> dict[str, Any]:  # fmt: skip
    """A compile event of matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, programs, BLOCK_M, ...) as the agent
    writes it: Triton's signature of host TensorDescriptors (N and K multiples of 16)."""
    signature = {"a_desc": a_desc or f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{c_dtype or dtype}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
                 "programs": "i32", **dict.fromkeys(PARAMS[7:], "constexpr")}  # fmt: skip
    function = {"module": "m", "qualname": "mm", "name": "mm", "identity": "mm.py", "source": "mm.py",
                "params": [[p, i >= 7] for i, p in enumerate(PARAMS)]}  # fmt: skip
    return {"event": "compile", "number": number, "function": function, "signature": signature,
            "constants": [[[7], bm], [[8], bn], [[9], bk], [[10], 8]],
            "attrs": [[[4], [["tt.divisibility", 16]]], [[5], [["tt.divisibility", 16]]]], "num_warps": 8,
            "num_stages": 3, "options": {}, "arch": 90, "sources": {"mm.py": "text"}}  # fmt: skip


def recorded(*compiled: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """The recorded kernel of these events, the rows dropped (why), and what was skipped."""
    events = record.Events()
    for number, e in enumerate(compiled):
        events.add({**e, "number": number})
    dropped: dict[str, str] = {}
    data = kernels.recipe_data(events.compilations(), events.picks, dropped=dropped)
    return data["kernels"].get("mm", {}), dropped, events.skipped


def test_one_row_takes_its_dtype_and_block_as_literals():
    kernel, dropped, skipped = recorded(event("bf16"))
    assert kernel["args"] == {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[64, 256]>",
                              "c_desc": "tensordesc<bf16[128, 256]>", "M": "i32", "N": "i32", "K": "i32",
                              "programs": "i32"}  # fmt: skip
    assert "types" not in kernel and not dropped and not skipped
    (row,) = kernel["variants"]
    assert row["class"] == "____DD_"  # a descriptor takes no specialization: the JIT keys it on its type


def test_rows_of_two_dtypes_share_a_type_variable_and_a_differing_block_names_its_constexpr():
    kernel, dropped, _ = recorded(event("fp16", bm=128), event("bf16", bm=64), event("fp16", bm=64, c_dtype="fp32"))
    assert kernel["types"] == {"T": ["bf16", "fp16"], "T1": ["bf16", "fp16", "fp32"]}
    assert kernel["args"]["a_desc"] == "tensordesc<T[BLOCK_M, 64]>"
    assert kernel["args"]["b_desc"] == "tensordesc<T[64, 256]>"
    assert kernel["args"]["c_desc"] == "tensordesc<T1[BLOCK_M, 256]>"
    assert sorted((r["types"]["T"], r["types"]["T1"], r["config"]["BLOCK_M"]) for r in kernel["variants"]) == [
        ("bf16", "bf16", 64), ("fp16", "fp16", 128), ("fp16", "fp32", 64)]  # fmt: skip
    assert not dropped


def test_a_block_no_constexpr_says_keeps_the_most_frequent_and_drops_the_rest_with_the_reason():
    kernel, dropped, _ = recorded(event(a_desc="tensordesc<fp16[128, 64]>"), event(bn=128),
                                  event(a_desc="tensordesc<fp16[64, 64]>", bn=64))  # fmt: skip
    assert kernel["args"]["a_desc"] == "tensordesc<fp16[128, 64]>" and kernel["args"]["b_desc"] == (
        "tensordesc<fp16[64, BLOCK_N]>")  # fmt: skip
    assert sorted(r["config"]["BLOCK_N"] for r in kernel["variants"]) == [128, 256]
    ((where, why),) = dropped.items()
    assert where == f"{REF} (BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=8)"
    assert why.startswith("a_desc had the block [64, 64] here and [128, 64] in the kernel's other variants, and no "
                          "constexpr equals its sizes in every variant")  # fmt: skip


def test_a_descriptor_passed_as_none_is_dropped_not_folded():
    kernel, dropped, _ = recorded(event(), event(bm=64, a_desc="constexpr"))
    assert kernel["args"]["a_desc"] == "tensordesc<fp16[128, 64]>" and len(kernel["variants"]) == 1
    (why,) = dropped.values()
    assert why.startswith("a_desc was None here and a tensor descriptor in the kernel's other variants")


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("tensordesc<bf16[64, 128],#ttg.nvmma_shared<{swizzlingByteWidth = 128}>>",
         "argument a_desc is a tensor descriptor with the layout '#ttg.nvmma_shared<{swizzlingByteWidth = 128}>', "
         "which aotpack cannot encode"),
        ("tensordesc<bf16>", "argument a_desc is a tensor descriptor of a form aotpack does not read"),
        ("tensordesc<q7[64, 128]>", "type 'q7' has no aotpack dtype"),
        ("tensordesc<fp16[², 64]>", "is not a tensor descriptor's type"),  # (int() refuses what str.isdigit() takes)
        ("tensordesc<fp16[" + "9" * 5000 + ", 64]>", "is not a tensor descriptor's type"),
        ("tensordesc<fp16[BM, 64]>", "is not a tensor descriptor's type"),
    ],
)  # fmt: skip
def test_a_descriptor_aotpack_cannot_encode_is_not_recorded_and_says_why(signature, message):
    kernel, _, skipped = recorded(event(a_desc=signature))
    assert kernel == {} and any(why.startswith(message) or message in why for why in skipped.values()), skipped


def test_a_recording_merged_again_adds_nothing():
    kernel, _, _ = recorded(event("fp16", bm=128), event("bf16", bm=64))
    again = record.Events()
    for number, e in enumerate((event("bf16", bm=64), event("fp16", bm=128))):
        again.add({**e, "number": number})
    existing = {"kernels": {"mm": kernel}, "targets": ["sm_90a"]}
    merged = kernels.recipe_data(again.compilations(), {}, existing=existing)["kernels"]["mm"]
    assert merged == kernel
    assert sorted(c.types[0][1] for c in kernels.compilations_of(kernel)) == ["tensordesc<bf16[64, 64]>",
                                                                               "tensordesc<fp16[128, 64]>"]  # fmt: skip


def test_a_jit_fallback_reports_a_descriptor_compilation_in_the_recorded_form():
    """activate(fallback="jit")'s coverage() holds what the hook got (_aotpack_jit.payload), read as a recording."""
    name = f"tma_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, MATMUL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    recorded_event = event("bf16")
    compile = {"signature": recorded_event["signature"], "constants": {(7,): 128, (8,): 256, (9,): 64, (10,): 8},
               "configs": [{(4,): [["tt.divisibility", 16]], (5,): [["tt.divisibility", 16]]}], "num_warps": 8,
               "num_stages": 3, "specialization_data": json.dumps({"target": {"arch": 90}, "options": {}})}  # fmt: skip
    reported = _aotpack_jit.payload("key", SimpleNamespace(jit_function=module.matmul_tma_kernel), compile)
    events = record.Events()
    events.add(
        {**reported, "sources": {n: _aotpack_source.source_text(n) for n in _aotpack_source.source_names(reported)}}
    )
    (c,) = events.compilations()
    assert c.types[:3] == (("a_desc", "tensordesc<bf16[128, 64]>"), ("b_desc", "tensordesc<bf16[64, 256]>"),
                           ("c_desc", "tensordesc<bf16[128, 256]>"))  # fmt: skip
    assert c.states == ("", "", "", "", "D", "D", "")


# ---------------------------------------------------------------- the launch


class Base:
    """What TensorDescriptor and the conversion read of a torch tensor."""

    dtype = SimpleNamespace(itemsize=2, is_floating_point=True)

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...], ptr: int = 0x1000) -> None:
        self.shape, self.strides, self.ptr = shape, strides, ptr

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def as_strided(self, shape: tuple[int, ...], strides: tuple[int, ...]) -> "Base":
        if shape[0] * strides[0] > self.shape[0] * self.strides[0]:
            raise RuntimeError("setStorage: sizes out of bounds for storage")
        return Base(shape, strides, self.ptr)


class Missing(Exception):
    pass


NAMES = ("a_desc", "n", "BLOCK")
ARGS = [{"name": "a_desc", "type": "tensordesc<T[BLOCK, 64]>", "kind": "tensor"}, {"name": "n", "type": "i32"}]


def launcher(fallback: Any = None, refuse: bool = False) -> tuple[Any, list[Any]]:
    """The wrapped runner of a kernel (a_desc: tensordesc<T[BLOCK, 64]>, n, BLOCK) and what its C runner got."""
    got: list[Any] = []

    def run(*args: Any, **kwargs: Any) -> str:
        if refuse:
            raise Missing("no variant for T=fp32")
        got.append((args, kwargs))
        return "launched"

    described = _aotpack_desc.descriptors(ARGS, NAMES)
    assert described == ((0, "a_desc", ("BLOCK", 64)),)
    return _aotpack_desc.wrap(
        run, fallback, Missing, "k", NAMES, described, {"BLOCK": 128}, _aotpack_runtime._plain
    ), got


def test_a_descriptor_of_a_whole_tensor_is_launched_as_the_tensor_itself():
    from triton.tools.tensor_descriptor import TensorDescriptor

    run, got = launcher()
    base = Base((256, 64), (64, 1))
    assert run(TensorDescriptor.from_tensor(base, [128, 64]), 7, grid=(1,)) == "launched"
    assert run(n=7, a_desc=TensorDescriptor.from_tensor(base, [32, 64]), BLOCK=32, grid=(1,)) == "launched"
    assert got[0] == ((base, 7), {"grid": (1,)}) and got[1][1]["a_desc"] is base


def test_a_descriptor_of_part_of_its_base_is_launched_as_a_view_at_the_same_address():
    from triton.tools.tensor_descriptor import TensorDescriptor

    run, got = launcher()
    base = Base((256, 128), (128, 1), ptr=0x2000)
    run(TensorDescriptor(base, [200, 64], [128, 1], [128, 64]), 7, grid=(1,))
    view = got[0][0][0]
    assert (view.shape, view.strides, view.ptr) == ((200, 64), (128, 1), 0x2000)


def test_a_descriptor_the_variants_were_not_built_for_goes_to_the_fallback_as_called():
    from triton.tools.tensor_descriptor import TensorDescriptor

    fell: list[Any] = []

    def jit(why: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        fell.append((why, args, kwargs))
        return "jit"

    run, got = launcher(jit)
    base = Base((256, 64), (64, 1))
    other_block = TensorDescriptor.from_tensor(base, [64, 64])
    nan = TensorDescriptor.from_tensor(base, [128, 64], padding="nan")
    beyond = TensorDescriptor(base, [512, 64], [64, 1], [128, 64])
    for call in ((other_block, 7), (nan, 7), (base, 7), (beyond, 7)):
        assert run(*call, grid=(1,)) == "jit"
    assert not got and [args for _, args, _ in fell] == [(other_block, 7), (nan, 7), (base, 7), (beyond, 7)]
    assert [why for why, _, _ in fell] == [
        "k[grid](...): argument a_desc is a TensorDescriptor of block [64, 64]; the variant for these constexprs "
        "was built for [128, 64]; record a run that makes this call",
        "k[grid](...): argument a_desc is a TensorDescriptor with padding='nan', which aotpack does not encode; "
        "record a run that makes this call",
        "k[grid](...): argument a_desc is a Base; the variants were built for a TensorDescriptor; record a run that "
        "makes this call",
        "k[grid](...): argument a_desc: a TensorDescriptor whose shape and strides no view of its base has "
        "(setStorage: sizes out of bounds for storage); record a run that makes this call",
    ]


def test_a_miss_of_the_native_runner_falls_back_with_the_descriptors_as_called_or_raises():
    from triton.tools.tensor_descriptor import TensorDescriptor

    desc = TensorDescriptor.from_tensor(Base((256, 64), (64, 1)), [128, 64])
    fell: list[Any] = []
    run, _ = launcher(lambda why, args, kwargs: fell.append((why, args)), refuse=True)
    run(desc, 7, grid=(1,))
    assert fell == [("no variant for T=fp32", (desc, 7))]
    strict, _ = launcher(None, refuse=True)
    with pytest.raises(Missing, match="no variant for T=fp32"):
        strict(desc, 7, grid=(1,))
    with pytest.raises(Missing, match="padding='nan'"):
        strict(TensorDescriptor.from_tensor(Base((256, 64), (64, 1)), [128, 64], padding="nan"), 7, grid=(1,))
