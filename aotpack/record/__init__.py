"""``aotpack record``: run a workload under Triton's JIT and write the recipe of what it compiled.

The stages, in the order a recording takes them: ``program`` runs the program as a child with ``agent``
installed (or records in this process), ``events`` reads what the agent reports into typed events and gathers
them, ``existing`` reads and checks the recipe already there, ``kernels`` makes the recording's recipe data
(``widen`` widening constexprs to sets of values), and ``write`` writes it anew (``yamlio``) or merges it into
the recipe as it is written (``merge``). ``misses`` adds the classes built packages reported missing.
"""

from .events import Compilation, Events, Function, Unrecordable, compilation, read_events
from .existing import Existing, existing_recipe
from .program import RUNS, Outcome, Recording, Summary, check_package, record, recording
from .widen import parse_widen
from .write import recipe_text, write

__all__ = [
    "RUNS",
    "Compilation",
    "Events",
    "Existing",
    "Function",
    "Outcome",
    "Recording",
    "Summary",
    "Unrecordable",
    "check_package",
    "compilation",
    "existing_recipe",
    "parse_widen",
    "read_events",
    "recipe_text",
    "record",
    "recording",
    "write",
]
