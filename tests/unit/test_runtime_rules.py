"""The rules every module of the runtime's Python keeps (runtime/__init__.py states them): what runs in a user's
process, shipped in every wheel and beside a recorded program, where aotpack itself may be missing."""

from __future__ import annotations

import ast
import importlib
import sys
import threading
from pathlib import Path
from types import FunctionType, MappingProxyType, ModuleType

import pytest

from aotpack import runtime

pytestmark = pytest.mark.unit

FOLDER = Path(runtime.__file__).parent
MODULES = sorted(p.name for p in FOLDER.glob("*.py") if p.name != "__init__.py")
IMMUTABLE = (str, bytes, int, float, bool, type(None), tuple, frozenset, MappingProxyType)


def tree(name: str) -> ast.Module:
    return ast.parse((FOLDER / name).read_text(), filename=name)


def test_every_module_is_listed_where_it_ships():
    assert sorted([*runtime.PYTHON_FILES, runtime.AGENT]) == MODULES
    assert len(set(runtime.PYTHON_FILES)) == len(runtime.PYTHON_FILES)


@pytest.mark.parametrize("name", MODULES)
def test_a_module_parses_as_python_3_9(name):
    ast.parse((FOLDER / name).read_text(), feature_version=(3, 9))


def top_level_imports(module: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """What the module imports when it is loaded: its body's imports, and those of its top-level ``try``/``if``."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(module.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.Try, ast.If)):
            todo += [*node.body, *node.orelse, *(s for h in getattr(node, "handlers", ()) for s in h.body)]
    return found


def import_problems(name: str, text: str) -> list[str]:
    """What a module's imports break: at module level, the standard library and sibling modules (imported
    relatively, by the one name they have everywhere); anything else (Triton, torch) imported where it is used, or
    at load only where the module's docstring says so ("At load it imports <name>"); aotpack never, anywhere."""
    module = ast.parse(text)
    doc = ast.get_docstring(module) or ""
    problems = []
    for node in top_level_imports(module):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level != 1:
                problems.append(f"{name}: {ast.unparse(node)} reaches above the runtime")
            continue
        tops = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [
            str(node.module).split(".")[0]
        ]  # fmt: skip
        for top in tops:
            if f"{top}.py" in MODULES:
                problems.append(f"{name}: {ast.unparse(node)}: a sibling is imported relatively (from . import)")
            elif top not in sys.stdlib_module_names and top != "__future__" and f"At load it imports {top}" not in doc:
                problems.append(f"{name}: {ast.unparse(node)} at load, which its docstring does not explain")
    for anywhere in ast.walk(module):
        if isinstance(anywhere, ast.Import):
            names = [a.name for a in anywhere.names]
        elif isinstance(anywhere, ast.ImportFrom) and not anywhere.level:
            names = [str(anywhere.module)]
        else:
            continue
        if any(n.split(".")[0] == "aotpack" for n in names):
            problems.append(f"{name}: {ast.unparse(anywhere)}: never aotpack")
    return problems


@pytest.mark.parametrize("name", MODULES)
def test_a_module_loads_with_the_standard_library_and_its_siblings_alone_and_never_aotpack(name):
    assert import_problems(name, (FOLDER / name).read_text()) == []


def load(name: str) -> ModuleType:
    if name == "_aotpack_guard.py":
        pytest.importorskip("triton")  # (it imports Triton at load, as its docstring says)
    return importlib.import_module(f"aotpack.runtime.{name[:-3]}")


def loose_globals(module: ModuleType) -> dict[str, str]:
    """A module's mutable globals but ``_state``: constants are immutable (a table is a MappingProxyType),
    functions and classes are code."""
    loose = {}
    for attr, value in vars(module).items():
        if attr.startswith("__") or attr == "_state" or isinstance(value, (ModuleType, type, FunctionType)):
            continue
        if (
            callable(value)
            or isinstance(value, IMMUTABLE)
            or type(value).__module__ in ("typing", "types", "__future__")
        ):
            continue  # (a wrapped function, a type alias, `from __future__ import annotations`)
        loose[attr] = type(value).__name__
    return loose


@pytest.mark.parametrize("name", MODULES)
def test_a_module_keeps_its_state_in_one_object_with_its_lock(name):
    module = load(name)
    assert loose_globals(module) == {}
    if hasattr(module, "_state"):
        assert isinstance(module._state.lock, type(threading.Lock()))


def resettable() -> list[ModuleType]:
    """The runtime modules whose state activate() sets up: their state object has a reset()."""
    pytest.importorskip("triton")
    return [m for m in map(load, MODULES) if hasattr(getattr(m, "_state", None), "reset")]


def test_deactivate_resets_every_module_whose_state_activate_sets_up(monkeypatch):
    from triton.runtime.jit import JITFunction

    from aotpack.runtime import _aotpack_activate

    modules = resettable()
    assert {m.__name__.rpartition(".")[2] for m in modules} == {"_aotpack_guard", "_aotpack_inductor",
                                                                 "_aotpack_folders"}  # fmt: skip
    reset: list[str] = []
    for module in modules:
        assert callable(module.reset)  # the module's own, which deactivate() calls
        monkeypatch.setattr(module, "reset", lambda m=module: reset.append(m.__name__))
    state = _aotpack_activate._Activation()
    state.jit_run = JITFunction.run  # (as activate() found it)
    monkeypatch.setattr(_aotpack_activate._state, "current", state)
    _aotpack_activate.deactivate()
    assert sorted(reset) == sorted(m.__name__ for m in modules)
    assert _aotpack_activate._state.current is None


def test_the_rules_catch_a_module_that_breaks_them():
    bad = '''"""A module."""
from __future__ import annotations
import json
import _aotpack_jit
import triton
from .. import limits


def f():
    from aotpack.runtime import _aotpack_jit
'''
    assert import_problems("bad.py", bad) == [
        "bad.py: import _aotpack_jit: a sibling is imported relatively (from . import)",
        "bad.py: import triton at load, which its docstring does not explain",
        "bad.py: from .. import limits reaches above the runtime",
        "bad.py: from aotpack.runtime import _aotpack_jit: never aotpack",
    ]
    assert (
        import_problems("ok.py", '"""At load it imports triton: it subclasses its manager."""\nimport triton\n') == []
    )
    module = ModuleType("loose")
    exec("import threading\nseen = set()\nLIMIT = 3\nTABLE = {}\ndef f(): pass", vars(module))
    assert loose_globals(module) == {"seen": "set", "TABLE": "dict"}
