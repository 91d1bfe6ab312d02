"""aotpack: ahead-of-time GPU kernel bundles as manylinux wheels that need only the NVIDIA driver.

The pipeline, one package per stage: ``recipe/`` (YAML -> Recipe) -> ``plan/`` (variants) ->
``backends/`` (one folder per backend: its recipe keys, its compile, Triton's ``record/``) -> ``codegen/``
(C tables, binding, Python package) -> ``pipeline/`` (native code, wheel, repair; ``pipeline.build.run``
runs them all) and ``runtime/`` (the C and Python every wheel ships); ``commands/`` is the command line.
The data between the stages is frozen (``model``), the one error hierarchy ``errors``.
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
