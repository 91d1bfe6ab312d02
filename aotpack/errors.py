"""The one error hierarchy of aotpack.

Every error a user can cause or fix is an ``AotpackError``; the CLI's ``main()`` catches it once,
prints its message and exits with its ``exit_code``, one per class (``EXIT_CODES``; docs/cli.md's
"Exit codes" lists them). Messages say what is wrong, where, and what to do next.
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in a recipe file (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class AotpackError(Exception):
    """Base of every error aotpack reports to its user."""

    exit_code = 1


class RecipeError(AotpackError):
    """The recipe is invalid; the message starts with ``file:line:col``."""

    exit_code = 8

    def __init__(self, message: str, where: Location | None = None) -> None:
        self.where = where
        self.bare_message = message
        super().__init__(f"{where}: {message}" if where else message)

    def __reduce__(self) -> tuple[type[RecipeError], tuple[str, Location | None]]:
        return (type(self), (self.bare_message, self.where))


class UsageError(AotpackError):
    """A command-line argument cannot work (a folder that is a file or not writable, a missing tool). The
    code is argparse's own for the options it refuses: both are a command line to correct."""

    exit_code = 2


class ToolNotFound(AotpackError):
    """A tool aotpack needs (Triton, a C compiler, auditwheel) is missing or too old. ``extra`` names aotpack's
    extra that installs it, where one does: a kernel project's PEP 517 build names it in its ``requires``, as
    nothing installed by hand reaches an isolated build (``build_meta``)."""

    exit_code = 3

    def __init__(self, message: str, extra: str | None = None) -> None:
        self.extra = extra
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ToolNotFound], tuple[str, str | None]]:
        return (type(self), (str(self), self.extra))


class ToolFailed(AotpackError):
    """An external command failed; keeps the command line, return code and output."""

    exit_code = 4

    def __init__(self, command: tuple[str, ...], returncode: int, output: str, hint: str = "") -> None:
        self.command = command
        self.returncode = returncode
        self.output = output
        self.hint = hint
        text = f"command failed with exit code {returncode}: {' '.join(command)}\n{output.rstrip()}"
        super().__init__(f"{text}\n{hint}" if hint else text)

    def __reduce__(self) -> tuple[type[ToolFailed], tuple[tuple[str, ...], int, str, str]]:
        return (type(self), (self.command, self.returncode, self.output, self.hint))


class CompileError(AotpackError):
    """A kernel has no variant left after compilation (or any failed under ``--strict``)."""

    exit_code = 5


class WheelError(AotpackError):
    """The wheel could not be assembled, repaired or checked."""

    exit_code = 6


class RecordError(AotpackError):
    """``aotpack record`` could not run or record the program."""

    exit_code = 7


class OutputError(AotpackError, OSError):
    """A file aotpack writes could not be written (a full disk, a read-only or vanished folder). Also an
    OSError, so that a writer whose output is optional (the cache's size stamp) still skips it."""

    exit_code = 9

    def __init__(self, errno: int | None, reason: str, path: str, then: str = "") -> None:
        super().__init__(errno, reason, path)  # OSError's own fields: errno, strerror (the reason), filename
        self.then = then  # what else the command did or left (a partial recording kept elsewhere)

    def __str__(self) -> str:
        name = str(self.filename)
        return f"cannot write {name}: {self.strerror}; {advice(self.errno, name)}{self.then}"


def advice(errno: int | None, name: str, otherwise: str = "write somewhere else") -> str:
    """What to do about a path the system refused (a file that could not be written, or opened), by its reason."""
    if errno in (_errno.ENOSPC, _errno.EDQUOT, _errno.EFBIG):
        return "free space there, or write somewhere else"
    if errno in (_errno.EACCES, _errno.EPERM, _errno.EROFS):
        return "make it writable for you (a read-only folder or file system, an immutable file) or write elsewhere"
    if errno == _errno.ENAMETOOLONG:
        longest = max(len(part.encode()) for part in name.split("/"))
        return f"a name in the path is longer than the system takes ({longest} bytes); give a shorter one"
    if errno == _errno.ENOTDIR:
        return "a part of the path is a file, not a folder; give another path"
    return otherwise


class TuneError(AotpackError):
    """Tuning could not run (no GPU, package not installed, a hook failed)."""

    exit_code = 10


class ScaffoldError(AotpackError):
    """``aotpack new`` cannot write the project (an invalid name, a folder in the way)."""

    exit_code = 11


def printable(text: str) -> str:
    """Text from a file aotpack did not write, safe to print on a terminal: each character that is not printable
    (controls and escape sequences, bidirectional overrides, line separators) written as its escape (``\\x1b``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def shown(exc: AotpackError) -> str:
    """The line that reports ``exc`` (the CLI's, the PEP 517 backend's): a message may quote what a file held (a
    lone surrogate, a file name with a terminal's escape sequence in it), printed escaped line by line, whatever
    stderr's encoding."""
    text = "\n".join(printable(line) for line in str(exc).split("\n"))
    return f"aotpack: error: {text}".encode("utf-8", "backslashreplace").decode("utf-8")


# every class's exit code, the documented table (tests check each class has its own)
EXIT_CODES: dict[type[AotpackError], int] = {
    cls: cls.exit_code
    for cls in (AotpackError, UsageError, ToolNotFound, ToolFailed, CompileError, WheelError, RecordError,
                RecipeError, OutputError, TuneError, ScaffoldError)
}  # fmt: skip
