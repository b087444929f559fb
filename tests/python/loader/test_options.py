"""The Loader's options are listed once (include/mmfeed/loader_options.h): the Python binding,
`mmfeed run`'s flags and config files, and the Python docstring all come from that table, so
none of them may lack an option the engine has (issue 17: the copies had drifted)."""

import json
import subprocess

import pytest

import mmfeed
from mmfeed import _mmfeed

OPTIONS = _mmfeed.loader_options()

# A value of each type other than the default, as Python passes it and as the CLI reads it.
SAMPLE = {
    "str": ("x", "x"),
    "list[str]": (["a.jsonl"], "a.jsonl"),
    "list[float]": ([0.5], "0.5"),
    "list[int]": ([3], "3"),
    "int": (3, "3"),
    "float": (0.25, "0.25"),
    "bool": (False, "false"),
}


def sample_value(option):
    if "|" in option["type"]:
        name = option["type"].split("|")[-1]
        return name, name
    return SAMPLE[option["type"]]


def test_the_table_names_every_option_once_with_a_doc():
    names = [o["name"] for o in OPTIONS]
    assert len(names) == len(set(names))
    assert {
        "manifests",
        "tokenizer",
        "mode",
        "on_error",
        "shard_remainder",
        "ordered",
        "max_buffered_bytes",
        "trace_path",
        "train_reasoning",
        "pin_device",
    } <= set(names)
    for o in OPTIONS:
        assert o["doc"] and o["type"], o


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o["name"])
def test_python_takes_every_option(option):
    _mmfeed._check_loader_options({option["name"]: sample_value(option)[0]})


def test_python_refuses_an_unknown_option_and_a_wrong_choice():
    with pytest.raises(ValueError, match="unknown loader option 'batchsize'"):
        _mmfeed._check_loader_options({"batchsize": 8})
    with pytest.raises(TypeError, match="'shard_remainder' must be one of pad, drop or keep, not 'even'"):
        _mmfeed._check_loader_options({"shard_remainder": "even"})
    with pytest.raises(TypeError, match="'workers' must be an integer"):
        _mmfeed._check_loader_options({"workers": "four"})


def test_the_docstring_lists_every_option_with_its_default():
    doc = mmfeed.Loader.__doc__
    for o in OPTIONS:
        line = next((l for l in doc.splitlines() if l.strip().startswith(o["name"] + ":")), None)
        assert line is not None, o["name"]
        if o["default"]:
            default = o["default"].capitalize() if o["type"] == "bool" else o["default"]
            assert f"(default {default})" in line


def test_cli_help_lists_every_option(cli):
    usage = subprocess.run([cli, "run", "--help"], capture_output=True, text=True, check=True).stdout
    for o in OPTIONS:
        assert "--" + o["name"].replace("_", "-") in usage, o["name"]


@pytest.mark.parametrize(
    "option", [o for o in OPTIONS if o["name"] not in ("manifests", "tokenizer")], ids=lambda o: o["name"]
)
def test_cli_and_config_files_take_every_option(cli, tmp_path, option):
    """Each flag and config key is parsed (the run then stops at the missing tokenizer, not at the option)."""
    flag = "--" + option["name"].replace("_", "-")
    value = sample_value(option)[1]
    args = [flag, value] if option["type"] != "bool" else ["--no-" + flag[2:]]
    r = subprocess.run([cli, "run", *args, "m.jsonl"], capture_output=True, text=True)
    assert "unknown" not in r.stderr and "takes" not in r.stderr, r.stderr
    assert "LoaderConfig.tokenizer" in r.stderr, r.stderr
    config = tmp_path / "c.json"
    config.write_text(json.dumps({option["name"]: sample_value(option)[0]}))
    r = subprocess.run([cli, "run", "--config", config, "m.jsonl"], capture_output=True, text=True)
    assert "LoaderConfig.tokenizer" in r.stderr, r.stderr


def test_cli_names_what_a_choice_takes(cli):
    r = subprocess.run([cli, "run", "--on-error", "ignore", "m.jsonl"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "on_error takes skip or fail, not 'ignore'" in r.stderr
