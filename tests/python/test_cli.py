import subprocess

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
