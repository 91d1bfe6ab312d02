"""The PEP 517 build backend: a kernel package is a Python project that pip, ``python -m build`` and any
standard CI build. Its ``pyproject.toml``::

    [build-system]
    requires = ["aotpack[cuda]"]   # [cuda]: nvcc, for CUDA kernels; Triton is asked for by the backend
    build-backend = "aotpack.build_meta"

    [tool.aotpack]
    recipe = "recipe.yaml"   # the only required setting
    jobs = 8                 # parallel compiles (default: all cores)
    cuda = "12.2"            # the oldest CUDA driver the wheel must load on (default: as `aotpack build`)
    strict = false           # fail when a variant fails to compile
    cache = true             # use aotpack's cache of compiled variants (~/.cache/aotpack)
    line-info = false        # keep line info in Triton's cubins (profiling builds)
    triton = "3.8"           # the Triton release to build with (default: the recipe's triton:, else the newest
                             # tested for this Python)
    quiet = false            # no progress lines on stderr (pip shows them with pip wheel -v .)
    platform = "linux_aarch64"   # the machine the wheel is for (default: the building one's; any host builds both)

Every setting can also come as a config setting (``pip wheel . -C cuda=12.2``, ``python -m build
-C jobs=4``), which wins. ``build_wheel`` shows the build's progress as ``aotpack build`` does, on stderr: a
line per tenth of the variants, with an ETA (``python -m build`` shows it, pip with ``pip wheel -v .``);
``quiet`` leaves it out. It gives the same repaired manylinux abi3 wheel as ``aotpack build``; ``build_sdist``
packs the recipe, its tables, the kernel sources it reads and pyproject.toml, from which the same wheel builds
again, read without importing a kernel (no Triton is needed for it). No editable hook: the package is compiled
code, there is nothing to edit in place. An aotpack error that ends a hook's process is one line naming what to
fix (a missing nvcc: the ``requires`` that installs it), not a traceback.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from . import values
from ._temp import atomic_file
from .backends import BACKENDS, recipes
from .backends.triton import releases, toolchain
from .backends.triton.recipe import wanted_triton
from .commands.checks import writable_folder
from .commands.progress import Progress
from .errors import AotpackError, RecipeError, ToolNotFound, UsageError, shown
from .pipeline import build as pipeline
from .pipeline import cache, native, wheel
from .recipe.project import read_toml
from .recipe.read import Sources, cuda_floor


def _report(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None, *, rest: Any = sys.excepthook
) -> None:
    """A front end runs each hook in a process of its own and shows what it prints: an aotpack error that ends
    that process is one line, as the CLI prints it (the message says what to fix; aotpack's frames above it would
    bury it). Any other error keeps its traceback. Set when a front end imports the backend; only an error nothing
    caught reaches it."""
    if isinstance(exc, AotpackError):
        print(shown(exc), file=sys.stderr)
    else:
        rest(kind, exc, tb)


sys.excepthook = _report
SETTINGS = {"recipe": str, "jobs": int, "cuda": str, "strict": bool, "cache": bool, "line-info": bool, "triton": str,
            "quiet": bool, "platform": str}  # fmt: skip
EXTRA_FILES = ("pyproject.toml", "README.md", "README.rst", "LICENSE", "LICENSE.txt")  # into the sdist, when present


def _settings(config_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """[tool.aotpack] of ./pyproject.toml, then the config settings (text, as front ends pass them)."""
    project = _project()
    tool = project.get("tool", {})
    if not isinstance(tool, dict):
        raise UsageError("pyproject.toml: tool must be a table ([tool.aotpack], not tool = ...)")
    tool = tool.get("aotpack", {})
    if not isinstance(tool, dict):
        raise UsageError("pyproject.toml: [tool.aotpack] must be a table")
    out: dict[str, Any] = {}
    origin = ""  # where the recipe setting in force comes from
    for source, given in (("[tool.aotpack]", tool), ("config setting", dict(config_settings or {}))):
        for key, value in given.items():
            kind = SETTINGS.get(key)
            if kind is None:
                known = ", ".join(SETTINGS)
                raise UsageError(f"pyproject.toml: {source} {key!r} is not an aotpack setting (known: {known})")
            out[key] = _checked(key, _typed(key, value, kind, source), source)
            origin = source if key == "recipe" else origin
    if "recipe" not in out:
        raise UsageError('pyproject.toml: [tool.aotpack] needs recipe = "<the recipe file>"')
    try:
        os.lstat(out["recipe"])
    except (OSError, ValueError) as exc:  # anything but a missing file (a NUL, too long): said where it is read
        if isinstance(exc, FileNotFoundError):
            raise UsageError(f"pyproject.toml: {origin} recipe = {out['recipe'][:200]!r}: no such file beside "
                             "pyproject.toml: name the recipe file, relative to it") from None  # fmt: skip
    return out


def _project() -> dict[str, Any]:
    """./pyproject.toml, read."""
    try:
        return read_toml(Path("pyproject.toml"))
    except RecipeError as exc:  # not found, not a file, too large, not UTF-8, not TOML (located)
        raise UsageError(str(exc)) from None


def _typed(key: str, value: Any, kind: type, source: str) -> Any:
    """A setting as its kind: TOML's own value, or a config setting's text read as the command line reads it
    (values.py: ``jobs`` as ``-j``)."""
    try:
        if kind is int:
            return values.jobs(value)  # the one number among the settings
        if kind is bool:
            return values.boolean(value, "a boolean")
    except ValueError as exc:
        raise UsageError(f"pyproject.toml: {source} {key}: {exc}") from None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key in ("cuda", "triton"):
        return str(value)  # a release: cuda = 12.2 in TOML is a number
    raise UsageError(f"pyproject.toml: {source} {key} = {value!r}: expected a string")


def _checked(key: str, value: Any, source: str) -> Any:
    """The value of a typed setting, refused where the CLI's option would refuse it."""
    where = f"pyproject.toml: {source} {key} = {value!r}"
    if key == "cuda":
        try:
            cuda_floor(value)
        except ValueError as exc:
            raise UsageError(f"{where}: {exc}") from None
    if key == "platform" and value not in native.PLATFORMS:
        raise UsageError(f"{where}: not a platform aotpack builds for; name one of {', '.join(native.PLATFORMS)}")
    return value


def _triton(s: dict[str, Any]) -> toolchain.Request:
    """The Triton release the build uses: the project's (``_wanted``), else the newest tested for this Python."""
    wanted = _wanted(s)  # (an empty one is refused: it named the newest silently)
    text = wanted if wanted is not None else ".".join(map(str, releases.newest_supported(sys.version_info[:2])))
    try:
        return toolchain.Request.parse(text)
    except ValueError as exc:
        raise UsageError(f"pyproject.toml [tool.aotpack] (or -C): triton = {text!r}: {exc}") from None


def _wanted(s: dict[str, Any]) -> str | None:
    """The Triton release the project names: the ``triton`` setting, else the recipe's ``triton:`` (checked where
    it is written), as ``aotpack build`` takes --triton, else the recipe's."""
    if "triton" in s:
        return str(s["triton"])
    _inside(Path.cwd().resolve(), Path(s["recipe"]), "pyproject.toml: [tool.aotpack] recipe =")
    return wanted_triton(Path(s["recipe"]))


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    """That Triton release: a front end with build isolation installs it for the build (aotpack itself requires
    no Triton, so that installing it never moves a user's)."""
    return [_triton(_settings(config_settings)).requirement]


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    s = _settings(config_settings)
    floor = cuda_floor(s["cuda"]) if "cuda" in s else None  # checked by _settings
    writable_folder(Path(wheel_directory), "the wheel folder")  # before any compile, not after
    _project_sources(s["recipe"])  # every file inside the project, before a kernel is imported
    if _wanted(s) is not None and toolchain.check_active() is None:  # without isolation, another may be installed
        kept = toolchain.needed(_triton(s), cache.default_dir(), None)
        if kept is not None:
            return _in_toolchain(kept, s, wheel_directory)
    options = pipeline.BuildOptions(
        out_dir=Path(wheel_directory), jobs=s.get("jobs"), strict=s.get("strict", False),
        use_cache=s.get("cache", True), line_info=s.get("line-info", False), cuda_floor=floor,
        platform=s.get("platform"),
    )  # fmt: skip
    with _talking(s.get("quiet", False)) as log:
        started = time.monotonic()
        try:
            result = pipeline.run(recipes.load(s["recipe"]), options, Progress(s.get("quiet", False)))
        except ToolNotFound as exc:
            raise _located(exc) from None
        log.info("%s", result.said(time.monotonic() - started))
    return result.wheel.name


@contextlib.contextmanager
def _talking(quiet: bool) -> Iterator[logging.Logger]:
    """What ``aotpack build`` says of a build's phases (the plan's variant count, compiling, linking, repairing,
    the wheel), said on standard error, which a front end shows (pip with -v): no one configures logging in a
    hook's process. ``quiet`` (the setting): warnings alone."""
    log = logging.getLogger("aotpack")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = log.level
    log.setLevel(logging.WARNING if quiet else logging.INFO)  # (setLevel: a logger caches what it is enabled for)
    log.addHandler(handler)
    try:
        yield log
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _located(exc: ToolNotFound) -> ToolNotFound:
    """A missing tool that an aotpack extra installs, said as a kernel project gets it: through its
    ``[build-system] requires``. An isolated build holds only what those name (and the Triton the backend asks
    for), so advice to install something by hand cannot reach it."""
    if exc.extra in (None, "triton"):  # Triton: asked for by the backend, so missing only without isolation,
        return exc  # where its message's [tool.aotpack] triton = fixes it
    requires = _project().get("build-system", {}).get("requires", [])
    fixed = [_with_extra(r, exc.extra) for r in requires]
    if any(_with_extra(r, exc.extra) is r and _names_aotpack(r) for r in requires):  # requires is right already
        return ToolNotFound(f"the build needs aotpack's {exc.extra} extra, which pyproject.toml's [build-system] "
                            "requires names, and this environment lacks it: a build without isolation (pip "
                            "--no-build-isolation) uses what is installed here; run pip install "
                            f"'aotpack[{exc.extra}]' here, or build isolated. The build said: {exc}",
                            exc.extra)  # fmt: skip
    if fixed == requires:
        fixed.append(f"aotpack[{exc.extra}]")
    return ToolNotFound(f"pyproject.toml: [build-system] requires = {json.dumps(requires)}: the build needs "
                        f"aotpack's {exc.extra} extra; write requires = {json.dumps(fixed)} (an isolated build holds "
                        f"only what requires names). The build said: {exc}", exc.extra)  # fmt: skip


def _names_aotpack(requirement: Any) -> bool:
    try:
        return canonicalize_name(Requirement(requirement).name) == "aotpack"
    except (InvalidRequirement, TypeError):
        return False


def _with_extra(requirement: Any, extra: str) -> Any:
    """``requirement`` with ``extra`` among its extras where it names aotpack; as it was otherwise."""
    try:
        req = Requirement(requirement)
    except (InvalidRequirement, TypeError):
        return requirement
    if canonicalize_name(req.name) != "aotpack" or extra in req.extras:
        return requirement
    req.extras.add(extra)
    return str(req)


def _project_sources(setting: str) -> Sources:
    """The files of the recipe ``recipe =`` names, read without importing a kernel, each by path inside the project
    (the current folder), links followed: a wheel and an sdist are built from the project's own files, never from
    one elsewhere that a setting, the recipe or a link points at. Kernels named by module are found as in any build
    (an installed package, the project's own), and never checked or packed here: finding one imports its package."""
    root = Path.cwd().resolve()
    _inside(root, Path(setting), "pyproject.toml: [tool.aotpack] recipe =")
    if "project" in _project() and Path(setting).resolve().parent != root:
        raise UsageError(f"pyproject.toml: [project] describes the wheel, and [tool.aotpack] recipe = {setting!r} is "
                         "not beside it: move the recipe next to pyproject.toml (aotpack build reads the [project] "
                         "of the pyproject.toml beside a recipe, so both builds give the same wheel)")  # fmt: skip
    found = recipes.sources(setting)
    for path, what in _named(found):
        _inside(root, path, f"{found.path}: {what}")
    return found


def _named(found: Sources) -> list[tuple[Path, str]]:
    """Every file (or include folder) the recipe names, with what names it: its tables, each kernel's file and the
    helpers and headers beside it the build reads, its include folders and tuning hooks, the Triton cache entries
    and torch.compile's caches."""
    named = [(t, "tables:") for t in found.tables]
    for k in found.kernels:
        if k.source.path is not None:
            beside = cache.files_beside(BACKENDS[k.backend].source_suffixes, k.source.path.parent, k.include_dirs)
            named += [(f, f"kernel {k.name}:") for f in beside]
        named += [(d, f"kernel {k.name}: include") for d in k.include_dirs]
        named += [(t.path, f"kernel {k.name}: tune:") for t in k.tune if t.path is not None]
    named += [(e.folder / f, "triton_cache:") for e in found.triton_cache for f in e.files]
    named += [(s.folder / f, "inductor_cache:") for s in found.inductor_cache for f in s.files]
    return named


def _inside(root: Path, path: Path, what: str) -> None:
    try:
        found = path.resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL, a name too long, a loop of links
        raise UsageError(f"{what} {str(path)[:80]!r}: cannot use the path ({exc})") from None
    if not found.is_relative_to(root):
        link = f" (a link to {found})" if found != path.absolute() else ""
        raise UsageError(f"{what} {path}{link} lies outside the project ({root}): a wheel and an sdist are built from "
                         "the project's own files; move or copy it into the project")  # fmt: skip


def _in_toolchain(kept: toolchain.Toolchain, s: dict[str, Any], wheel_directory: str) -> str:
    """``aotpack build`` with the project's settings, run with the Triton release kept in the cache."""
    argv = ["build", s["recipe"], *(["-j", str(s["jobs"])] if "jobs" in s else []),
            *(["--cuda", s["cuda"]] if "cuda" in s else []), *(["--strict"] if s.get("strict") else []),
            *([] if s.get("cache", True) else ["--no-cache"]),
            *(["--line-info"] if s.get("line-info") else []), *(["-q"] if s.get("quiet") else [])]  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix=".aotpack-", dir=wheel_directory))
    try:
        if toolchain.run_build(kept, [*argv, "-o", str(scratch)]) != 0:
            raise UsageError(f"the build with Triton {kept.version} failed (its messages are above)")
        (made,) = scratch.glob("*.whl")
        return made.rename(Path(wheel_directory) / made.name).name
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    """``<name>-<version>.tar.gz``: the recipe and every file of the project it names, plus pyproject.toml, README
    and LICENSE; reproducible (sorted, fixed times and owners). Found without importing a kernel: an isolated
    front end installs no build requirement for it (``get_requires_for_build_sdist``), so neither Triton nor the
    kernels' own imports are there."""
    s = _settings(config_settings)
    writable_folder(Path(sdist_directory), "the sdist folder")
    found = _project_sources(s["recipe"])
    root = Path.cwd().resolve()
    files = {found.path.resolve(), *(path.resolve() for path, _ in _named(found) if not path.is_dir())}
    for name in EXTRA_FILES:
        if os.path.lexists(name):
            _inside(root, Path(name), "the project's")
            if not (root / name).is_file():  # a folder, a FIFO (never opened: it would wait for a writer)
                raise UsageError(f"the project's {name} is not a file; make it one, or remove it")
            files.add(root / name)  # packed under its own name, whatever it links to inside
    name = f"{found.package}-{found.version}"
    files.update(p.resolve() for p in (found.project.files if found.project else ()))  # its readme, license files
    spec = wheel.WheelSpec(distribution=found.package, version=found.version, tag="", summary=found.summary,
                           generator="", files=(), license=found.license,
                           license_files=found.project.license_files if found.project else (),
                           **wheel.project_fields(found.project))  # fmt: skip
    entries = [(f"{name}/PKG-INFO", wheel.core_metadata(spec).encode())]
    for p in sorted(files):
        try:
            entries.append((f"{name}/{p.relative_to(root).as_posix()}", p.read_bytes()))
        except OSError as exc:
            raise UsageError(f"cannot read {p} for the sdist: {exc.strerror}; make it readable") from None
    stamp = wheel.source_date_epoch()
    out = Path(sdist_directory) / f"{name}.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in sorted(entries):
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(data), stamp, 0o644
            tar.addfile(info, io.BytesIO(data))
    with atomic_file(out) as f:
        f.write(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=stamp))
    return out.name
