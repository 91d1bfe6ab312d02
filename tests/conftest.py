from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A folder with a copy of the example kernels, for recipes written by tests."""
    for name in ("add.py", "softmax.py", "matmul.py"):
        (tmp_path / name).write_text((ROOT / "examples" / name).read_text())
    return tmp_path
