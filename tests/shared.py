"""What unit and integration tests share: the recipes under tests/fixtures, as text."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOOD = (FIXTURES / "kit.yaml").read_text()  # kernel add.py: write it beside (the kernel_dir fixture)
SMALL = (FIXTURES / "small.yaml").read_text()  # kernel kernels/add.py: a project lays it out there
# the same recipe naming the example kernel by its absolute path: it builds from any folder
SMALL_ANYWHERE = SMALL.replace("kernels/add.py", f"{ROOT / 'examples'}/add.py")
