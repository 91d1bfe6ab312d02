"""Files -> a reproducible wheel: sorted entries, fixed timestamps (SOURCE_DATE_EPOCH) and
permissions, RECORD with sha256 hashes, written atomically."""

from __future__ import annotations

import base64
import hashlib
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.metadata import ExceptionGroup, Metadata
from packaging.specifiers import SpecifierSet

from .. import facts, values
from .._temp import atomic_file
from ..errors import UsageError
from ..model import Project

ZIP_EPOCH = 315532800  # 1980-01-01, the earliest time a zip file can hold
LATEST = 2**32 - 1  # 2106-02-07, the latest time gzip's header (the sdist's) can hold


@dataclass(frozen=True, kw_only=True)
class WheelSpec:
    distribution: str  # normalized: letters, digits, _
    version: str
    tag: str  # e.g. cp39-abi3-linux_x86_64
    summary: str
    requires_python: str
    generator: str
    files: tuple[tuple[str, bytes], ...]  # path inside the wheel -> content (package files only)
    license: str | None = None  # SPDX expression (License-Expression)
    license_files: tuple[tuple[str, bytes], ...] = ()  # name -> text, shipped in .dist-info/licenses/
    headers: tuple[tuple[str, str], ...] = ()  # further METADATA fields ([project]: authors, URLs, requirements...)
    readme: tuple[str, str] | None = None  # (content type, text): the METADATA body

    @property
    def filename(self) -> str:
        return f"{self.distribution}-{self.version}-{self.tag}.whl"

    @property
    def dist_info(self) -> str:
        return f"{self.distribution}-{self.version}.dist-info"


def project_fields(project: Project | None) -> dict[str, Any]:
    """The WheelSpec fields a recipe's ``[project]`` gives (``recipe/project.py``): Requires-Python (never below the
    abi3 wheel's 3.9), the further METADATA fields and the readme (its license files: ``license_files``)."""
    if project is None:
        return {"requires_python": facts.REQUIRES_PYTHON}
    wanted = SpecifierSet(facts.REQUIRES_PYTHON) & SpecifierSet(project.requires_python or "")
    return {"requires_python": str(wanted), "headers": project.headers, "readme": project.readme}


def source_date_epoch() -> int:
    """The time stamped on every member of a wheel or sdist: $SOURCE_DATE_EPOCH (seconds since 1970), no earlier
    than a zip can hold, and no later than gzip's header can (2106); unset or empty, 1980-01-01."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if not value:
        return ZIP_EPOCH
    try:
        return max(ZIP_EPOCH, values.count(value, "a time in seconds since 1970", 0, LATEST))
    except ValueError as exc:
        raise UsageError(f"$SOURCE_DATE_EPOCH: {exc}; set it so, or unset it") from None


def core_metadata(spec: WheelSpec) -> str:
    """The core metadata (the wheel's METADATA, the sdist's PKG-INFO), checked by ``packaging.metadata``: read
    back by the library pip uses, every field must validate (name, version, SPDX expression, specifiers, the
    metadata version the fields need). It is written here,
    not by ``packaging.metadata.Metadata.as_rfc822`` (packaging 26+): a serializer's layout may change between
    its releases, and the wheel's bytes must depend only on the recipe, not on the build environment's
    packaging."""
    fields = [spec.distribution, spec.version, spec.summary, spec.requires_python, spec.generator,
              spec.license or "", *(name for name, _ in spec.license_files), *(v for _, v in spec.headers),
              *(spec.readme[:1] if spec.readme else ())]  # fmt: skip
    for field in fields:
        if any(not c.isprintable() for c in field):  # a header value never spans lines (the recipe checks it)
            raise ValueError(f"a METADATA field holds a control character: {field!r}")
    text = (
        "Metadata-Version: 2.4\n"
        f"Name: {spec.distribution}\n"
        f"Version: {spec.version}\n"
        f"Summary: {spec.summary}\n"
        + (f"License-Expression: {spec.license}\n" if spec.license else "")
        + "".join(f"License-File: {name}\n" for name, _ in spec.license_files)
        + f"Requires-Python: {spec.requires_python}\n"
        + "".join(f"{name}: {value}\n" for name, value in spec.headers)
        + (f"Description-Content-Type: {spec.readme[0]}\n\n{spec.readme[1]}" if spec.readme else "")
    )
    try:
        Metadata.from_email(text, validate=True)
    except ExceptionGroup as group:  # packaging's InvalidMetadata, one per field
        raise ValueError("METADATA does not validate: " + "; ".join(map(str, group.exceptions))) from None
    return text


def metadata_files(spec: WheelSpec) -> tuple[tuple[str, bytes], ...]:
    metadata = core_metadata(spec)
    wheel = f"Wheel-Version: 1.0\nGenerator: {spec.generator}\nRoot-Is-Purelib: false\nTag: {spec.tag}\n"
    licenses = tuple((f"{spec.dist_info}/licenses/{name}", text) for name, text in spec.license_files)
    return ((f"{spec.dist_info}/METADATA", metadata.encode()), (f"{spec.dist_info}/WHEEL", wheel.encode()),
            *licenses)  # fmt: skip


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def write_wheel(spec: WheelSpec, out_dir: Path) -> Path:
    entries = sorted([*spec.files, *metadata_files(spec)])
    record_name = f"{spec.dist_info}/RECORD"
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{record_name},,\n"
    entries.append((record_name, record.encode()))
    stamp = time.gmtime(source_date_epoch())[:6]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / spec.filename
    with atomic_file(target) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            mode = 0o755 if name.endswith(".so") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=9)
    return target
