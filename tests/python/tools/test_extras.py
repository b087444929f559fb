"""Issue 49: an integration imported without the packages of its extra (pyproject.toml) fails with
an ImportError that names the extra to install, not with an error from inside another package."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "statement, missing, extra",
    [
        ("import mmfeed.hf", "accelerate", "mmfeed[hf]"),
        ("import mmfeed.hf", "transformers", "mmfeed[hf]"),
        ("from mmfeed.hf import SFTTrainer", "trl", "mmfeed[trl]"),
        ("import mmfeed.torch", "torch", "mmfeed[torch]"),
        ("import mmfeed.ray", "ray", "mmfeed[ray]"),
    ],
)
def test_an_integration_without_its_extra_names_the_extra(statement, missing, extra):
    # A module set to None in sys.modules cannot be imported: as if it were not installed.
    code = f"import sys; sys.modules[{missing!r}] = None; {statement}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and f"pip install '{extra}'" in last, run.stderr
