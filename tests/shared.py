"""What unit and integration tests share: the recipes under tests/fixtures and how to lay one out."""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOOD = (FIXTURES / "kit.yaml").read_text()  # kernel add.py: write it beside (the kernel_dir fixture)
SMALL = (FIXTURES / "small.yaml").read_text()  # kernel kernels/add.py: small_project lays it out


def small_project(folder: Path) -> Path:
    """The small recipe in ``folder`` as a project of its own, its kernel in kernels/; returns the recipe."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "examples" / "add.py", folder / "kernels" / "add.py")
    (folder / "small.yaml").write_text(SMALL)
    return folder / "small.yaml"
