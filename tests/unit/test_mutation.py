"""The TTIR walk on hand-written IR: names reused in sibling regions, yields, if/else."""

from aotpack.backends.triton.mutation import recorded, written_arguments

HEADER = "tt.func public @k(%a: !tt.ptr<f32> loc(#l), %b: !tt.ptr<f32> loc(#l), %n: i32 loc(#l)) {"


def ir(*body: str) -> str:
    return "\n".join(["module {", HEADER, *body, "tt.return", "}", "}"])


def test_names_reused_in_sibling_regions_do_not_mix():
    text = ir(
        "scf.for %i = %c0 to %n step %c1 : i32 {",
        "  %p = tt.addptr %a, %i : !tt.ptr<f32>, i32",
        "  %v = tt.load %p : !tt.ptr<f32>",
        "}",
        "scf.for %i = %c0 to %n step %c1 : i32 {",
        "  %p = tt.addptr %b, %i : !tt.ptr<f32>, i32",
        "  tt.store %p, %v0 : !tt.ptr<f32>",
        "}",
    )
    assert written_arguments(text) == {"b"}


def test_pointers_carried_through_loops_and_branches():
    text = ir(
        "%r:1 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %a) -> (!tt.ptr<f32>) : i32 {",
        "  %q = tt.addptr %p, %c1 : !tt.ptr<f32>, i32",
        "  scf.yield %q : !tt.ptr<f32>",
        "}",
        "%s = scf.if %cond -> (!tt.ptr<f32>) {",
        "  scf.yield %r#0 : !tt.ptr<f32>",
        "} else {",
        "  scf.yield %b : !tt.ptr<f32>",
        "}",
        "%old = tt.atomic_rmw fadd, acq_rel, gpu, %s, %x : (!tt.ptr<f32>, f32) -> f32",
    )
    assert written_arguments(text) == {"a", "b"}


def test_loaded_values_are_not_addresses():
    text = ir(
        "%idx = tt.load %a : !tt.ptr<i32>",
        "%p = tt.addptr %b, %idx : !tt.ptr<f32>, i32",
        "tt.store %p, %x : !tt.ptr<f32>",
    )
    assert written_arguments(text) == {"b"}


def test_recorded_writes_are_a_sorted_union():
    assert recorded([("out", "c"), (), ("a",), None]) == ("a", "c", "out")
