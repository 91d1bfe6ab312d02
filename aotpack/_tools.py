"""External tools through one wrapper: log the command, capture its output, and on failure raise
``ToolFailed`` that keeps the command line, return code and output."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence

from .errors import ToolFailed, ToolNotFound

log = logging.getLogger("aotpack")


def run(command: Sequence[str], *, env: Mapping[str, str] | None = None, hint: str = "", cwd: str | None = None) -> str:
    """Run a command; return its combined output."""
    command = tuple(str(c) for c in command)
    log.debug("$ %s", " ".join(command))
    try:
        proc = subprocess.run(
            command, env=dict(env) if env is not None else None, cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise ToolNotFound(f"{command[0]} not found; {hint or 'install it and try again'}") from None
    if proc.returncode != 0:
        raise ToolFailed(command, proc.returncode, proc.stdout, hint)
    return proc.stdout
