"""The reference pages say what the code does: every recipe key the loader accepts is in docs/recipe.md and every
key documented there is one it accepts; every command and option of the CLI's parser is in docs/cli.md, and no
option it lacks; the exit codes there are the ones the CLI returns. And the site holds together as strict MkDocs
requires (its build, `make docs`, is not part of the suite)."""

from __future__ import annotations

import argparse
import re
import unicodedata
from pathlib import Path

import pytest
import yaml

from aotpack import errors, recorded
from aotpack.backends import recipes
from aotpack.backends.triton import recipe as triton_recipe
from aotpack.commands import cli
from aotpack.errors import RecipeError
from aotpack.recipe import args, kernel, read

from ..shared import GOOD

DOCS = Path(__file__).resolve().parents[2] / "docs"

# each "### ..." key table of docs/recipe.md, and the loader's own list of the keys that mapping takes
LOADER_KEYS: dict[str, tuple[str, ...]] = {
    "Top-level keys": read._top_keys(recipes.READERS),
    "Kernel keys": kernel.keys(recipes.READERS),
    "Argument keys": args._ARG_KEYS,
    "Dispatch row keys": kernel._RULE_KEYS,
    "Tune keys": kernel.TUNE_KEYS,
    "Option keys (Triton)": triton_recipe._OPTION_KEYS,
    "Recorded row keys (`launch: triton`)": (*recorded.ROW_KEYS, *recorded.PICK_KEYS),
    "Recorded constexpr value keys": triton_recipe._RECORDED_TAGS,
}


def sections(text: str, level: str) -> dict[str, str]:
    """Heading -> the text under it, for the headings of one level ("##", "###")."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def first_cells(section: str) -> set[str]:
    """The backticked names in the first cell of each table row (a row's key, or an option and its aliases)."""
    names: set[str] = set()
    for row in re.findall(r"^\| ([^|]*) \|", section, re.M):
        names |= set(re.findall(r"`([^`]+)`", row))
    return names


def key_tables() -> dict[str, str]:
    """The key tables of docs/recipe.md: the "###" sections of its "## Keys"."""
    text = (DOCS / "recipe.md").read_text()
    return sections(sections(text, "##")["Keys"], "###")


def test_every_key_table_of_the_recipe_page_is_checked() -> None:
    assert set(key_tables()) == {*LOADER_KEYS, "Bound constexpr keys"}


@pytest.mark.parametrize("table", sorted(LOADER_KEYS))
def test_the_recipe_page_documents_exactly_the_keys_the_loader_accepts(table: str) -> None:
    documented = first_cells(key_tables()[table])
    accepted = set(LOADER_KEYS[table])
    assert accepted - documented == set(), f"keys the loader accepts that docs/recipe.md does not document ({table})"
    assert documented - accepted == set(), f"keys docs/recipe.md documents that the loader refuses ({table})"


def test_bound_constexpr_keys_are_the_ones_the_loader_lists(kernel_dir: Path) -> None:
    """The loader names its bound constexpr's keys only in its refusal of another (no close match lists them)."""
    text = GOOD.replace("    constexprs: {BLOCK: [256, 1024]}",
                        "    constexprs: {BLOCK: {values: [256], equals: n_elements, zzzzzz: 1}}")  # fmt: skip
    assert text != GOOD
    with pytest.raises(RecipeError, match=r"unknown key 'zzzzzz'.*\(expected one of: ([\w, ]+)\)") as caught:
        recipes.parse(text, kernel_dir / "r.yaml")
    listed = re.search(r"expected one of: ([\w, ]+)\)", str(caught.value))
    assert listed is not None
    assert first_cells(key_tables()["Bound constexpr keys"]) == set(listed.group(1).split(", "))


def parser_arguments() -> dict[str, set[str]]:
    """Each command of the parser ("" for the top level) -> its option strings and positional names."""
    parser = cli._parser()
    out: dict[str, set[str]] = {"": set()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = {
                    s
                    for a in sub._actions
                    if not isinstance(a, argparse._HelpAction)
                    for s in (a.option_strings or [a.dest])
                }
        elif not isinstance(action, argparse._HelpAction):
            out[""] |= set(action.option_strings)
    return out


def test_the_cli_page_documents_every_command_and_option() -> None:
    text = (DOCS / "cli.md").read_text()
    by_heading = sections(text, "##")
    documented = {h.removeprefix("aotpack "): first_cells(s) for h, s in by_heading.items() if h.startswith("aotpack ")}
    documented[""] = first_cells(text[: text.index("\n## ")])
    arguments = parser_arguments()
    assert set(documented) == set(arguments), "a command of the parser without its section on docs/cli.md, or back"
    for command, names in arguments.items():
        assert names == documented[command], (
            f"aotpack {command}: parser {sorted(names)}, docs/cli.md {sorted(documented[command])}"
        )


def test_the_cli_page_lists_every_exit_code_as_the_cli_returns_it() -> None:
    text = (DOCS / "cli.md").read_text()
    table = dict(re.findall(r"^\| (\d+) \| `(\w+)`", text, re.M))
    assert {int(code): name for code, name in table.items()} == {
        cls.exit_code: cls.__name__ for cls in errors.EXIT_CODES
    }
    assert re.search(r"^\| 130 \| \| interrupted", text, re.M), "Ctrl-C's code, cli.main's own"


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs' toc extension makes it (Python-Markdown's slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def links(text: str) -> list[str]:
    """The targets of the Markdown links of a page, outside code."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = re.sub(r"`[^`]*`", "", prose)
    return re.findall(r"\]\(([^)\s]+)\)", prose)


def test_the_site_builds_what_strict_mkdocs_checks() -> None:
    """What `mkdocs build --strict` would refuse, checked without MkDocs: a page left out of nav, a nav entry
    without its page, a link to a page or anchor that does not exist; and the changelog's snippet's file."""
    config = yaml.safe_load((DOCS.parent / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["docs_dir"] == "docs"
    in_nav = {page for entry in config["nav"] for page in entry.values()}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert in_nav == pages
    anchors = {p: {slug(h) for h in re.findall(r"^#+ (.+)$", (DOCS / p).read_text(), re.M)} for p in pages}
    for page in pages:
        for target in links((DOCS / page).read_text()):
            if target.startswith(("http://", "https://")):
                continue
            name, _, anchor = target.partition("#")
            name = name or page
            assert name in pages, f"docs/{page} links to {target}, which is no page"
            assert not anchor or anchor in anchors[name], f"docs/{page} links to {target}, which is no heading"
    snippet = re.fullmatch(r'--8<-- "([^"]+)"\n', (DOCS / "changelog.md").read_text())
    assert snippet is not None and (DOCS.parent / snippet.group(1)).is_file()


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    targets = [t for t in links(readme) if not t.startswith(("http://", "https://"))]
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not (DOCS.parent / t.partition("#")[0]).is_file()]
    assert missing == []
