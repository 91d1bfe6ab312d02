"""The command line: ``cli`` parses and dispatches (the one place an ``AotpackError`` is caught and turned
into its message and exit code); one module per verb that has more than a few lines (``tune``, ``new``,
``inspect``, ``record``)."""
