"""bench/budget.py: the cores a process may use (the engine's count), the counts a sweep
tries, and which of mmfeed's stages count as single-threaded for the Amdahl ceiling."""

import os

import budget
import pytest


def test_cores_available_is_at_most_the_affinity():
    # The cgroup walk itself is tested in C++ (tests/core/cpus_test.cc) against built cgroup trees.
    assert 1 <= budget.cores_available() <= len(os.sched_getaffinity(0))


def test_doubling_ends_at_the_count_itself():
    assert budget.doubling(1) == [1]
    assert budget.doubling(2) == [1, 2]
    assert budget.doubling(6) == [1, 2, 4, 6]
    assert budget.doubling(16) == [1, 2, 4, 8, 16]


def test_pin_refuses_more_cores_than_allowed():
    allowed = len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match=f"cannot pin to {allowed + 1} cores: this process may use {allowed}"):
        budget.pin(allowed + 1)


STAGES = {
    "wall_s": 2.0,
    "process": {"items": 8, "threads": 2, "busy_s": 3.0},
    "pixels": {"items": 8, "threads": 3, "busy_s": 1.0},
    "assemble": {"items": 2, "threads": 1, "busy_s": 0.1},
    "consumer_wait": {"items": 3, "threads": 1, "busy_s": 1.5},
}


def test_single_thread_stages_are_those_marked_one_thread_never_waits():
    assert budget.single_thread_stages(STAGES) == ["assemble"]


def test_single_thread_stages_default_to_assemble_when_unmarked():
    unmarked = {
        name: {k: v for k, v in stage.items() if k != "threads"} if isinstance(stage, dict) else stage
        for name, stage in STAGES.items()
    }
    assert budget.single_thread_stages(unmarked) == ["assemble"]


def test_serial_share_reads_the_stages_from_the_widest_run():
    # With one worker the pool's stages are on one thread too; the 2-worker run says which are not.
    one = {name: dict(stage, threads=1) if isinstance(stage, dict) else stage for name, stage in STAGES.items()}
    runs = [{"workers": 1, "cpu_seconds": 5.0, "stages": one}, {"workers": 2, "cpu_seconds": 4.0, "stages": STAGES}]
    budget.serial_share(runs)
    assert [r["single_thread_stages"] for r in runs] == [["assemble"], ["assemble"]]
    assert [r["single_thread_share"] for r in runs] == [0.1 / 5.0, 0.1 / 4.0]
    assert runs[1]["amdahl_ceiling"] == 40.0
