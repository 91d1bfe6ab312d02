"""Stage 1, YAML -> Recipe: the position-keeping YAML reader (``yamlnodes``), the shared field readers
(``fields``, ``args``), the kernel steps every backend shares (``kernel``), the top level (``read``) and
dispatch tables (``tables``). A backend's own keys are read by its module behind ``readers.KernelReader``
(``backends/<name>/recipe.py``), which ``read`` is given: this package imports no backend.
``aotpack.load`` (``backends/recipes.py``) reads a recipe with every backend's reader.

Why the readers are written here rather than a schema validator's (jsonschema, pydantic): every message says the
recipe's ``file:line:col`` and key path, with the keys it could have meant, and many checks span keys and
backends (a grid's names against the signature, a constexpr against its types, a config against a target);
a schema states the shapes (``manifest.json_schema`` does, for what aotpack writes), not these. PyYAML's
composer gives the node graph with positions, which the bounds (aliases counted at each use, depth, size) walk
before a value is built; ruamel.yaml, which could read too, is used where its round trip is needed (record's
merges keep a recipe's comments, order and quoting)."""
