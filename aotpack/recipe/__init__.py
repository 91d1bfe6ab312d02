"""Stage 1, YAML -> Recipe: the position-keeping YAML reader (``yamlnodes``), the shared field readers
(``fields``, ``args``), the kernel steps every backend shares (``kernel``), the top level (``read``) and
dispatch tables (``tables``). A backend's own keys are read by its module behind ``readers.KernelReader``
(``backends/<name>/recipe.py``), which ``read`` is given: this package imports no backend.
``aotpack.load`` (``backends/recipes.py``) reads a recipe with every backend's reader."""
