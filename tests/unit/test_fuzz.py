"""Property tests of the recipe loader and the expression parser on hostile input: only aotpack's own
errors may come out (a RecipeError or ExprError, never a traceback). The example counts keep CI fast;
`AOTPACK_FUZZ_EXAMPLES=20000 pytest tests/unit/test_fuzz.py` runs a larger campaign."""

import os
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aotpack import expr  # noqa: E402
from aotpack.backends import recipes as recipe  # noqa: E402
from aotpack.errors import RecipeError  # noqa: E402

from ..shared import GOOD  # noqa: E402

EXAMPLES = int(os.environ.get("AOTPACK_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
PIECES = [
    "{",
    "}",
    "[",
    "]",
    ":",
    "-",
    "'",
    '"',
    "!!",
    "&a",
    "*a",
    "<<",
    "\n",
    "  ",
    "\t",
    "#",
    "%",
    "|",
    ">",
    "\x00",
    "\x07",
    "\ufeff",
    "é",
    "9" * 30,
    "1e999",
    "null",
    "true",
    "(",
    ")",
    "//",
    "*T:16",
    "cdiv(",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """GOOD with a few of its characters replaced, deleted or given hostile pieces."""
    text = GOOD
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)))
        end = at + draw(st.integers(0, 8))
        text = text[:at] + ("" if action == "delete" else piece) + text[end if action != "insert" else at :]
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):  # and sometimes bytes that are not UTF-8 at all
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=4)) + data[at:]
    return data


@FUZZ
@given(data=mutated())
def test_mutated_recipes_fail_only_with_recipe_errors(kernel_dir: Path, data: bytes) -> None:
    path = kernel_dir / "r.yaml"
    path.write_bytes(data)
    try:
        recipe.load(path)
    except RecipeError as exc:
        assert exc.where is not None or "recipe" in str(exc), str(exc)  # located, or about the file itself


TOKENS = [*"0123456789abnxyz_+-*/%(),<>=! ", "cdiv", "size", "none", "min", "99999999999999999999", "//", "=="]


@FUZZ
@given(text=st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_random_expressions_fail_only_with_expression_errors(text: str) -> None:
    try:
        expr.parse(text)
    except expr.ExprError:
        pass
