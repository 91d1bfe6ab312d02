"""The house as the code draws it: files and functions of a size one reads in a sitting, imports that point one way
(no cycle between modules or between the package's rooms, none hidden behind a lazy import), the rooms' own rules
(the recipe reader does not know the plan; only the commands start a recording), and every path of the repository a
docstring, a comment or pyproject.toml names is there."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "aotpack"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def sources(*suffixes: str) -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in suffixes and "__pycache__" not in p.parts)


def python_modules() -> dict[str, Path]:
    """Every module of the package by dotted name (the scaffold's templates are not Python until `aotpack new`)."""
    out = {}
    for path in sources(".py"):
        relative = path.relative_to(ROOT).with_suffix("")
        if "templates" in relative.parts:
            continue
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        out[".".join(parts)] = path
    return out


def test_no_file_of_the_package_is_longer_than_a_sitting():
    long = {str(p.relative_to(ROOT)): n for p in sources(".py", ".c", ".h") if (n := len(p.read_text().splitlines()))
            > MAX_FILE_LINES}  # fmt: skip
    assert long == {}


def test_no_function_is_longer_than_a_screenful_or_two():
    long = {}
    for name, path in python_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}"] = lines
    assert long == {}


def imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules ``module`` imports, anywhere in it (a function's lazy import included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            stem = ".".join(filter(None, [base, node.module or ""]))
            for alias in node.names:
                if f"{stem}.{alias.name}" in known:  # a module imported from its package
                    yield f"{stem}.{alias.name}"
                elif stem in known:
                    yield stem


def graph() -> dict[str, set[str]]:
    known = python_modules()
    return {m: set(imported(m, p, known)) - {m} for m, p in known.items()}


def cycle(edges: dict[str, set[str]]) -> list[str]:
    """A cycle of the graph, or [] (depth first, colouring the nodes)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


def room(module: str) -> str:
    """The room a module is in: a folder of the package, or a file at its top."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_module_imports_one_that_imports_it_back():
    assert cycle(graph()) == []


def test_the_rooms_import_each_other_one_way():
    """An arrow between rooms points down, never back up: no cycle between the package's folders and top files,
    a lazy import included. (The package's own ``__init__`` re-exports the top: it is the roof, not a room.)"""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph().items():
        if module == "aotpack":
            continue
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) not in (room(module),
                                                                                                 "aotpack"))  # fmt: skip
    assert cycle(rooms) == []


def importers(target: str) -> set[str]:
    return {room(m) for m, targets in graph().items() if any(t == target or t.startswith(target + ".")
                                                            for t in targets)} - {target}  # fmt: skip


def test_the_recipe_reader_does_not_know_the_plan():
    assert "aotpack.recipe" not in importers("aotpack.plan")


def test_only_the_commands_start_a_recording():
    """``aotpack/record/`` is a stage of its own: the CLI's record command uses it, nothing of the build does."""
    assert importers("aotpack.record") == {"aotpack.commands"}


def test_the_runtime_imports_nothing_of_aotpack():
    runtime = [m for m in graph() if m.startswith("aotpack.runtime.")]
    assert {m: sorted(t for t in graph()[m] if not t.startswith("aotpack.runtime")) for m in runtime} == {
        m: [] for m in runtime
    }


# ---------------------------------------------------------------- paths named in the code

PATH = re.compile(r"(?<![\w./<>{}*$-])((?:[A-Za-z_][\w.-]*/)+[A-Za-z_][\w.-]*\.(?:py|c|h|json|toml|md|yaml|sh))"
                  r"(?![\w/*<>{}])")  # fmt: skip
NOT_OURS = {  # names of this form that are not paths of the repository, each for its reason
    "doc/lz4_Block_format.md": "lz4's own repository (compress.py: the format it writes)",
    "tools/compile.py": "Triton's own (triton/tools/compile.py), which the compiler does not use",
    "kernels/file.py": "an example of a recipe's source, in a docstring",
    "path/to/file.py": "an example of a recipe's source, in an error message",
    "pkg/manifest.json": "where a built wheel holds its manifest",
}


def test_every_path_the_code_names_is_there():
    """A docstring, a comment or pyproject.toml naming a file of the repository (relative to it or to aotpack/)
    names one that exists: a moved file leaves no stale directions behind."""
    missing: dict[str, str] = {}
    for path in [*sources(".py", ".c", ".h"), ROOT / "pyproject.toml"]:
        for named in PATH.findall(path.read_text()):
            if named not in NOT_OURS and not any((base / named).exists() for base in (ROOT, PACKAGE)):
                missing.setdefault(named, str(path.relative_to(ROOT)))
    assert missing == {}


def test_the_path_check_finds_paths_in_each_form():
    text = "(aotpack/runtime/aot_runtime.h) ``record/program.py`` see docs/build.md, not <dir>/x.py or kernels/*.py"
    assert PATH.findall(text) == ["aotpack/runtime/aot_runtime.h", "record/program.py", "docs/build.md"]
