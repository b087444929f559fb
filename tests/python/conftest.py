import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli() -> Path:
    """The mmfeed CLI from the CMake build tree (make build puts it there)."""
    path = Path(os.environ.get("MMFEED_CLI", ROOT / "build" / "mmfeed"))
    if not path.is_file():
        pytest.fail(f"{path} not built: run `make build` first")
    return path
