from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("unit", "integration", "gpu")  # a test's tier is its folder's name (see pyproject's markers)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier: ``pytest`` alone runs the unit tier (pyproject's addopts), and
    ``-m "unit or integration or gpu"`` (``make test``) or ``-m gpu`` choose others."""
    for item in items:
        tier = next((part for part in item.path.relative_to(ROOT / "tests").parts if part in TIERS), None)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: a test lives under tests/unit, tests/integration or tests/gpu")
        item.add_marker(tier)


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A folder with a copy of the example kernels, for recipes written by tests."""
    for name in ("add.py", "softmax.py", "matmul.py"):
        (tmp_path / name).write_text((ROOT / "examples" / name).read_text())
    return tmp_path
