"""YAML recipe -> validated, frozen ``model.Recipe``.

Read top-down: ``load`` reads the file (``yamlnodes``: every value keeps its position, so each error
names ``file:line:col``, the key path and what was expected; unknown keys get a "did you mean"
suggestion), ``from_nodes`` reads the top level and each kernel: its backend's reader (``readers``, given
by the caller: ``backends/recipes.py`` holds every backend's) reads an entry it takes whole, else
``kernel.called`` reads it in small steps. Tuning tables merge in ``tables.apply``; the dispatch rules
between their measured keys are chosen (``tables.fit``) by the build once it has compiled the variants (a
rule may count programs in waves of their blocks per multiprocessor), for the kernels it generates code for.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import keyword
import re
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import packaging.licenses
import packaging.utils
import packaging.version

from .. import facts, limits
from ..errors import Location, RecipeError
from ..model import LAZY_NAMES, PACKAGE_NAMES, Backend, CacheEntry, InductorSet, Kernel, Project, Recipe, Source, Widen
from . import fields as _fields
from . import inductor_cache, project, tables, triton_cache, yamlnodes
from . import kernel as _kernel
from .readers import KernelEntry, Readers
from .yamlnodes import Node, suggest

# a module name that is also a distribution name (PEP 508: it starts and ends with a letter or digit)
_PACKAGE = re.compile(r"^[a-z]([a-z0-9_]*[a-z0-9])?$")


def _top_keys(readers: Readers) -> tuple[str, ...]:
    """The recipe's own keys, each backend's among them (Triton's release)."""
    own = (key for r in readers.values() for key in r.RECIPE_KEYS)
    return ("package", "replaces", "version", "summary", "license", "cuda", *own, "widen", "targets", "kernels",
            "tables", "triton_cache", "inductor_cache")  # fmt: skip


def load(path: str | Path, readers: Readers) -> Recipe:
    """Read and validate a recipe file."""
    path = Path(path)
    return from_nodes(yamlnodes.read(path, "recipe"), path, readers)


def parse(text: str, path: Path, readers: Readers) -> Recipe:
    """Validate recipe text (``path`` names it in errors; its folder anchors relative paths)."""
    return from_nodes(yamlnodes.parse(text, path, "recipe"), path, readers)


def from_nodes(root: Node, path: Path, readers: Readers) -> Recipe:
    """Validate a recipe already read into nodes (``yamlnodes.parse``: a reader that checks more of it first)."""
    top = root.mapping(_top_keys(readers), required=("package", "version", "kernels"))
    package, version, summary = _about(top)
    spdx = _license(top["license"]) if "license" in top else None
    belongs = project.of(path, package, version, summary, spdx)
    targets = _fields.targets(top["targets"]) if "targets" in top else ()
    widen = _fields.widen(top["widen"]) if "widen" in top else ()
    kernels: list[Kernel] = []
    for name, node, where in top["kernels"].items():
        if not _fields.IDENT.match(name) or keyword.iskeyword(name) or name.startswith("_"):
            raise RecipeError(f"kernel name {name!r} must be a Python identifier not starting with '_'", where)
        if name in PACKAGE_NAMES or name in LAZY_NAMES:
            raise RecipeError(f"kernel name {name!r} would hide the package's own {name!r}; rename the kernel", where)
        kernels.append(_kernel_of(name, node, where, path.parent, targets, top.get("targets"), widen, readers))
    cached = triton_cache.entries(top["triton_cache"], path.parent) if "triton_cache" in top else ()
    graphs = inductor_cache.sets(top["inductor_cache"], path.parent) if "inductor_cache" in top else ()
    if not kernels and not cached and not graphs:
        raise top["kernels"].fail("the recipe lists no kernels")
    if widen:
        _check_widen(top["widen"], widen, kernels)
    table_paths: list[Path] = []
    for item in top["tables"].sequence(allow_scalar=True) if "tables" in top else ():
        table_path = _fields.path(item, path.parent)
        try:
            kernels = tables.apply(tables.read(table_path), kernels, package)
        except tables.TableError as exc:
            raise item.fail(str(exc)) from None
        except RecipeError as exc:  # the file itself: where the recipe names it, and in it where there is a place
            raise exc if exc.where is not None else item.fail(str(exc)) from None
        table_paths.append(table_path)
    cuda = _cuda_floor(top["cuda"]) if "cuda" in top else None
    releases = {name: reader.release(top) for name, reader in readers.items()}
    return Recipe(
        path=path, package=package, version=version, summary=_summary(package, summary, belongs),
        targets=targets, kernels=tuple(kernels), tables=tuple(table_paths), license=_spdx(spdx, belongs),
        cuda_floor=cuda, triton=releases.get("triton"), widen=widen, triton_cache=cached, inductor_cache=graphs,
        project=belongs,
    )  # fmt: skip


def _about(top: dict[str, Node]) -> tuple[str, str, str | None]:
    """The package's name, version and summary (None: not stated)."""
    package = top["package"].string()
    problem = package_problem(package, top["replaces"].string() if "replaces" in top else None)
    if problem is not None:
        raise top["package"].fail(problem)
    version = _version(top["version"])
    return package, version, _fields.text(top["summary"], one_line=True) if "summary" in top else None


def _summary(package: str, stated: str | None, belongs: Project | None) -> str:
    """The recipe's summary, else its project's description, else one naming the package."""
    return stated or (belongs and belongs.summary) or f"Ahead-of-time compiled GPU kernels: {package}"


def _spdx(stated: str | None, belongs: Project | None) -> str | None:
    """The recipe's license, else its project's."""
    return stated or (belongs.license if belongs else None)


@dataclass(frozen=True, kw_only=True)
class KernelFiles:
    """What a kernel's entry names: its source, its include folders, its tuning hooks."""

    name: str
    backend: Backend
    source: Source
    include_dirs: tuple[Path, ...]
    tune: tuple[Source, ...]


@dataclass(frozen=True, kw_only=True)
class Sources:
    """A recipe's package metadata and the files it names, read without importing any kernel: an sdist is built
    where neither Triton nor the kernels' own imports need be installed (``build_meta.build_sdist``). The recipe is
    checked only as far as that reading goes; the wheel's build reads it whole."""

    path: Path
    package: str
    version: str
    summary: str
    license: str | None
    project: Project | None
    tables: tuple[Path, ...]
    triton_cache: tuple[CacheEntry, ...]
    inductor_cache: tuple[InductorSet, ...]
    kernels: tuple[KernelFiles, ...]


def sources(path: str | Path, readers: Readers) -> Sources:
    """The recipe at ``path`` read as ``Sources``: each kernel's source through its backend's reader (which
    imports nothing), the rest as ``from_nodes`` reads it."""
    path = Path(path)
    top = yamlnodes.read(path, "recipe").mapping(_top_keys(readers), required=("package", "version", "kernels"))
    package, version, summary = _about(top)
    spdx = _license(top["license"]) if "license" in top else None
    belongs = project.of(path, package, version, summary, spdx)
    root, kernels = path.parent, []
    for name, node, where in top["kernels"].items():
        k = node.mapping(_kernel.keys(readers), required=("args",))
        entry = KernelEntry(name=name, keys=k, node=node, where=where, root=root, targets=(), targets_at=None)
        backend = _backend(k, node, readers)
        includes = k["include_dirs"].sequence(allow_scalar=True) if "include_dirs" in k else ()
        tune = k["tune"].mapping(_kernel.TUNE_KEYS, required=("inputs",)) if "tune" in k else {}
        kernels.append(KernelFiles(name=name, backend=backend, source=readers[backend].source(entry),
                                   include_dirs=tuple(_fields.path(item, root) for item in includes),
                                   tune=tuple(_fields.source(tune[t], root) for t in ("inputs", "reference")
                                              if t in tune)))  # fmt: skip
    tabled = top["tables"].sequence(allow_scalar=True) if "tables" in top else ()
    return Sources(
        path=path, package=package, version=version, summary=_summary(package, summary, belongs),
        license=_spdx(spdx, belongs), project=belongs,
        tables=tuple(_fields.path(item, root) for item in tabled),
        triton_cache=triton_cache.entries(top["triton_cache"], root) if "triton_cache" in top else (),
        inductor_cache=inductor_cache.sets(top["inductor_cache"], root) if "inductor_cache" in top else (),
        kernels=tuple(kernels),
    )  # fmt: skip


def _kernel_of(
    name: str,
    node: Node,
    where: Location,
    root: Path,
    recipe_targets: tuple[str, ...],
    targets_at: Node | None,
    widen: Widen,
    readers: Readers,
) -> Kernel:
    """A kernel: read whole by the backend that claims it, else by the shared steps and its backend's own."""
    k = node.mapping(_kernel.keys(readers), required=("args",))
    backend = _backend(k, node, readers)
    entry = KernelEntry(name=name, keys=k, node=node, where=where, root=root, targets=recipe_targets,
                        targets_at=targets_at, widen=widen)  # fmt: skip
    for reader in readers.values():
        claimed = reader.claim(entry)
        if claimed is not None:
            return claimed
    return _kernel.called(entry, backend, readers)


def _backend(k: dict[str, Node], node: Node, readers: Readers) -> Backend:
    """The backend whose source key the kernel's entry gives (exactly one)."""
    given = [backend for backend in readers if backend in k]
    if len(given) != 1:
        sources = " or ".join(f"{backend!r} ({reader.SOURCE})" for backend, reader in readers.items())
        raise node.fail(f"give exactly one of {sources}")
    return given[0]


def _check_widen(node: Node, widen: Widen, kernels: list[Kernel]) -> None:
    """Each constexpr ``widen:`` names is one of a recorded kernel's (``launch: triton``: each of its rows takes
    the values). One that none has is refused, not passed over: a misspelt name would build nothing more, and
    the deployment would find out as compilations (or MissingVariant) at its next batch size."""
    recorded = [k for k in kernels if k.points]
    names = sorted({n for k in recorded for n in k.constexpr_names})
    for (name, _), (_, _, where) in zip(widen, node.items(), strict=True):
        if name not in names:
            have = suggest(name, names, "their constexprs") if names else " (the recipe has none)"
            raise RecipeError(f"{node.path}: no kernel built from a recording ('launch: triton') takes a "
                              f"constexpr {name!r}{have}; widen one of theirs, or remove {name!r}", where)  # fmt: skip


# distributions a kernel package must never replace, installed here or not (compared as PEP 503 normalizes names)
WELL_KNOWN = ("pip", "setuptools", "wheel", "triton", "torch", "aotpack")


def package_problem(name: str, replaces: str | None = None) -> str | None:
    """Why ``name`` cannot name a kernel package (its module and its distribution), or None. ``replaces``: the
    distribution a deliberate fork says it replaces (the recipe's ``replaces:``, ``aotpack new --replaces``)."""
    if len(name) > limits.MAX_NAME:
        return f"the package name has {len(name)} characters; at most {limits.MAX_NAME} (aotpack's limits.MAX_NAME)"
    if not _PACKAGE.fullmatch(name):  # not match: its $ would take a name ending in a newline
        fixed = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        hint = f"; {fixed!r} is one" if _PACKAGE.fullmatch(fixed) and not keyword.iskeyword(fixed) else ""
        return (f"{name!r} is not a valid package name (lower case letters, digits and _, starting with a letter, "
                f"ending with a letter or digit){hint}")  # fmt: skip
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword"
    if name in sys.stdlib_module_names:
        return f"{name!r} is a module of Python's standard library; choose another name"
    owner = _owner(name)
    if owner is None or _canonical(owner[0]) == _canonical(replaces or ""):
        return None
    return (
        f"{name!r} is {owner[1]}: installing the wheel would replace it; choose another name, or, for a "
        f"deliberate fork, say so with 'replaces: {owner[0]}' in the recipe (aotpack new --replaces {owner[0]})"
    )


def _canonical(name: str) -> str:
    return packaging.utils.canonicalize_name(name)


def _owner(name: str) -> tuple[str, str] | None:
    """The distribution whose name or module ``name`` would take, with how (None: none). An installed kernel
    package aotpack built (its folder holds ``manifest.json``) is an earlier build of this one, not another's.
    Cheap where nothing is taken (a name's metadata, a module's spec in the install folders): it runs at every
    recipe load."""
    key = _canonical(name)
    for known in WELL_KNOWN:
        if _canonical(known) == key:
            return known, f"the name of the distribution {known!r}"
    try:
        return _installed_owner(name, key)
    except (OSError, ImportError):  # an environment this user cannot read (the metadata's parser, a folder): the
        return None  # well-known names were checked; what cannot be read is no owner anyone can name


def _installed_owner(name: str, key: str) -> tuple[str, str] | None:
    here = f"installed in this environment ({sys.prefix})"
    for dist in importlib.metadata.distributions():
        found = str(dist.metadata["Name"] or "")
        if _canonical(found) == key and not any(str(f) == f"{name}/manifest.json" for f in dist.files or ()):
            return found, f"the name of the distribution {found!r}, {here}"
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], site.getusersitepackages()})
    spec = importlib.machinery.PathFinder.find_spec(name, folders)
    if spec is None or (spec.origin and (Path(spec.origin).parent / "manifest.json").is_file()):
        return None
    found = _module_owner(name)
    return found, f"a module of the distribution {found!r}, {here}"


def _module_owner(name: str) -> str:
    """The distribution that installs the top-level module ``name``. The names a distribution declares
    (top_level.txt) are read first: importlib.metadata.packages_distributions() reads every distribution's RECORD
    that declares none (torch's alone is tens of thousands of lines: 0.4 s at every recipe load)."""
    for dist in importlib.metadata.distributions():
        if name in (dist.read_text("top_level.txt") or "").split():
            return str(dist.metadata["Name"] or name)
    return (importlib.metadata.packages_distributions().get(name) or [name])[0]


def _version(node: Node) -> str:
    """The version as written (YAML would read 0.10 as the float 0.1), checked and normalized."""
    raw = node.raw()
    try:
        return str(packaging.version.Version(str(raw)))
    except (packaging.version.InvalidVersion, ValueError):  # ValueError: a number past Python's digit limit
        raise node.fail(f"{str(raw)[:40]!r} is not a valid version (such as 1.0.2)") from None


def _cuda_floor(node: Node) -> int:
    """A CUDA release as written (YAML would read 12.10 as the float 12.1), at least 12.0."""
    try:
        return cuda_floor(str(node.raw()))
    except ValueError as exc:
        raise node.fail(str(exc)) from None


def cuda_floor(text: str) -> int:
    """The oldest CUDA driver a wheel must load on (``cuda:`` of a recipe, ``cuda`` of pyproject.toml),
    in the driver API's encoding; ValueError, with the message to report, when not a release from 12.0."""
    try:
        version = facts.cuda_version(text)
    except ValueError as exc:
        raise ValueError(f"{exc}: the oldest CUDA driver the wheel must load on") from None
    if version < 12000:
        raise ValueError(f"CUDA {text} is older than aotpack builds for; give 12.0 or newer")
    return version


def _license(node: Node) -> str:
    """An SPDX license expression (such as Apache-2.0 or MIT OR BSD-3-Clause), normalized."""
    raw = node.string()
    try:
        return str(packaging.licenses.canonicalize_license_expression(raw))
    except packaging.licenses.InvalidLicenseExpression as exc:
        raise node.fail(f"{raw!r} is not an SPDX license expression (such as Apache-2.0 or MIT): {exc}") from None
