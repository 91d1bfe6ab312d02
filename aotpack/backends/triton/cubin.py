"""What a cubin says of its kernel's resources: the registers each thread holds, as ptxas records them in the
cubin's ``.nv.info`` sections (the attribute records ``cuobjdump --dump-resource-usage`` reads). The CUDA
backend reads them off ``ptxas -v``; Triton runs ptxas itself and keeps only the cubin. pyelftools (auditwheel's)
reads the ELF; the records are NVIDIA's, read here."""

from __future__ import annotations

import io
import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import Section, SymbolTableSection

EIATTR_REGCOUNT = 0x2F  # the attribute: (symbol index, registers per thread)
EIFMT_SVAL = 0x04  # a record whose 2-byte size follows and that many bytes of value; the other formats hold 2 bytes
RECORD = struct.Struct("<BBH")  # format, attribute, size (or an inline value)
SHF_COMPRESSED = 0x800  # an ELF section flag


def registers(image: bytes, entry: str) -> int | None:
    """The registers per thread of the kernel ``entry`` in a cubin; None where the cubin does not say (not an
    ELF, no such record)."""
    try:
        elf = ELFFile(io.BytesIO(image))
        symbols = elf.get_section_by_name(".symtab")
        if not isinstance(symbols, SymbolTableSection):
            return None
        for section in elf.iter_sections():
            if not (section.name == ".nv.info" or section.name.startswith(".nv.info.")) or not _inside(section, image):
                continue
            for symbol, count in _regcounts(section.data()):
                if symbol < symbols.num_symbols() and symbols.get_symbol(symbol).name == entry:
                    return count
    except (ELFError, struct.error, ValueError, OverflowError):  # (a damaged header: offsets past any size)
        return None
    return None


def _inside(section: Section, image: bytes) -> bool:
    """Whether a section's bytes lie in the image as they are: none that the file does not hold (SHT_NOBITS, whose
    size pyelftools would allocate) nor compressed ones (their size is what they inflate to)."""
    header = section.header
    stored = header["sh_type"] != "SHT_NOBITS" and not header["sh_flags"] & SHF_COMPRESSED
    return stored and 0 <= header["sh_offset"] and header["sh_offset"] + header["sh_size"] <= len(image)


def _regcounts(data: bytes) -> list[tuple[int, int]]:
    """The (symbol index, registers) records of one ``.nv.info`` section's attribute list."""
    found, at = [], 0
    while at + RECORD.size <= len(data):
        form, attribute, size = RECORD.unpack_from(data, at)
        at += RECORD.size
        if form != EIFMT_SVAL:
            continue
        if attribute == EIATTR_REGCOUNT and size >= 8 and at + 8 <= len(data):
            found.append(struct.unpack_from("<II", data, at))
        at += size
    return found
