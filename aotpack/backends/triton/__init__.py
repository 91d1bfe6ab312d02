"""The Triton backend: what it states to the generic stages (``backend``), its recipe keys (``recipe``),
reading a kernel as Triton's JIT does (``introspect``), what compiled code writes (``mutation``), the
compile (``compiler``), the Triton releases and what differs between them (``releases``) and a release kept
in aotpack's cache for ``--triton`` (``toolchain``); ``record/`` is ``aotpack record`` and ``activate()``'s
recording side."""
