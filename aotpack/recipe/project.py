"""``[project]`` (PEP 621) of the kernel project a recipe belongs to: the core metadata a recipe does not state.

A recipe belongs to a project when the ``pyproject.toml`` beside it names it (``[tool.aotpack] recipe``): then
``aotpack build`` and the project's PEP 517 builds read the same ``[project]``, and give the same wheel. Only
the recipe's own folder is looked in: nothing above it is read. The table is read and validated by
pyproject-metadata (the reader meson-python and scikit-build-core use: names, versions, requirements, readme
and license files, URLs, classifiers). A fact both state — the name, the version, the summary (``description``)
and the license — must agree: the recipe builds the wheel, and one wheel has one name. ``version`` may be
``dynamic``: the recipe's. What a kernel wheel cannot have (scripts, entry points, other dynamic fields) is
refused, naming the key. The readme and license files are read only from inside the project's folder.

The METADATA lines are aotpack's own writing (``pipeline/wheel.py``), in a fixed order, so that a wheel's
bytes do not depend on the version of the library that read the table."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import facts, limits
from ..errors import RecipeError
from ..model import Project
from .yamlnodes import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

FILE = "pyproject.toml"
REFUSED = ("scripts", "gui-scripts", "entry-points")  # a kernel wheel ships no console scripts or plugins


def read_toml(path: Path) -> dict[str, Any]:
    """A pyproject.toml, read within aotpack's bound for a project file (``read_text``); RecipeError naming it."""
    try:
        return tomllib.loads(read_text(path, "project file"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: {exc}") from None
    except RecursionError:
        raise RecipeError(f"{path}: nested too deeply to read; write its arrays and tables flatter") from None


def of(recipe: Path, package: str, version: str, summary: str | None, spdx: str | None) -> Project | None:
    """The project ``recipe`` belongs to, checked against what the recipe states, or None."""
    folder = recipe.resolve().parent
    path = folder / FILE
    try:
        if not path.is_file():
            return None
    except OSError as exc:  # a folder its user cannot search
        raise RecipeError(f"cannot look for {path}: {exc.strerror}; make its folder readable") from None
    data = read_toml(path)
    tool = data.get("tool", {})
    own = tool.get("aotpack") if isinstance(tool, dict) else None
    named = own.get("recipe") if isinstance(own, dict) else None
    if not isinstance(named, str) or (folder / named).resolve() != recipe.resolve() or "project" not in data:
        return None  # another project's file, or no [project]: the recipe's metadata only
    try:
        return _read(path, data, package, version, summary, spdx)
    except OSError as exc:  # its readme or a license file (pyproject-metadata reads them too)
        raise RecipeError(f"{path}: [project]: cannot read {exc.filename or 'a file it names'}: {exc.strerror}; "
                          "make it readable") from None  # fmt: skip


def _read(path: Path, data: dict[str, Any], package: str, version: str, summary: str | None,
          spdx: str | None) -> Project:  # fmt: skip
    from pyproject_metadata import License, StandardMetadata

    where = f"{path}: [project]"
    project = data["project"]
    if not isinstance(project, dict):
        raise RecipeError(f"{path}: project must be a table ([project])")
    for key in REFUSED:
        if key in project:
            raise RecipeError(f"{where} {key}: a kernel wheel has none; remove it")
    dynamic = project.get("dynamic", [])
    if not isinstance(dynamic, list) or not all(isinstance(d, str) for d in dynamic):
        raise RecipeError(f'{where} dynamic = {str(dynamic)[:60]!r}: a list of field names (dynamic = ["version"])')
    if set(dynamic) - {"version"}:
        raise RecipeError(f"{where} dynamic = {dynamic}: only version may be dynamic (the recipe's)")
    _files_inside(path.parent, project, where)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (pyproject-metadata warns of what it will refuse later)
            read = StandardMetadata.from_pyproject(data, path.parent, metadata_version="2.4", allow_extra_keys=False)
    except Exception as exc:  # ConfigurationError, an ExceptionGroup, a warning made an error: its message
        raise RecipeError(f"{where}: {exc}") from None
    if canonicalize_name(read.name) != canonicalize_name(package):
        raise RecipeError(f"{where} name = {read.name!r}, the recipe's package: {package!r}; make them one name")
    if read.version is not None and read.version != Version(version):
        raise RecipeError(f"{where} version = {str(read.version)!r}, the recipe's: {version!r}; state it once "
                          '(dynamic = ["version"] takes the recipe\'s)')  # fmt: skip
    if read.description is not None and summary is not None and read.description != summary:
        raise RecipeError(f"{where} description and the recipe's summary differ; state it once")
    if isinstance(read.license, License):
        raise RecipeError(f'{where} license: write an SPDX expression (license = "MIT"), not a table')
    if read.license is not None and spdx is not None and spdx_of(read.license, where) != spdx:
        raise RecipeError(f"{where} license = {read.license!r}, the recipe's: {spdx!r}; state it once")
    _takes_the_floor(read.requires_python, where)
    headers = _headers(read)
    for field, value in [("description", read.description or ""), *headers]:
        bad = next((c for c in value if not c.isprintable()), None)  # a METADATA field is one line of text
        if bad is not None:
            raise RecipeError(f"{where}: {field.lower()} {value[:60]!r} holds the control character {bad!r}; "
                              "write it on one line, without it")  # fmt: skip
    readme = (read.readme.content_type, read.readme.text) if read.readme is not None else None
    licenses = tuple((p.as_posix(), (path.parent / p).read_bytes()) for p in sorted(read.license_files or ()))
    read_files = [path, *((path.parent / read.readme.file,) if read.readme and read.readme.file else ())]
    return Project(
        path=path, summary=read.description, license=spdx_of(read.license, where),
        requires_python=str(read.requires_python) if read.requires_python is not None else None,
        headers=headers,
        readme=readme, license_files=licenses, files=tuple(read_files + [path.parent / p for p, _ in licenses]),
    )  # fmt: skip


def _takes_the_floor(wanted: Any, where: str) -> None:
    """A ``requires-python`` that admits some Python a kernel wheel takes (from ``facts.PYTHON_FLOOR``): the
    wheel's Requires-Python is both, and one that admits none installs nowhere."""
    if wanted is None:
        return
    floor, newest = facts.PYTHON_FLOOR, 99
    if not any(wanted.contains(f"{floor[0]}.{minor}.{micro}") for minor in range(floor[1], newest)
               for micro in (0, 99)):  # fmt: skip
        raise RecipeError(f"{where} requires-python = {str(wanted)!r} admits no Python the kernel wheel takes "
                          f"({facts.REQUIRES_PYTHON}, its {facts.ABI3_TAG} tag); widen it")  # fmt: skip


def _files_inside(root: Path, project: dict[str, Any], where: str) -> None:
    """The readme and the license files named: relative paths to regular files inside the project, each within
    aotpack's bound for a text it reads, checked before pyproject-metadata opens any (a FIFO would block it, a
    link could lead anywhere)."""
    readme = project.get("readme")
    named = [readme] if isinstance(readme, str) else [readme.get("file")] if isinstance(readme, dict) else []
    globs = project.get("license-files", [])
    patterns = [g for g in globs if isinstance(g, str)] if isinstance(globs, list) else []
    inside = root.resolve()
    for item in [n for n in named if isinstance(n, str)] + patterns:
        bad = next((c for c in item if not c.isprintable()), None)
        if bad is not None:
            raise RecipeError(f"{where}: {item[:60]!r} holds the control character {bad!r}; name a file without it")
        if Path(item).is_absolute() or ".." in Path(item).parts:
            raise RecipeError(f"{where}: {item!r} lies outside the project ({root}); name a file inside it")
    found = [root / n for n in named if isinstance(n, str)]
    for pattern in patterns:
        try:
            found += sorted(root.glob(pattern))
        except (ValueError, OSError) as exc:  # an empty or malformed pattern, an unreadable folder
            raise RecipeError(f"{where} license-files: {pattern!r}: {exc}") from None
    for path in found:
        real = path.resolve()
        if not real.is_relative_to(inside):
            raise RecipeError(f"{where}: {path.relative_to(root)} (a link to {real}) lies outside the project "
                              f"({root}); name a file inside it")  # fmt: skip
        if path.exists() and not real.is_file():
            raise RecipeError(f"{where}: {path.relative_to(root)} is not a regular file; name a file")
        if real.is_file() and real.stat().st_size > limits.MAX_SOURCE_BYTES:
            raise RecipeError(f"{where}: {path.relative_to(root)} is larger than {limits.MAX_SOURCE_BYTES >> 20} MiB "
                              "(aotpack's limits.MAX_SOURCE_BYTES): is it the right file?")  # fmt: skip
    for path in found[: len(named)]:  # the readme: the METADATA body, text in UTF-8 (core metadata's encoding)
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecipeError(f"{where} readme: {path.relative_to(root)} is not UTF-8 text (byte {exc.start}: "
                              f"{exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8") from None  # fmt: skip
        except OSError:  # (missing, unreadable: pyproject-metadata's own error names it)
            pass


def _headers(read: Any) -> tuple[tuple[str, str], ...]:
    """The METADATA fields beyond name, version, summary, license and Requires-Python, in a fixed order."""
    out: list[tuple[str, str]] = []
    for field, people in (("Author", read.authors), ("Maintainer", read.maintainers)):
        names = ", ".join(name for name, email in people if name and not email)
        emails = ", ".join(f"{name} <{email}>" if name else email for name, email in people if email)
        out += [(field, names)] if names else []
        out += [(f"{field}-email", emails)] if emails else []
    out += [("Keywords", ",".join(read.keywords))] if read.keywords else []
    out += [("Classifier", c) for c in read.classifiers]
    out += [("Project-URL", f"{label}, {url}") for label, url in read.urls.items()]
    out += [("Requires-Dist", str(r)) for r in read.dependencies]
    for extra, requirements in read.optional_dependencies.items():
        out.append(("Provides-Extra", extra))
        for r in requirements:
            req = Requirement(str(r))
            req.marker = Marker(f'({r.marker}) and extra == "{extra}"' if r.marker else f'extra == "{extra}"')
            out.append(("Requires-Dist", str(req)))
    return tuple(out)


def spdx_of(expression: Any, where: str) -> str | None:
    """An SPDX expression as the recipe's ``license:`` keeps it (normalized), or None."""
    try:
        return None if expression is None else str(canonicalize_license_expression(str(expression)))
    except InvalidLicenseExpression as exc:
        raise RecipeError(f"{where} license = {str(expression)!r} is not an SPDX license expression (such as "
                          f"Apache-2.0 or MIT): {exc}") from None  # fmt: skip
