"""Every error class exits with its own code, and the table the README documents is the one the CLI uses."""

import re
from pathlib import Path

from aotpack import errors

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_error_class_has_its_own_exit_code():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.AotpackError)]
    assert set(classes) == set(errors.EXIT_CODES)
    codes = [c.exit_code for c in classes]
    assert len(codes) == len(set(codes)), codes
    assert 0 not in codes and all(0 < c < 126 for c in codes)  # shells keep 126-255 for their own meanings


def test_the_readme_lists_every_exit_code_as_the_cli_returns_it():
    text = README.read_text()
    table = dict(re.findall(r"^\| (\d+) \| `(\w+)`", text, re.M))
    assert {int(code): name for code, name in table.items()} == {
        cls.exit_code: cls.__name__ for cls in errors.EXIT_CODES
    }
