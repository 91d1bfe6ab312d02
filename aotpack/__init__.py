"""aotpack: ahead-of-time GPU kernel bundles as manylinux wheels that need only the NVIDIA driver.

The pipeline, one module per stage: ``recipe`` (YAML -> Recipe) -> ``plan`` (variants) ->
``compilers`` (cubins) -> ``codegen`` (C tables, binding, Python package) -> ``native`` (the
extension module) -> ``wheel`` -> ``repair`` (auditwheel). ``build`` runs them all; ``cli`` is the
command line.
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
