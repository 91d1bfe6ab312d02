"""Every error class exits with its own code (tests/unit/test_docs.py checks docs/cli.md lists them)."""

from aotpack import errors


def test_every_error_class_has_its_own_exit_code():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.AotpackError)]
    assert set(classes) == set(errors.EXIT_CODES)
    codes = [c.exit_code for c in classes]
    assert len(codes) == len(set(codes)), codes
    assert 0 not in codes and all(0 < c < 126 for c in codes)  # shells keep 126-255 for their own meanings
