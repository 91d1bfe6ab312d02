"""How aotpack writes a count in its messages: ``1 wheel``, ``2 wheels``, ``0 wheels``, never ``1 wheels``."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` and the noun it counts, singular for exactly one; ``words`` is the plural where adding an "s" to
    ``word`` does not make it ("entry", "entries")."""
    return f"{count} {word if count == 1 else words or word + 's'}"
