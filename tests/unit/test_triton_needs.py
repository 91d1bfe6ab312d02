"""What a Triton variant needs at launch, read off its metadata, and how a compile's failures and
leftovers are handled (no Triton needed)."""

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from aotpack.backends import LaunchNeeds, TmaLayout
from aotpack.backends.triton.compiler import _contained, _needs, _reason


def meta(**fields):
    base = dict(global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1,
                num_ctas=1, launch_cooperative_grid=False, launch_pdl=False, tensordesc_meta=[])  # fmt: skip
    return SimpleNamespace(**{**base, **fields})


def layout(**fields):
    return {"swizzle": 3, "elem_size": 2, "elem_type": 6, "block_size": [128, 64], "fp4_padded": False,
            "is_im2col": False, **fields}  # fmt: skip


def test_plain_variant_needs_nothing():
    assert _needs(meta(), 0) == LaunchNeeds()


def test_scratch_clusters_pdl_and_cooperative_launches():
    needs = _needs(meta(global_scratch_size=512, global_scratch_align=128, num_ctas=2, launch_pdl=True,
                        launch_cooperative_grid=True), 0)  # fmt: skip
    assert needs == LaunchNeeds(scratch=(512, 128), num_ctas=2, pdl=True, cooperative=True)


def test_descriptor_layouts_use_the_drivers_element_types():
    # Triton's device-side codes 8, 9, 10 are the driver's 10, 8, 9; the rest are the same
    needs = _needs(meta(tensordesc_meta=[layout(), layout(elem_type=8, elem_size=4, block_size=[64, 32])]), 2)
    assert isinstance(needs, LaunchNeeds)
    assert needs.tma == (TmaLayout(box=(128, 64), swizzle=3, elem_type=6, elem_size=2),
                         TmaLayout(box=(64, 32), swizzle=3, elem_type=10, elem_size=4))  # fmt: skip


def test_needs_the_runtime_cannot_meet_are_reasons():
    assert _needs(meta(tensordesc_meta=[layout(is_im2col=True)]), 1) == (
        "descriptor argument 1 needs an im2col tensor map, which aotpack cannot encode"
    )
    assert _needs(meta(tensordesc_meta=[layout(), layout(fp4_padded=True)]), 2) == (
        "descriptor argument 2 needs a padded fp4 tensor map, which aotpack cannot encode"
    )
    assert _needs(meta(tensordesc_meta=[layout()]), 2) == (
        "Triton describes 1 tensor descriptors for 2 descriptor arguments"
    )


def test_a_compile_s_ptxas_is_set_for_the_compile_only(monkeypatch):
    """Triton's ptxas variables point at aotpack's pick inside one compile and are put back after it (also after a
    failed one): the process that built (pip's backend, a Dask worker planning the next build) sees the user's
    settings, and its candidates, again; a value the user sets still wins."""
    from aotpack.backends.triton import compiler as backend

    for name in backend.USER_PTXAS:
        monkeypatch.delenv(name, raising=False)
    before = backend.ptxas_candidates()
    with backend._using_ptxas(before[0].path):
        assert [os.environ[n] for n in backend.USER_PTXAS] == [before[0].path] * 2
    assert not any(n in os.environ for n in backend.USER_PTXAS)
    assert backend.ptxas_candidates() == before
    monkeypatch.setenv(backend.USER_PTXAS[0], before[-1].path)
    with pytest.raises(RuntimeError), backend._using_ptxas(before[0].path):
        raise RuntimeError("a compile that failed")
    assert os.environ[backend.USER_PTXAS[0]] == before[-1].path and backend.USER_PTXAS[1] not in os.environ
    assert [p.path for p in backend.ptxas_candidates()] == [before[-1].path]


class PTXASError(Exception):  # Triton's name for it: _reason reads the type's name, as Triton has no common base
    pass


def test_a_ptxas_failure_is_pruned_for_ptxas_s_first_error():
    """Not for the repro command Triton ends its message with: that names a PTX file the compile's
    scratch folder took with it."""
    log = "".join(f"ptxas /tmp/s/tmpk8.ptx, line {n}; error   : State space incorrect for instruction 'cp.async'\n"
                  for n in (239, 252))  # fmt: skip
    exc = PTXASError(f"Internal Triton PTX codegen error\n`ptxas` stderr:\n{log}\nRepro command: ptxas -v x.ptx\n")
    kernel = SimpleNamespace(source=SimpleNamespace(function="matmul"))
    assert _reason(exc, kernel) == (  # type: ignore[arg-type]
        "PTXASError: ptxas, line 239: State space incorrect for instruction 'cp.async' (and 1 more)"
    )
    assert _reason(PTXASError("out of resources\nRepro command: ptxas x"), kernel) == (  # type: ignore[arg-type]
        "PTXASError: Repro command: ptxas x"
    )


class CompilationError(Exception):
    def __init__(self, src: str, lineno: int) -> None:
        super().__init__("at 9:4: an error in a helper the kernel calls")
        self.src, self.node, self.error_message = src, SimpleNamespace(lineno=lineno), "an error in the helper"


def test_a_compile_error_names_the_kernel_s_line_or_triton_s_message_where_the_line_is_elsewhere():
    kernel = SimpleNamespace(source=SimpleNamespace(function="scale"))
    src = "def scale(x):\n    y = helper(x)\n"
    assert _reason(CompilationError(src, 2), kernel) == (  # type: ignore[arg-type]
        "CompilationError in scale (line 2 of the function): y = helper(x): an error in the helper"
    )
    for past in (9, 0):  # a line of a helper's (Triton gives the kernel's source): Triton's own message
        assert _reason(CompilationError(src, past), kernel) == (  # type: ignore[arg-type]
            "CompilationError: at 9:4: an error in a helper the kernel calls"
        )


def test_a_compile_s_temporary_files_and_printing_stay_inside(tmp_path, capsys):
    """What Triton leaves in the temporary folder (a failed ptxas run's PTX) goes with the compile,
    and what it prints (the whole PTX) is not the build's output; tempfile and stdout are restored."""
    with _contained(str(tmp_path)):
        left = tempfile.NamedTemporaryFile(delete=False, suffix=".ptx")
        print("//\n// Generated by LLVM NVPTX Back-End\n" * 1000)
    assert Path(left.name).parent.parent == tmp_path and not Path(left.name).exists()
    assert list(tmp_path.iterdir()) == [] and tempfile.gettempdir() != str(tmp_path)
    print("after")
    assert capsys.readouterr().out == "after\n"
