"""The hostile-input corpus (issue 29): cases generated from the recipe language (every key, every mutation
kind), run through ``aotpack plan`` (and the PEP 517 settings reader) and classified GOOD / VAGUE / TRACEBACK /
HANG / CRASH / WRONG-ACCEPT.

    python -m tests.hostile --all --out hostile-report      # the whole corpus (a few minutes on 2 cores)
    python -m tests.hostile --sample 200 --seed 1           # a bounded sample

``generator`` makes the cases (one surface per input kind), ``runner`` runs and classifies them.
"""

from . import generator  # noqa: F401  (first: it registers commands.py's surfaces, which import it, whatever is imported)
