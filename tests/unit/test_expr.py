import pytest

from aotpack import expr


@pytest.mark.parametrize(
    ("text", "env", "value"),
    [
        ("cdiv(n, BLOCK)", {"n": 1000, "BLOCK": 256}, 4),
        ("cdiv(n, BLOCK)", {"n": 0, "BLOCK": 256}, 0),
        ("-7 // 2", {}, -4),
        ("-7 % 3", {}, 2),
        ("7 % -3", {}, -2),
        ("max(1, M // 64) * 2 + min(a, b, 3)", {"M": 10, "a": 5, "b": 4}, 5),
        ("next_pow2(1000) - next_pow2(1) + next_pow2(0)", {}, 1024),
        ("(a + b) * c - -d", {"a": 1, "b": 2, "c": 3, "d": 4}, 13),
        (42, {}, 42),
    ],
)
def test_evaluate(text, env, value):
    assert expr.evaluate(expr.parse(text), env) == value


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("cdiv(a)", "cdiv() takes 2 arguments, got 1", 0),
        ("a +", "expected a number, a name or '(' but found 'the end'", 3),
        ("foo(1)", "unknown function 'foo' (known: cdiv, max, min, next_pow2, none, numel, size, stride)", 0),
        ("a $ b", "unexpected character '$'", 2),
        ("size(a, b)", "size() takes a constant dimension", 8),
        ("numel(2)", "numel() takes a pointer argument's name first", 0),
        ("(a", "expected ')' but found 'the end'", 2),
        ("a b", "unexpected 'b' after the expression", 2),
        ("a / b", "unexpected character '/'", 2),
    ],
)
def test_parse_errors(text, message, offset):
    with pytest.raises(expr.ExprError) as info:
        expr.parse(text)
    assert (str(info.value), info.value.offset) == (message, offset)


def test_division_by_zero_is_an_error_not_a_crash():
    with pytest.raises(ZeroDivisionError):
        expr.evaluate(expr.parse("a // b"), {"a": 1, "b": 0})


def test_to_c_is_floor_semantics_with_error_context():
    """Every operation goes through a runtime helper that reports division by zero and overflow."""
    e = expr.parse("cdiv(M, BM) * max(N // 2, 1) % 3 + size(a, 1) - -k")
    c = expr.to_c(e, lambda n: f"v[{n}]", lambda n: 7)
    assert c == (
        "aot_sub(x, aot_add(x, aot_mod(x, aot_mul(x, aot_cdiv(x, v[M], v[BM]), aot_max(aot_floordiv(x, v[N], "
        "INT64_C(2)), INT64_C(1))), INT64_C(3)), aot_size(x, 7, INT64_C(1))), aot_neg(x, v[k]))"
    )


def test_evaluation_refuses_what_leaves_int64_as_the_runtime_does():
    big = 1 << 62
    assert expr.evaluate(expr.parse("a * 2 - 1 + a * 2"), {"a": big // 2}) == 2 * big - 1
    for text, env in (("a * 4", {"a": big}), ("a - 1", {"a": -(1 << 63)}), ("-a", {"a": -(1 << 63)}),
                      ("a // -1", {"a": -(1 << 63)}), ("cdiv(a, -1)", {"a": -(1 << 63)})):  # fmt: skip
        with pytest.raises(ValueError, match="overflows 64-bit integers"):
            expr.evaluate(expr.parse(text), env)
    assert expr.evaluate(expr.parse("a % -1"), {"a": -(1 << 63)}) == 0
    assert expr.evaluate(expr.parse("cdiv(a, 1)"), {"a": -(1 << 63)}) == -(1 << 63)


def test_names_and_tensor_calls():
    e = expr.parse("cdiv(numel(x), B) + stride(y, 0) * k")
    assert [n.id for n in expr.names(e)] == ["B", "k"]
    assert [c.func for c in expr.tensor_calls(e)] == ["numel", "stride"]
    assert expr.unparse(e) == "(cdiv(numel(x), B) + (stride(y, 0) * k))"
