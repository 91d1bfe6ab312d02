"""What a Triton variant needs at launch, read off its metadata (no Triton needed)."""

from types import SimpleNamespace

from aotpack.compilers import LaunchNeeds, TmaLayout
from aotpack.compilers.triton import _needs


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


def test_the_ptxas_a_compile_picked_is_not_taken_for_the_users_choice(monkeypatch):
    """A process that compiled (and so set Triton's ptxas variables itself) and then plans another
    build, as a Dask worker does, still gets every candidate; a value the user sets still wins."""
    from aotpack.compilers import triton as backend

    for name in backend.USER_PTXAS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(backend, "_set_here", {})
    before = backend.ptxas_candidates()
    backend._use_ptxas(before[0].path)
    assert backend.ptxas_candidates() == before
    monkeypatch.setenv(backend.USER_PTXAS[0], before[-1].path)
    assert [p.path for p in backend.ptxas_candidates()] == [before[-1].path]
