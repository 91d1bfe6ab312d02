"""aotpack's version: its one home (pyproject.toml reads it from here; the package's modules import it,
not the package, so no import runs in a circle)."""

__version__ = "0.1.0"
