"""The build, run in order by ``build.run``: plan, compile (``cache``: compiled variants and wheels kept by
content; ``distributed``: compiling on a Dask cluster), codegen, ``native`` (the C compiled into the
extension module and the C API library), ``wheel`` (a reproducible zip) and ``repair`` (auditwheel).
Named ``pipeline``, not ``build``: ``aotpack.build`` is the public function."""
