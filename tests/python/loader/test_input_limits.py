"""Issue 31: numbers range-checked where they are read, plans sized against their limits.

The CLI tests (`-k cli`) need only the mmfeed binary; the Loader ones need the extension.
"""

import subprocess

import pytest


def run_cli(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=60)


# Issue 31, finding 9: --step-ms was read with atof: "abc" meant 0, "1e20" overflowed the sleep.
@pytest.mark.parametrize("value", ["abc", "1e20", "nan", "-1", "5ms", ""])
def test_cli_run_refuses_a_step_ms_that_is_not_a_number_in_range(cli, value):
    proc = run_cli(cli, "run", "--step-ms", value, "missing.jsonl")
    assert proc.returncode == 2, proc.stderr
    assert f"--step-ms takes a number in 0..86400000, not '{value}'" in proc.stderr


# Issue 31, finding 9: inspect read its numbers with atol: "abc" meant 0, "1e3" meant 1.
@pytest.mark.parametrize(
    "flag, value",
    [
        ("--batch", "abc"),
        ("--batch", "-1"),
        ("--batch-size", "1e3"),
        ("--token-budget", "x"),
        ("--max-pixels", "99999999999999999999"),
        ("--seed", "-3"),
    ],
)
def test_cli_inspect_refuses_numbers_it_cannot_read(cli, flag, value):
    proc = run_cli(cli, "inspect", "missing.jsonl", "--tokenizer", "missing.json", flag, value)
    assert proc.returncode == 2, proc.stderr
    assert flag.lstrip("-").replace("-", "_") in proc.stderr or flag in proc.stderr, proc.stderr
    assert f"'{value}'" in proc.stderr, proc.stderr


# Issue 31, finding 9: fetch's integers were range-checked below only, then narrowed (an
# --inflight past 2^63 wrapped, a --max-attempts past 2^31 became negative).
@pytest.mark.parametrize(
    "flag, value",
    [("--inflight", "99999999999999999999"), ("--max-attempts", "4294967297"), ("--list-page-size", "2147483648")],
)
def test_cli_fetch_refuses_integers_past_their_field(cli, flag, value):
    proc = run_cli(cli, "fetch", flag, value, "missing-file")
    assert proc.returncode == 2, proc.stderr
    assert f"{flag} takes an integer in" in proc.stderr, proc.stderr


# Issue 31, finding 7 (needs the extension): reshard_states took a position of 10**12.
def test_reshard_states_refuses_a_position_past_the_old_ranks_epoch():
    from mmfeed import Loader

    fingerprint = {"samples": "10", "shard_remainder": "pad"}
    states = [
        {
            "seed": 0,
            "rank": r,
            "world_size": 2,
            "epoch": 0,
            "position": 5,
            "packed_delivered": 0,
            "fingerprint": fingerprint,
        }
        for r in range(2)
    ]
    Loader.reshard_states(states, 0, 3)
    states[1]["position"] = 10**12
    with pytest.raises(ValueError, match="1000000000000"):
        Loader.reshard_states(states, 0, 3)
