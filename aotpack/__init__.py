"""aotpack: ahead-of-time GPU kernel bundles as manylinux wheels that need only the NVIDIA driver.

The pipeline, one package per stage: ``recipe/`` (YAML -> Recipe) -> ``plan/`` (variants) ->
``backends/`` (one folder per backend: its recipe keys, its compile) -> ``codegen/`` (C tables, binding, Python
package) -> ``pipeline/`` (native code, wheel, repair; ``pipeline.build.run`` runs them all). Beside the build,
``record/`` turns what a program compiled into a recipe; ``runtime/`` is everything that runs in a user's process
(the C and Python every wheel ships, and the recording agent); ``commands/`` is the command line. The data between
the stages is frozen (``model``), the one error hierarchy ``errors``.
"""

from ._version import __version__
from .backends.recipes import load
from .errors import AotpackError, CompileError, RecipeError, ToolFailed, ToolNotFound, WheelError
from .model import Recipe
from .pipeline.build import BuildResult, build
from .plan.variants import Variant, plan_variants

__all__ = [
    "AotpackError",
    "BuildResult",
    "CompileError",
    "Recipe",
    "RecipeError",
    "ToolFailed",
    "ToolNotFound",
    "Variant",
    "WheelError",
    "__version__",
    "build",
    "load",
    "plan_variants",
]
