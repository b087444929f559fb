import os
import subprocess

import pytest

import mmfeed


def test_version_lists_the_native_libraries(cli):
    out = subprocess.run([cli, "version"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"mmfeed {mmfeed.__version__}"
    for lib in mmfeed.linked_libraries():
        assert lib["name"] in out


def test_unknown_command_fails_with_usage(cli):
    run = subprocess.run([cli, "frobnicate"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown command 'frobnicate'" in run.stderr
    assert "usage: mmfeed" in run.stderr


def test_installed_cli_is_on_the_venv_path():
    import shutil
    import sys
    from pathlib import Path

    found = shutil.which("mmfeed", path=str(Path(sys.executable).parent))
    assert found, "pip install should put the mmfeed CLI next to the venv's python"
    out = subprocess.run([found, "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("mmfeed ")


@pytest.mark.parametrize("command, script", [("make-dataset", "tests/support/datagen.py"), ("bench", "bench/pipeline.py")])
def test_development_commands_without_a_checkout_say_what_they_need(cli, tmp_path, command, script):
    # As from a wheel built from an sdist: the source tree the CLI was built from is gone.
    env = dict(os.environ, MMFEED_SOURCE_DIR=str(tmp_path))
    run = subprocess.run([cli, command, "--out", tmp_path / "out"], capture_output=True, text=True, env=env)
    assert run.returncode == 127
    assert run.stderr.startswith(f"mmfeed {command}: {script} not found in {tmp_path}: ")
    assert "MMFEED_SOURCE_DIR" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()
